"""Forget means gone: after a thread or a person is forgotten, their text is in no row, no
free page, no write-ahead log of the store, not in the embedding cache (texts, digests or
vectors), and not in what the process holds in memory. The raw bytes of every file are
searched, while the Memory that forgot still holds them open, as a server would."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from membot import Bot, Memory, ScriptedLLM
from membot.embed import CachedEmbedder
from membot.memory import forgetting
from membot.memory.forgetting import derived_texts

# Words no other line has (and that the FTS5 stemmer leaves as they are).
SECRET_WORDS = ("zqxvbnm", "jxvlkwp", "frobnixt")
SAID = (
    "my locker code is zqxvbnm and nobody knows it",
    "the zqxvbnm code opens the blue locker at work",
    "my sister jxvlkwp lives far away",
    "I told jxvlkwp about the locker",
)


def raw_files(folder: Path) -> dict[str, bytes]:
    """Every file of the store and the cache, as bytes: db, -wal and -shm included."""
    return {path.name: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def traces(folder: Path, needles: dict[str, bytes]) -> list[str]:
    return [
        f"{what} in {name}"
        for name, content in raw_files(folder).items()
        for what, needle in needles.items()
        if needle in content
    ]


@pytest.fixture
def world(tmp_path: Path, embedder):
    """A store where al has said secret things everywhere a text can go, beside bo's lines."""
    folder = tmp_path / "store"
    cached = CachedEmbedder(embedder, folder / "cache" / "embeddings.db")
    memory = Memory(folder / "membot.db", embedder=cached)
    # The running summary is written below, so no model call takes a scripted reply.
    memory.configure_bot("membot", strategy="pairs", window_size=2, thread_summary=False)
    bot = Bot(memory, ScriptedLLM(["ok, frobnixt noted"] * len(SAID)))
    for text in SAID:  # lines, replies, the pairs' units (in memory and cached)
        bot.turn(text, user="al", thread="private")
    for text in ("I like tea", "tell me about the locker again"):  # a buffer: a private block
        turn = bot.turn(text, user="al", thread="later")
    assert any(block.thread == "private" for block in turn.recalled)
    state = memory.thread_state(bot="membot", user="al", thread="private")
    memory.save_thread_summary(state, "al keeps the zqxvbnm code; sister jxvlkwp", 2)
    points = "- 2026-11-23: HUMAN said: al's locker code is zqxvbnm\n- al's sister is jxvlkwp"
    memory.add_summary(bot="membot", user="al", thread="private", text=points)
    # Before 2026-11-26 a summary's points were embedded as written, dated: such a cached
    # vector must go too.
    memory.embed(["2026-11-23: HUMAN said: al's locker code is zqxvbnm"])
    memory.search("where is zqxvbnm", user="al")  # a query: never cached
    for text in ("I walk my dog", "my dog is called Rex"):
        bot.turn(text, user="bo", thread="walks")
    yield folder, memory
    memory.close()


def needles_for(memory: Memory, user: str, thread: str | None) -> dict[str, bytes]:
    """The words, whole texts, cache keys and vectors that must be gone."""
    lines = memory.history(user=user, thread=thread)
    summaries = memory.summaries(user=user)
    # A text someone else also said (the scripted "(scripted reply)") stays, rightly.
    staying = {
        line.text
        for person in memory.people("membot")
        for line in memory.history(user=person)
        if line.id not in {forgotten.id for forgotten in lines}
    }
    needles = {f"word {word!r}": word.encode() for word in SECRET_WORDS}
    # Written out here rather than asked of membot.memory.forgetting: the texts the embedder was
    # given — each line, each pair of a line and its reply (the pairs strategy's units),
    # each summary and its points.
    texts = [line.text for line in lines]
    texts += [
        f"{a.text} {b.text}"
        for a, b in itertools.pairwise(lines)
        if a.thread == b.thread and (a.role, b.role) == ("human", "bot")
    ]
    for summary in summaries:
        texts += [summary.text, *(point[2:] for point in summary.text.splitlines())]
    assert set(texts) <= set(derived_texts(lines, summaries, memory.window_shapes())) | staying
    for text in texts:
        if text in staying:
            continue
        needles[f"text {text[:30]!r}"] = text.encode()
        needles[f"digest of {text[:30]!r}"] = hashlib.sha256(text.encode()).digest()
    for line in lines:
        if line.text in staying:
            continue
        vector = memory.embed([line.text])[0]
        needles[f"vector of {line.text[:30]!r}"] = np.asarray(vector, np.float32).tobytes()
    return needles


def in_memory_texts(memory: Memory) -> list[str]:
    """What this process holds of the store's texts in memory: the strategies' lines and
    units (the vector index holds vectors only: checked by its scopes)."""
    return memory.recall_source.held_texts()


@pytest.mark.parametrize("thread", ["private", None], ids=["a thread", "a person"])
def test_forgotten_text_is_in_no_file_and_no_cache(world, thread: str | None) -> None:
    folder, memory = world
    needles = needles_for(memory, "al", thread)
    assert len(traces(folder, needles)) > 10  # the search finds them before
    assert any("zqxvbnm" in text for text in in_memory_texts(memory))

    removed = memory.forget(user="al", thread=thread)
    assert removed["lines"] == (8 if thread else 12) and removed["summaries"] == 1

    assert traces(folder, needles) == []
    assert not any(word in text for text in in_memory_texts(memory) for word in SECRET_WORDS)
    assert memory.index.scopes_held() == []
    # bo's memory is whole, and recall works on what is left.
    assert [line.text for line in memory.history(user="bo")][::2] == [
        "I walk my dog",
        "my dog is called Rex",
    ]
    turn = Bot(memory, ScriptedLLM()).turn("what is my dog called", user="bo", thread="walks")
    assert any("Rex" in line.text for block in turn.recalled for line in block.lines) or turn.feed
    assert not any(word in turn.prompt for word in SECRET_WORDS)
    assert traces(folder, needles) == []


BATCHES = 12


@pytest.mark.parametrize("how", ["forget", "delete_bot"])
def test_no_copy_a_page_split_left_behind_survives(tmp_path: Path, embedder, how: str) -> None:
    """An import beside another writer: as its lines' pages split, each move left the old
    bytes in the unused space of the page they left, where secure_delete never reaches (a
    probe found two forgotten lines in the file every run; the lines here are the probe's,
    since where the leftovers fall depends on the bytes written)."""
    from membot import LineInput

    folder = tmp_path / "store"
    memory = Memory(folder / "membot.db", embedder=embedder)
    other = Memory(folder / "membot.db", embedder=embedder)  # another process's writes
    memory.create_bot("coach")
    bot = "coach" if how == "forget" else "gone"
    for batch in range(BATCHES):
        said = [
            f"hank bulk line {batch * 100 + n} about IMPORTCANARY and gardening" for n in range(256)
        ]
        memory.add_many([LineInput(text, "hank", "imp", "human", bot) for text in said])
        for n in range(18):
            other.add(f"writer line {batch * 5 + n} plain words", user="w", thread="w", bot="coach")
    needles = {"hank's lines": b"IMPORTCANARY"}
    assert traces(folder, needles) != []
    if how == "forget":
        memory.forget(user="hank", bot="coach")
    else:
        memory.delete_bot("gone")
    assert traces(folder, needles) == []
    assert len(memory.history(user="w", bot="coach")) == BATCHES * 18
    other.close()
    memory.close()


def test_a_rewrite_that_could_not_run_is_done_by_the_next_removal(
    tmp_path: Path, embedder, monkeypatch
) -> None:
    """The rewrite comes after the forget committed: when it cannot run (another process
    writing past the wait), the caller is told to try again, and any later forget or
    deletion does it (a review: the forget's rows were gone, so its retry found nothing to
    rewrite)."""
    from membot import LineInput, StoreError
    from membot.store import sqlite as sqlite_store
    from membot.store.sqlite_lock import ProcessWriteLock

    folder = tmp_path / "store"
    memory = Memory(folder / "membot.db", embedder=embedder)
    other = Memory(folder / "membot.db", embedder=embedder)
    for batch in range(BATCHES):
        said = [f"hank bulk line {batch * 100 + n} about IMPORTCANARY and gardening"
                for n in range(256)]  # fmt: skip
        memory.add_many([LineInput(text, "hank", "imp", "human", "coach") for text in said])
        for n in range(18):
            other.add(f"writer line {batch * 5 + n} plain words", user="w", thread="w", bot="coach")
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECONDS", 0.2)
    writer = ProcessWriteLock(folder / "membot.db")  # another process, writing at length
    holding = contextlib.ExitStack()
    forgetting_drop_removed = forgetting.drop_removed

    def then_busy(*args, **kwargs):  # once the forget committed, before the rewrite
        forgetting_drop_removed(*args, **kwargs)
        holding.enter_context(writer.held(1))

    monkeypatch.setattr(forgetting, "drop_removed", then_busy)
    with holding, pytest.raises(StoreError, match="busy"):
        memory.forget(user="hank", bot="coach")
    monkeypatch.setattr(forgetting, "drop_removed", forgetting_drop_removed)
    assert memory.history(user="hank") == []  # forgotten from the tables
    assert traces(folder, {"hank's lines": b"IMPORTCANARY"}) != []  # not yet from the file
    memory.forget(user="nobody")  # any later removal finishes it
    assert traces(folder, {"hank's lines": b"IMPORTCANARY"}) == []
    other.close()
    memory.close()


def test_another_process_drops_forgotten_vectors_at_its_next_search(tmp_path: Path, embedder):
    """A second Memory on the store (another worker) drops every scope it held once it
    searches after the forgetting, not only the scope it searched."""
    first = Memory(tmp_path / "m.db", embedder=embedder)
    other = Memory(tmp_path / "m.db", embedder=embedder)
    first.add("my code is zqxvbnm", user="al", thread="t")
    first.add("I walk my dog", user="bo", thread="t")
    other.search("code", user="al")
    other.search("dog", user="bo")
    assert len(other.index.scopes_held()) == 2
    first.forget(user="al")
    other.search("dog", user="bo")
    assert len(other.index.scopes_held()) == 1
    first.close()
    other.close()


class ForgetsMidTurn(ScriptedLLM):
    """A model that, while it writes its reply, lets something else happen first: a forget
    or an end from another request of the same server (which takes no turn's lock)."""

    def __init__(self, meanwhile, reply: str) -> None:
        super().__init__([reply])
        self.meanwhile = meanwhile

    def complete(self, messages, max_tokens, *, schema=None):
        self.meanwhile()
        return super().complete(messages, max_tokens, schema=schema)


def test_a_reply_written_while_its_person_is_forgotten_is_not_stored(tmp_path, embedder):
    """The reply used to bring the person back: their thread re-made, the reply stored and
    found by search, its vector in the embedding cache."""
    folder = tmp_path / "store"
    memory = Memory(folder / "m.db", embedder=CachedEmbedder(embedder, folder / "e.db"))
    reply = "your zqxvbnm locker is on floor frobnixt"
    llm = ForgetsMidTurn(lambda: memory.forget(user="al"), reply)
    turn = Bot(memory, llm).turn("where is my zqxvbnm locker?", user="al", thread="t")
    assert turn.bot_line is None and any("the reply was not stored" in n for n in turn.notes)
    assert memory.people("membot") == [] and memory.history(user="al") == []
    assert memory.search("zqxvbnm locker floor", user="al") == []
    memory.close()
    assert traces(folder, {"the reply": reply.encode(), "a word": b"frobnixt"}) == []


def test_a_reply_does_not_take_up_a_thread_ended_while_it_was_written(memory) -> None:
    """Ended meanwhile, the thread stayed open: the reply's store reopened it, and its next
    ending summarised it again."""
    bot = Bot(memory, ScriptedLLM(["hello"]))
    bot.turn("hi", user="al", thread="t")
    ends = lambda: bot.end_thread(user="al", thread="t", remember=False)  # noqa: E731
    turn = Bot(memory, ForgetsMidTurn(ends, "bye")).turn("bye now", user="al", thread="t")
    assert turn.bot_line is not None and turn.bot_line.text == "bye"
    state = memory.thread_state(bot="membot", user="al", thread="t")
    assert state is not None and state.ended_at is not None
    bot.turn("back again", user="al", thread="t")  # a line said still takes it up
    assert memory.thread_state(bot="membot", user="al", thread="t").ended_at is None


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_no_store_brings_a_forgotten_person_back_with_a_late_reply(memory) -> None:
    llm = ForgetsMidTurn(lambda: memory.forget(user="al"), "a late reply")
    turn = Bot(memory, llm).turn("remember my locker", user="al", thread="t")
    assert turn.bot_line is None
    assert memory.people("membot") == [] and memory.count_lines() == 0


# Long enough to be stored with its parts (its sentences, each with a vector).
LONG_SECRET = (
    "I keep my spare key under the third flowerpot by the kitchen door, and the code for "
    "the garage is zqxvbnm, which I have never told my neighbours or my colleagues. "
    "My sister jxvlkwp knows it because she feeds the cat when I travel for work in the "
    "spring and again in the autumn. Please never repeat it to anybody at all, ever again."
)


def test_one_forgotten_line_is_in_no_index_no_file_and_no_cache(tmp_path: Path, embedder):
    """A person deletes one line: it goes from the lines, the full-text index, its vector
    and its parts' vectors, the units of the pairs strategy, what the process holds in
    memory, the embedding cache and the file's bytes at once; the rest of the thread stays."""
    folder = tmp_path / "store"
    memory = Memory(folder / "m.db", embedder=CachedEmbedder(embedder, folder / "e.db"))
    memory.configure_bot("membot", strategy="pairs", window_size=2, thread_summary=False)
    bot = Bot(memory, ScriptedLLM(["noted", "noted", "fine"]))
    bot.turn("I like tea in the morning", user="al", thread="t")
    turn = bot.turn(LONG_SECRET, user="al", thread="t")
    bot.turn("what do you know about my garage", user="al", thread="t")
    secret = turn.human_line
    assert secret is not None and memory.store.line_parts([secret.id])  # stored with parts
    bot_id, al = memory.store.bot_id("membot") or 0, memory.store.person_id("al")
    assert memory.store.lexical_search(["zqxvbnm"], bot_id, (al or 0,)) != []
    assert any("zqxvbnm" in text for text in in_memory_texts(memory))
    needles = {f"word {word!r}": word.encode() for word in SECRET_WORDS[:2]}
    needles["the line's vector"] = np.asarray(memory.embed([LONG_SECRET])[0], np.float32).tobytes()
    assert traces(folder, needles) != []

    memory.forget_line(secret.id, user="al")

    assert memory.store.line_parts([secret.id]) == {}
    assert memory.store.lexical_search(["zqxvbnm"], bot_id, (al or 0,)) == []
    assert all(m.line.id != secret.id for m in memory.search("garage code zqxvbnm", user="al"))
    assert not any(word in text for text in in_memory_texts(memory) for word in SECRET_WORDS)
    assert traces(folder, needles) == []
    assert [line.text for line in memory.history(user="al")][:2] == [
        "I like tea in the morning",
        "noted",
    ]
    memory.close()
    assert traces(folder, needles) == []


def test_a_forgotten_line_leaves_a_large_shared_scopes_approximate_index(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MEMBOT_APPROXIMATE_FROM a shared bot's lines are searched through an approximate
    graph: a line deleted by its person is taken out of it at once, here and in another
    process at its next search."""
    from membot.index.vectors import Scope

    monkeypatch.setenv("MEMBOT_APPROXIMATE_FROM", "30")
    memory = make_memory()
    memory.configure_bot("town", share_across_people=True)
    for n in range(40):
        memory.add(f"town line {n} about the square", user=f"p{n % 3}", bot="town", thread="t")
    memory.add("my safe code is zqxvbnm", user="al", bot="town", thread="t")
    other = make_memory()  # another process of the server
    (line,) = [line for line in memory.history(user="al")]
    vector = memory.embed([line.text], keep=False)[0]
    scope = Scope.of(memory.store.bot_id("town") or 0, None)
    for each in (memory, other):
        with each.recall_source.reading():
            assert each.index.search(vector, scope, 3)[0][0] == line.id
        assert each.index.approximate._scopes  # the graph, not the whole scope in memory

    memory.forget_line(line.id, user="al", bot="town")

    for each in (memory, other):
        with each.recall_source.reading():
            assert line.id not in [hit for hit, _ in each.index.search(vector, scope, 10)]


def test_a_deleted_key_point_is_in_no_file_and_no_cache_with_its_history(
    tmp_path: Path, embedder
) -> None:
    """A point corrected (its old text kept as history), then deleted by the person: neither
    wording is left in the store's bytes or the embedding cache; the other point stays."""
    folder = tmp_path / "store"
    memory = Memory(folder / "m.db", embedder=CachedEmbedder(embedder, folder / "e.db"))
    memory.add("my locker is by the door", user="al", thread="t")
    points = "- 2026-11-23: al said: my locker code is zqxvbnm\n- 2026-11-23: al said: I like tea"
    kept = memory.add_summary(bot="membot", user="al", thread="t", text=points)
    memory.correct_key_point(kept.id, 0, "my locker code is jxvlkwp", user="al")
    needles = {f"word {word!r}": word.encode() for word in SECRET_WORDS[:2]}
    vector = memory.embed(["my locker code is jxvlkwp"], keep=False)[0]
    needles["the point's vector"] = np.asarray(vector, np.float32).tobytes()
    assert len(traces(folder, needles)) >= 2  # the history's word and the new one's

    memory.forget_key_point(kept.id, 0, user="al")

    assert [point.text for point in memory.key_points(user="al")] == [
        "2026-11-23: al said: I like tea"
    ]
    assert traces(folder, needles) == []
    memory.close()
    assert traces(folder, needles) == []


def test_forgetting_a_person_forgets_every_identity_linked_with_them(world) -> None:
    """al linked with their text-message identity: forgetting al forgets what that identity
    said too (rows, files, cache, full-text and vector indexes), with the link and its code,
    and leaves bo whole."""
    folder, memory = world
    sms = "sms-5e2b0c"
    bot = Bot(memory, ScriptedLLM(["noted"] * 2))
    for text in ("my bike lock is frobnixt", "frobnixt is on the red bike"):
        bot.turn(text, user=sms, thread="texts")
    code = memory.link_code(user="al", bot="membot").code
    assert memory.link_with_code(code, user=sms, bot="membot").linked == ("al", sms)
    found = memory.search("frobnixt bike lock", user="al")  # al reaches the texts, and back
    assert {match.line.person for match in found} >= {sms}
    assert any(m.line.person == "al" for m in memory.search("zqxvbnm locker", user=sms))
    needles = needles_for(memory, "al", None)  # history spans the link: sms's lines too
    needles["the sms identity"] = sms.encode()
    bot_id, texter = memory.store.bot_id("membot") or 0, memory.store.person_id(sms) or 0
    assert memory.store.lexical_search(["frobnixt"], bot_id, (texter,)) != []

    removed = memory.forget(user="al")

    assert removed["lines"] == 12 + 4 and removed["threads"] == 3
    assert traces(folder, needles) == []
    assert memory.store.lexical_search(["frobnixt"], bot_id, (texter,)) == []
    assert memory.store.lexical_search(["frobnixt"], bot_id) == []  # nobody's lines hold it
    assert memory.search("frobnixt bike lock", user=sms) == []
    assert memory.history(user=sms) == [] and memory.people("membot") == ["bo"]
    assert memory.linked(user=sms, bot="membot").linked == (sms,)
    assert not any("frobnixt" in text for text in in_memory_texts(memory))
    assert memory.index.scopes_held() == []
    assert {m.line.person for m in memory.search("dog", user="bo")} == {"bo"}

"""Memory: add, search, recall (scope, window, buffer), forget, embedder checks and reindex.

These run on the small hashing embedder from conftest: texts that share words match, others
do not, so every expectation below can be worked out by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from membot import (
    BotSettings,
    ConfigError,
    EmbedderMismatchError,
    LineInput,
    Memory,
    Role,
)
from membot.store.sqlite_driver import sqlite3

TIGHT = {
    "threshold": 0.5,
    "expand_before": 1,
    "expand_after": 1,
    "window_size": 1,
    "strategy": "lines",
    # These threads are one person's lines: every neighbour comes, not only the other party's.
    "strategy.partners_only": 0,
}
ONE_PERSON = {"strategy.partners_only": 0}


def texts(lines) -> list[str]:
    return [line.text for line in lines]


def fts_rows(memory: Memory, word: str) -> int:
    with sqlite3.connect(memory.store.path) as db:
        sql = "SELECT COUNT(*) FROM line_text WHERE line_text MATCH ?"
        return db.execute(sql, (word,)).fetchone()[0]


def say(memory: Memory, thread: str, *lines: str, user: str = "alice") -> list:
    return [memory.add(text, user=user, thread=thread) for text in lines]


@pytest.fixture
def alice_t1(memory: Memory) -> list:
    memory.configure_bot(**TIGHT)
    return say(
        memory,
        "t1",
        "good morning",
        "my favourite fruit is mango",
        "nice",
        "the weather is grey",
        "bye",
    )


# -- adding ---------------------------------------------------------------------------------


def test_add_stores_a_line_with_its_seq_tokens_and_time(memory: Memory, token_counter) -> None:
    before = datetime.now(UTC)
    first = memory.add("Hello, I am Alice.", user="alice", thread="t1")
    when = datetime(2023, 5, 8, 15, 56, tzinfo=timezone(timedelta(hours=2)))
    second = memory.add(
        "Hi!", user="alice", thread="t1", role="bot", created_at=when, speaker="Membot"
    )

    assert (first.seq, first.role, first.person, first.bot) == (1, Role.HUMAN, "alice", "membot")
    assert first.tokens == token_counter.count("Hello, I am Alice.")
    assert before - timedelta(seconds=1) <= first.created_at <= datetime.now(UTC)
    assert (second.seq, second.role, second.speaker) == (2, Role.BOT, "Membot")
    assert second.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert memory.history(user="alice") == [first, second]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"text": ""}, "needs some text"),
        ({"text": "   \n"}, "needs some text"),
        ({"role": "robot"}, "unknown role 'robot'"),
        ({"created_at": datetime(2024, 1, 1, 12, 0)}, "needs a time zone"),
        ({"user": ""}, "needs a user name"),
        ({"thread": " "}, "needs a thread name"),
        ({"bot": ""}, "needs a bot name"),
    ],
)
def test_bad_input_is_a_config_error_and_loses_nothing(memory: Memory, changes, message) -> None:
    kept = say(memory, "t1", "first line", "second line")
    line = {"text": "a fine line", "user": "alice", "thread": "t1", **changes}

    with pytest.raises(ConfigError, match=message):
        memory.add(**line)
    with pytest.raises(ConfigError, match=message):
        memory.add_many([LineInput("ok in the batch", "alice", "t1"), LineInput(**line)])

    assert memory.history(user="alice") == kept
    assert memory.store.count_lines() == 2
    assert memory.add("third line", user="alice", thread="t1").seq == 3


def test_add_many_embeds_once_per_batch_in_order(memory: Memory, embedder) -> None:
    progress: list[int] = []
    items = [
        LineInput(f"line {n}", "alice", "t1", Role.HUMAN if n % 2 else Role.BOT) for n in range(7)
    ]

    assert memory.add_many(items, batch_size=3, progress=progress.append) == 7

    assert [len(batch) for batch in embedder.calls] == [3, 3, 1]
    assert progress == [3, 3, 1]
    history = memory.history(user="alice", thread="t1")
    assert [line.seq for line in history] == list(range(1, 8))
    assert texts(history) == [f"line {n}" for n in range(7)]


# -- searching ------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_search_finds_the_persons_lines_best_first(memory: Memory) -> None:
    say(memory, "t1", "I work in logistics", "I like mango")
    say(memory, "t2", "logistics is my job and logistics is fun")
    say(memory, "t1", "I work in logistics too", user="bob")

    matches = memory.search("work in logistics", user="alice")
    assert texts(m.line for m in matches)[0] == "I work in logistics"
    assert {m.line.person for m in matches} == {"alice"}
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)
    assert texts(m.line for m in memory.search("mango", user="alice", k=1)) == ["I like mango"]

    everyone = memory.search("work in logistics", k=10)
    assert {m.line.person for m in everyone} == {"alice", "bob"}
    one_thread = memory.search("logistics", user="alice", thread="t2")
    assert {m.line.thread for m in one_thread} == {"t2"}
    assert memory.store.count_lines() == 4  # the query is not stored


def test_search_edge_cases(memory: Memory) -> None:
    assert memory.search("anything", user="alice") == []  # empty store
    say(memory, "t1", "hello there")
    memory.add("hello from the bot", user="alice", thread="t1", role="bot")
    assert memory.search("hello", user="nobody") == []
    assert memory.search("hello", user="alice", thread="missing") == []
    assert memory.search("hello", bot="other-bot") == []
    only_bot = memory.search("hello", user="alice", roles=("bot",))
    assert texts(m.line for m in only_bot) == ["hello from the bot"]
    with pytest.raises(ConfigError, match="needs its user"):
        memory.search("hello", thread="t1")


# -- recall ---------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_recall_finds_the_persons_earlier_thread_expanded(memory: Memory, alice_t1) -> None:
    line = memory.add("which fruit is my favourite", user="alice", thread="t2")
    recall = memory.recall(line)

    assert texts(m.line for m in recall.matches) == ["my favourite fruit is mango"]
    (block,) = recall.blocks
    assert (block.thread, block.person, block.matched_seqs, block.carried) == (
        "t1",
        "alice",
        (2,),
        False,
    )
    assert texts(block.lines) == ["good morning", "my favourite fruit is mango", "nice"]
    assert block.score == pytest.approx(recall.matches[0].score)
    assert block.score >= 0.5


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_the_relevance_buffer_keeps_a_block_for_later_turns(memory, alice_t1, make_memory):
    memory.recall(memory.add("which fruit is my favourite", user="alice", thread="t2"))

    later = memory.add("ok thanks", user="alice", thread="t2")
    (block,) = memory.recall(later).blocks
    assert block.carried and block.thread == "t1"
    assert memory.recall(later).matches == ()

    # The buffer is stored: another Memory on the same file sees it.
    other = make_memory(memory.embedder)
    (again,) = other.recall(other.add("sure", user="alice", thread="t2")).blocks
    assert again.carried and texts(again.lines) == texts(block.lines)


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_recall_never_crosses_to_another_person_unless_the_bot_shares(memory, alice_t1):
    bob_asks = memory.add("my favourite fruit is mango", user="bob", thread="t1")
    assert memory.recall(bob_asks).blocks == ()
    assert memory.recall(bob_asks).matches == ()

    memory.configure_bot(share_across_people=True)
    blocks = memory.recall(memory.add("what fruit is mango", user="bob", thread="t2")).blocks
    assert {(block.person, block.thread) for block in blocks} == {("alice", "t1"), ("bob", "t1")}


def test_recall_respects_threshold_and_max_matches(memory: Memory, alice_t1) -> None:
    say(memory, "t3", "mango smoothie", "other words entirely", "mango juice")
    question = memory.add("mango", user="alice", thread="t4")
    settings = memory.bot_settings()

    # "mango smoothie" and "mango juice" score 0.71; "my favourite fruit is mango" 0.45.
    assert len(memory.recall(question, settings).matches) == 2
    loose = settings.with_values({"threshold": 0.4})
    assert len(memory.recall(question, loose).matches) == 3
    one = settings.with_values({"max_matches": 1})
    assert len(memory.recall(question, one).matches) == 1
    strict = settings.with_values({"threshold": 0.99})
    assert memory.recall(question, strict).matches == ()
    none = settings.with_values({"max_matches": 0})
    assert memory.recall(question, none).matches == ()


def test_lines_in_the_recent_window_are_not_recalled(memory: Memory) -> None:
    """The window is the new line and the ``recent_window - 1`` lines before it."""
    memory.configure_bot(
        threshold=0.5,
        expand_before=0,
        expand_after=3,
        window_size=2,
        strategy="lines",
        **ONE_PERSON,
    )
    say(memory, "t1", "mango one", "filler", "other", "mango four", "mango five")
    line = memory.add("mango", user="alice", thread="t1")  # seq 6: the window is seqs 4-6

    recall = memory.recall(line)

    assert [m.line.seq for m in recall.matches] == [1]
    (block,) = recall.blocks
    assert [each.seq for each in block.lines] == [1, 2, 3]  # cut where the window starts


def test_a_window_of_zero_still_never_recalls_the_line_itself(memory: Memory) -> None:
    memory.configure_bot(
        threshold=0.5, expand_before=0, expand_after=0, window_size=0, strategy="lines"
    )
    say(memory, "t1", "mango one", "mango two")
    recall = memory.recall(memory.add("mango", user="alice", thread="t1"))
    assert sorted(m.line.seq for m in recall.matches) == [1, 2]


def test_buffer_size_caps_the_blocks_held(memory: Memory) -> None:
    memory.configure_bot(threshold=0.5, expand_before=0, expand_after=0, buffer_size=2)
    for topic in ("kiwi", "plum", "pear"):
        say(memory, f"about-{topic}", f"{topic} {topic}")
    for topic in ("kiwi", "plum", "pear"):
        memory.recall(memory.add(f"{topic}", user="alice", thread="now"))
    blocks = memory.recall(memory.add("ok", user="alice", thread="now")).blocks
    assert sorted(block.thread for block in blocks) == ["about-pear", "about-plum"]


def test_a_block_matched_now_is_not_reported_as_carried(memory: Memory) -> None:
    memory.configure_bot(
        threshold=0.5,
        expand_before=1,
        expand_after=1,
        window_size=1,
        strategy="lines",
        **ONE_PERSON,
    )
    say(memory, "t1", "one", "apple pie", "three", "banana bread", "five")
    memory.recall(memory.add("apple pie", user="alice", thread="t2"))  # holds t1 seqs 1-3

    recall = memory.recall(memory.add("banana bread", user="alice", thread="t2"))

    (block,) = recall.blocks  # seqs 3-5 matched now, merged with 1-3
    assert [line.seq for line in block.lines] == [1, 2, 3, 4, 5]
    assert block.carried is False


# -- forgetting -----------------------------------------------------------------------------


def test_forget_removes_lines_vectors_text_rows_and_buffers(memory, alice_t1, make_memory):
    observer = make_memory(memory.embedder, memory.store.path)  # another Memory, index loaded
    assert observer.search("mango", user="alice")
    memory.recall(memory.add("which fruit is my favourite", user="alice", thread="t2"))
    say(memory, "t1", "my favourite fruit is mango", user="bob")

    assert memory.forget(user="alice", thread="t1") == {"threads": 1, "lines": 5, "summaries": 0}

    assert {line.thread for line in memory.history(user="alice")} == {"t2"}
    assert memory.recall(memory.add("ok", user="alice", thread="t2")).blocks == ()
    assert fts_rows(memory, "mango") == 1  # bob's line
    assert texts(m.line for m in observer.search("mango", k=1)) == ["my favourite fruit is mango"]
    assert {m.line.thread for m in observer.search("mango", user="alice", k=10)} == {"t2"}
    with sqlite3.connect(memory.store.path) as db:
        assert db.execute("SELECT COUNT(*) FROM buffer_entries").fetchone()[0] == 0
        vectors = db.execute("SELECT COUNT(*) FROM line_vectors").fetchone()[0]
    assert vectors == memory.store.count_lines() == 3

    assert memory.forget(user="alice") == {"threads": 1, "lines": 2, "summaries": 0}
    assert memory.history(user="alice") == []
    assert observer.search("which fruit", user="alice") == []
    assert texts(memory.history(user="bob")) == ["my favourite fruit is mango"]


# -- embedders ------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_a_store_refuses_another_embedder_name(memory: Memory, make_memory, make_embedder):
    say(memory, "t1", "made with the first model")
    other = make_memory(make_embedder(name="another-model"))

    with pytest.raises(EmbedderMismatchError, match="membot --embedder SPEC reindex") as raised:
        other.add("a new line", user="alice", thread="t1")
    assert "hash-bow" in str(raised.value) and "another-model" in str(raised.value)
    with pytest.raises(EmbedderMismatchError):
        other.search("made", user="alice")
    assert memory.store.count_lines() == 1


def test_a_store_refuses_another_dimension(memory: Memory, make_memory, make_embedder) -> None:
    say(memory, "t1", "made with 256 dimensions")
    narrow = make_memory(make_embedder(dimension=32), memory.store.path)
    with pytest.raises(
        EmbedderMismatchError, match=r"dimension 32 .* 256: run `membot --embedder SPEC reindex`"
    ):
        narrow.add("a new line", user="alice", thread="t1")
    assert memory.store.count_lines() == 1


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_reindex_switches_the_store_to_another_model(memory, make_memory, make_embedder):
    say(memory, "t1", "mango is sweet", "rain is wet")
    assert memory.search("mango", user="alice")  # the index holds 256-wide vectors now
    new_model = make_embedder(name="new-model", dimension=48)

    assert memory.reindex(new_model, batch_size=1) == 2

    assert new_model.embedded == ["mango is sweet", "rain is wet"]
    assert memory.store.get_meta("embedder") == "new-model"
    assert memory.store.get_meta("dimension") == "48"
    (best, *_) = memory.search("mango", user="alice")
    assert best.line.text == "mango is sweet"
    assert memory.add("after the switch", user="alice", thread="t1").seq == 3
    with pytest.raises(EmbedderMismatchError):
        make_memory(make_embedder()).search("mango", user="alice")
    reopened = make_memory(make_embedder(name="new-model", dimension=48))
    assert reopened.search("mango", user="alice")[0].line.text == "mango is sweet"


# -- bots -----------------------------------------------------------------------------------


def test_bot_settings_are_stored_per_bot(memory: Memory, make_memory) -> None:
    assert memory.bot_settings() == BotSettings()
    changed = memory.configure_bot("coach", threshold="0.3", share_across_people="true")
    assert changed.threshold == 0.3 and changed.share_across_people is True

    reopened = make_memory(memory.embedder, memory.store.path)
    assert reopened.bot_settings("coach") == changed
    assert reopened.bot_settings() == BotSettings()
    with pytest.raises(ConfigError, match="unknown bot setting"):
        reopened.configure_bot("coach", colour="blue")
    assert reopened.bot_settings("coach") == changed


# -- found in review ------------------------------------------------------------------------


def test_blocks_shared_earlier_leave_the_prompt_once_sharing_stops(memory: Memory) -> None:
    memory.configure_bot(**TIGHT, share_across_people=True)
    say(memory, "b1", "my favourite fruit is mango", user="bob")
    shared = memory.recall(memory.add("which fruit is mango", user="alice", thread="a1"))
    assert [block.person for block in shared.blocks] == ["bob"]

    memory.configure_bot(share_across_people=False)
    later = memory.recall(memory.add("ok", user="alice", thread="a1"))
    assert later.blocks == ()  # bob's block is still in the buffer, but not alice's to see


def test_a_buffer_of_zero_still_recalls_this_turns_matches(memory: Memory, alice_t1) -> None:
    memory.configure_bot(buffer_size=0)
    found = memory.recall(memory.add("mango fruit please", user="alice", thread="t2"))
    assert [texts(block.lines) for block in found.blocks] == [
        ["good morning", "my favourite fruit is mango", "nice"]
    ]
    assert memory.recall(memory.add("ok", user="alice", thread="t2")).blocks == ()


def test_times_with_a_zone_are_stored_in_utc(memory: Memory) -> None:
    when = datetime(2023, 5, 8, 10, 0, tzinfo=timezone(timedelta(hours=2)))
    memory.add("hello", user="alice", thread="t1", created_at=when)
    (stored,) = memory.history(user="alice")
    assert stored.created_at == when and stored.created_at.utcoffset() == timedelta(0)
    assert stored.created_at.hour == 8


def test_forget_also_drops_the_cached_embeddings(make_memory, embedder, tmp_path) -> None:
    from membot.embed import CachedEmbedder

    cached = CachedEmbedder(embedder, tmp_path / "cache.db")
    memory = make_memory(cached)
    memory.add("my secret is mango", user="alice", thread="t1")
    memory.add("bob likes tea", user="bob", thread="t1")
    memory.forget(user="alice")
    embedder.calls.clear()
    cached.embed(["my secret is mango", "bob likes tea"])
    assert embedder.embedded == ["my secret is mango"]  # alice's vector was gone, bob's kept


def test_a_setting_named_bot_is_refused_clearly(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="unknown bot setting 'bot'"):
        memory.configure_bot("membot", bot="x")


def test_a_stored_value_this_membot_refuses_falls_back_to_its_default(memory, caplog) -> None:
    """An earlier membot stored idle_timeout_minutes = inf and counts past 2**31: reading
    the profile then failed every turn of the bot, and the change that would mend it."""
    memory.create_bot("old", bot_name="Cy")
    memory.store.save_bot(
        "old", {"bot_name": "Cy", "idle_timeout_minutes": float("inf"), "max_matches": 2**40}
    )
    with caplog.at_level("WARNING", logger="membot.memory.bots"):
        settings = memory.bot_settings("old")
    assert (settings.bot_name, settings.idle_timeout_minutes, settings.max_matches) == (
        "Cy",
        60.0,
        3,
    )
    assert "bot 'old': its stored idle_timeout_minutes is left at its default" in caplog.text
    mended = memory.configure_bot("old", idle_timeout_minutes=30)
    assert (mended.bot_name, mended.idle_timeout_minutes) == ("Cy", 30.0)


def test_stored_settings_this_membot_does_not_know_are_kept_and_bad_json_is_named(memory):
    """A newer membot's setting on a shared store was dropped by this one's next `bot set`;
    a profile that is not JSON failed every turn with a bare JSONDecodeError (a review)."""
    from membot import StoreError

    memory.create_bot("coach")
    memory.store.save_bot("coach", {"bot_name": "Cy", "tone_of_voice": "dry"})
    assert memory.bot_settings("coach").bot_name == "Cy"
    memory.configure_bot("coach", threshold=0.4)
    assert memory.store.bot_settings("coach") == {
        "bot_name": "Cy",
        "threshold": 0.4,
        "tone_of_voice": "dry",
    }
    memory.store.save_bot("broken", {})
    with memory.store._write() as db:  # damaged by hand
        db.execute("UPDATE bots SET settings = '{not json' WHERE name = 'broken'")
    with pytest.raises(StoreError, match="bot 'broken': its stored profile cannot be read"):
        memory.bot_settings("broken")

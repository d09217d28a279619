"""Approximate search of large shared scopes (membot.index.approximate, nominated by the
store's own index: membot.store.approximate), on SQLite (usearch beside the store
file) and PostgreSQL (pgvector's HNSW index): it finds what exact search finds, scores exactly,
keeps to the scope, stays up to date, and takes over from the exact index at the threshold."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from membot import Role
from membot.errors import StoreError
from membot.index.approximate import ApproximateScope, ApproximateScopes
from membot.index.scope import PART_WEIGHT
from membot.index.vectors import Scope, VectorIndex
from membot.store import NewLine, ThreadKey, approximate_sqlite
from membot.store.approximate import drop_saved_indexes
from membot.store.approximate_sqlite import PART, UsearchNominator
from membot.store.base import LineParts

DIMENSION = 16
BY = ("random-unit", DIMENSION)


def vectors(count: int, seed: int) -> np.ndarray:
    drawn = np.random.default_rng(seed).standard_normal((count, DIMENSION)).astype(np.float32)
    return drawn / np.linalg.norm(drawn, axis=1, keepdims=True)


def fill(store: Any, count: int, seed: int = 0, bot: str = "shared") -> list[int]:
    """``count`` lines in threads of 10 over 5 people, alternating human and bot lines."""
    lines = [
        NewLine(
            ThreadKey(bot, f"person-{n % 5}", f"t{n // 10}"),
            Role.HUMAN if n % 2 == 0 else Role.BOT,
            f"line {n}",
            vector,
            3,
        )
        for n, vector in enumerate(vectors(count, seed))
    ]
    return [line.id for line in store.add_lines(lines, BY)]


def exact(store: Any, scope: Scope, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    return VectorIndex(store).search(query, scope, k)


def test_a_large_shared_scope_is_searched_approximately_and_scored_exactly(make_store) -> None:
    store = make_store()
    fill(store, 600)
    bot = store.bot_id("shared")
    scopes = ApproximateScopes(store, from_lines=500)
    approximate = scopes.scope_for(Scope.of(bot, None), held_lines=None)
    assert isinstance(approximate, ApproximateScope)
    assert scopes.scope_for(Scope.of(bot, store.person_id("person-1")), None) is None  # a person's
    found_all = []
    for query in vectors(20, seed=1):
        wanted = exact(store, Scope.of(bot, None), query, 10)
        found = approximate.search(query, Scope.of(bot, None), 10, None)
        found_all.append(len({i for i, _ in wanted} & {i for i, _ in found}))
        # Every score is the true cosine, whatever the index nominated.
        assert (
            dict(found).items()
            <= dict(approximate.search(query, Scope.of(bot, None), 400, None)).items()
        )
        for line_id, score in found:
            if line_id in dict(wanted):
                assert score == pytest.approx(dict(wanted)[line_id], abs=1e-5)
    assert sum(found_all) >= 196  # 98 % of the 200 nearest, counted: a float mean read 0.9799…


def test_a_large_shared_scope_scores_the_nominees_by_their_parts_as_exact_search_does(
    make_store,
) -> None:
    """The graph holds the lines' own vectors; the parts of the lines it nominates are read
    from the store and raise their scores as in a smaller scope (membot.index.approximate)."""
    store = make_store()
    fill(store, 600)
    query = vectors(1, seed=7)[0]
    near = vectors(1, seed=8)[0] + 0.2 * query
    part = np.vstack([near / np.linalg.norm(near), query])  # its second part is the query
    (line,) = store.add_lines(
        [NewLine(ThreadKey("shared", "person-0", "t99"), Role.HUMAN, "two parts. of a line",
                 near / np.linalg.norm(near), 3, parts=LineParts(((0, 9), (10, 20)), part))],
        BY,
    )  # fmt: skip
    bot = store.bot_id("shared")
    scope = Scope.of(bot, None)
    approximate = ApproximateScopes(store, from_lines=500).scope_for(scope, held_lines=None)
    assert isinstance(approximate, ApproximateScope)
    ((found, score),) = approximate.search(query, scope, 1, None)
    ((wanted, exact_score),) = exact(store, scope, query, 1)
    assert found == wanted == line.id
    own = float(near @ query) / float(np.linalg.norm(near))  # the line's own cosine
    raised = own + PART_WEIGHT * (1.0 - own)  # its best part is the query itself
    assert score == pytest.approx(raised, abs=1e-3) == pytest.approx(exact_score, abs=1e-3)


def test_a_small_shared_scope_stays_exact(make_store) -> None:
    store = make_store()
    fill(store, 100)
    scopes = ApproximateScopes(store, from_lines=500)
    assert scopes.scope_for(Scope.of(store.bot_id("shared"), None), held_lines=None) is None
    assert scopes.scope_for(Scope.of(store.bot_id("shared"), None), held_lines=500) is not None


def test_approximate_lines_keep_to_the_scope_and_bring_their_neighbours(make_store) -> None:
    store = make_store()
    fill(store, 300)
    fill(store, 300, seed=5, bot="other")  # another bot's lines never come back
    bot = store.bot_id("shared")
    thread = store.thread_id(ThreadKey("shared", "person-0", "t0"))
    scope = Scope.of(bot, None, feed=(thread, 3), roles=("human",))
    approximate = ApproximateScopes(store, from_lines=0).scope_for(scope, None)
    assert approximate is not None
    for query in vectors(5, seed=2):
        lines = approximate.scored(query, scope)
        assert list(lines.ids) == sorted(lines.ids)
        rows = store.vector_rows_around(lines.ids.tolist())
        assert set(rows.bot_ids.tolist()) == {bot}
        human = {int(i) for i, role in zip(rows.ids, rows.roles, strict=True) if role == 0}
        assert set(lines.ids.tolist()) <= human
        assert not any(
            t == thread and s >= 3 for t, s in zip(lines.thread_ids, lines.seqs, strict=True)
        )
    # The line right before and after a nominee come along: their scores feed its neighbours'.
    around = store.vector_rows_around([int(lines.ids[0])])
    assert 2 <= len(around.ids) <= 3


def test_lines_written_later_are_found(make_store) -> None:
    store = make_store()
    fill(store, 300)
    bot = store.bot_id("shared")
    approximate = ApproximateScopes(store, from_lines=0).scope_for(Scope.of(bot, None), None)
    assert approximate is not None
    query = vectors(1, seed=9)[0]
    approximate.search(query, Scope.of(bot, None), 10, None)  # the index is built
    key = ThreadKey("shared", "late", "t")
    (late,) = store.add_lines([NewLine(key, Role.HUMAN, "late", query, 1)], BY)
    best = approximate.search(query, Scope.of(bot, None), 1, None)
    assert best[0][0] == late.id and best[0][1] == pytest.approx(1.0, abs=1e-5)
    store.forget("late", None, None)
    assert late.id not in dict(approximate.search(query, Scope.of(bot, None), 10, None))


def test_the_exact_index_hands_a_shared_scope_over_at_the_threshold(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membot.store import SqliteStore

    monkeypatch.setenv("MEMBOT_APPROXIMATE_FROM", "400")
    store = SqliteStore(tmp_path / "handover.db")
    fill(store, 300)
    bot = store.bot_id("shared")
    index = VectorIndex(store)
    query = vectors(1, seed=3)[0]
    before = index.search(query, Scope.of(bot, None), 5)
    assert index.scopes_held() == [(bot, None)]  # exact: held in memory
    fill(store, 200, seed=4)
    index.search(query, Scope.of(bot, None), 5)  # brings the held matrix to 500 lines
    after = index.search(query, Scope.of(bot, None), 5)
    assert index.scopes_held() == []  # approximate now: the matrix is dropped
    assert before[0][0] in dict(after) or after[0][1] >= before[0][1]


def test_the_sqlite_index_is_saved_beside_the_store_and_loaded_again(tmp_path) -> None:
    from membot.store import SqliteStore

    store = SqliteStore(tmp_path / "saved.db")
    fill(store, 300)
    bot = store.bot_id("shared") or 0
    first = UsearchNominator(store, bot)
    query = vectors(1, seed=7)[0]
    nominated = first.nominate(query, 20)
    first.save()
    assert (tmp_path / "saved.db.ann" / f"bot-{bot}.usearch").exists()
    fill(store, 10, seed=8)
    again = UsearchNominator(store, bot)
    again._load(first.made_by, store.bot_generation(bot))  # what a new process does first
    assert again.cursor == first.cursor and len(again.index) == 300
    again.nominate(query, 20)
    assert len(again.index) == 310  # the lines past the saved cursor were added
    assert set(nominated) <= set(again.nominate(query, 30))


def test_another_embedders_saved_index_is_built_again(tmp_path) -> None:
    from membot.store import SqliteStore

    store = SqliteStore(tmp_path / "stale.db")
    fill(store, 50)
    bot = store.bot_id("shared") or 0
    first = UsearchNominator(store, bot)
    first.nominate(vectors(1, seed=1)[0], 5)
    first.made_by = ["an-older-embedder", str(DIMENSION)]
    first.save()
    again = UsearchNominator(store, bot)
    again.refresh()
    assert again.made_by == ["random-unit", str(DIMENSION)] and len(again.index) == 50


def shared_memory_saving_its_index(
    make_memory, monkeypatch: pytest.MonkeyPatch, start: int, save_every: int, lines: int,
    people: int,
):  # fmt: skip
    """A memory whose bot "shared" shares memory and holds ``lines`` lines of ``people``
    people (``line N`` by ``person-K``), searched approximately from ``start`` lines and
    saving its index every ``save_every`` lines added."""
    monkeypatch.setenv("MEMBOT_APPROXIMATE_FROM", str(start))
    monkeypatch.setattr(approximate_sqlite, "SAVE_EVERY", save_every)
    memory = make_memory()
    memory.configure_bot("shared", share_across_people=True)
    for n in range(lines):
        memory.add(f"line {n}", user=f"person-{n % people}", bot="shared", thread="t")
    return memory


def test_forgotten_lines_leave_the_saved_index_and_every_processs_graph(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """usearch's own removal keeps a vector's bytes in the file: forgetting removes the saved
    indexes, and every process builds its graph again from the store (the generation moved),
    so a forgotten line's vector is in no file beside the store and in no graph."""
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 30, 10, 40, people=3)
    for n in range(4):
        memory.add(f"al's secret number {n}", user="al", bot="shared", thread="secret")
    other = make_memory()  # another process on the same store, its graph built before
    for each in (memory, other):
        each.search("secret number", bot="shared")
    bot = memory.store.bot_id("shared") or 0
    secret = [line.id for line in memory.history(user="al", bot="shared")]
    graph = memory.index.approximate._scopes[bot].nominator.index
    assert other.index.approximate._scopes[bot].nominator.index is not graph
    folder = Path(f"{memory.store.path}.ann")
    needles = [np.asarray(graph.get(line_id)).astype(np.int8).tobytes() for line_id in secret]

    def found_in_files() -> list[str]:
        saved = [path.read_bytes() for path in folder.glob("*") if path.is_file()]
        return [repr(n[:4]) for n in needles if any(n in content for content in saved)]

    assert len(found_in_files()) == len(secret)  # the saved file holds them: the test can fail
    memory.forget(user="al", bot="shared")
    assert found_in_files() == []
    for each in (memory, other):
        assert each.search("secret number", bot="shared")  # from the old graph, lines taken out
        nominator = each.index.approximate._scopes[bot].nominator
        assert not any(nominator.index.contains(secret))
        nominator.save()  # refused: the old graph keeps the removed lines' bytes
        assert found_in_files() == []
        nominator.settle(timeout=60)  # the fresh graph, built by a child process, loaded
        assert nominator.index is not graph and nominator.rebuild is None
        assert not any(nominator.index.contains(secret)) and len(nominator.index) == 40
        nominator.save()
    assert found_in_files() == []


def test_a_forget_in_one_bot_leaves_another_bots_index_standing(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another bot's lines did not change: its saved file stays, and neither the forgetting
    process nor another one builds its graph again; the forgotten bot's graph is built
    again, in both, without the forgotten lines."""
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 30, 10, 60, people=3)
    memory.configure_bot("other", share_across_people=True)
    for n in range(40):
        memory.add(f"other line {n}", user=f"person-{n % 3}", bot="other", thread="t")
    second = make_memory()  # another process on the same store
    for each in (memory, second):
        for bot in ("shared", "other"):
            each.search("line", bot=bot)
    shared, other = (memory.store.bot_id(bot) or 0 for bot in ("shared", "other"))
    folder = Path(f"{memory.store.path}.ann")
    for bot in (shared, other):
        memory.index.approximate._scopes[bot].nominator.save()
    saved_other = (folder / f"bot-{other}.usearch").read_bytes()
    graphs = {
        id(each): {bot: each.index.approximate._scopes[bot].nominator.index
                   for bot in (shared, other)}
        for each in (memory, second)
    }  # fmt: skip
    gone = [line.id for line in memory.history(user="person-0", bot="shared")]

    memory.forget(user="person-0", bot="shared")

    assert not (folder / f"bot-{shared}.usearch").exists()
    assert (folder / f"bot-{other}.usearch").read_bytes() == saved_other
    for each in (memory, second):
        for bot in ("shared", "other"):
            assert each.search("line", bot=bot)
        nominators = {bot: each.index.approximate._scopes[bot].nominator for bot in (shared, other)}
        assert nominators[other].index is graphs[id(each)][other]  # not built again
        # The shared bot's old graph answers, without the lines gone, while a child builds:
        assert nominators[shared].index is graphs[id(each)][shared]
        assert not any(nominators[shared].index.contains(gone))
        nominators[shared].settle(timeout=60)
        assert nominators[shared].index is not graphs[id(each)][shared]
        assert not any(nominators[shared].index.contains(gone))
        assert len(nominators[shared].index) == 40 and len(nominators[other].index) == 40


def test_a_deleted_bots_graph_is_emptied_without_a_build(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 20, 5, 30, people=3)
    memory.search("line", bot="shared")
    bot = memory.store.bot_id("shared") or 0
    nominator = memory.index.approximate._scopes[bot].nominator
    assert len(nominator.index) == 30
    memory.delete_bot("shared")
    assert len(nominator.index) == 0 and nominator.rebuild is None
    assert not list(Path(f"{memory.store.path}.ann").glob("bot-*.usearch"))


# A child that, once it has read the bot's generation, waits for the test's go before it
# builds: a forget in that pause leaves what it saves one generation old.
SLOW_CHILD = """
import sys, time
from pathlib import Path
import membot.store.approximate_sqlite as ann
from membot.store.approximate_build import main
read = ann.UsearchNominator._add_new
def slow(self):
    Path(sys.argv[3]).write_text("read")
    go = Path(sys.argv[3] + ".go")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    read(self)
ann.UsearchNominator._add_new = slow
sys.exit(main(sys.argv[1:3]))
"""


def test_lines_forgotten_while_a_child_builds_start_another_child(
    make_memory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first child's file is of the generation before the second forget: it removes it,
    and the process starts another child instead of building the graph itself."""
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 20, 5, 40, people=4)
    memory.search("line", bot="shared")
    bot = memory.store.bot_id("shared") or 0
    nominator = memory.index.approximate._scopes[bot].nominator
    marker = tmp_path / "generation-read"
    started: list[list[str]] = []

    def slow_child(args, **kw):
        started.append(args)
        return real_popen([sys.executable, "-c", SLOW_CHILD, *args[3:], str(marker)], **kw)

    monkeypatch.setattr(subprocess, "Popen", slow_child)
    built_here: list[object] = []
    monkeypatch.setattr(nominator, "_start", lambda made_by: built_here.append(made_by))
    memory.forget(user="person-0", bot="shared")
    first = nominator.rebuild
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:  # it has read the generation
        time.sleep(0.02)
    memory.forget(user="person-1", bot="shared")
    Path(f"{marker}.go").write_text("go")
    first.wait(60)
    memory.search("line", bot="shared")  # takes the first child's end: starts another
    assert len(started) == 2 and nominator.rebuild is not first
    stamp = Path(f"{memory.store.path}.ann") / f"bot-{bot}.json"
    assert not stamp.exists() or json.loads(stamp.read_text())["generation"] == (
        memory.store.bot_generation(bot)
    )  # the first child's file, one generation old, went
    nominator.settle(60)
    assert nominator.rebuild is None and len(nominator.index) == 20
    assert built_here == []  # never built in the process


def test_a_graph_saved_as_lines_are_forgotten_elsewhere_removes_its_file(tmp_path) -> None:
    """A process that has not searched since another one forgot saves its old graph once
    more: the save sees the generation moved and removes what it wrote."""
    from membot.store import SqliteStore

    store = SqliteStore(tmp_path / "race.db")
    fill(store, 60)
    bot = store.bot_id("shared") or 0
    nominator = UsearchNominator(store, bot)
    nominator.refresh()
    other = SqliteStore(tmp_path / "race.db")  # another process
    other.forget("person-0", None, None)
    drop_saved_indexes(other)
    nominator.save()  # with the forgotten lines' vectors, after the forget's removal
    folder = tmp_path / "race.db.ann"
    assert list(folder.glob("bot-*")) == []


def test_half_written_index_files_go_with_a_forget(tmp_path) -> None:
    from membot.store import SqliteStore

    store = SqliteStore(tmp_path / "part.db")
    fill(store, 30)
    folder = tmp_path / "part.db.ann"
    folder.mkdir()
    left = folder / f"tmpabc{PART}"  # a process killed while it wrote an index
    left.write_bytes(b"vectors")
    drop_saved_indexes(store)
    assert not left.exists()


def test_a_relative_store_path_is_found_by_the_child_after_a_chdir(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membot.store import SqliteStore

    monkeypatch.chdir(tmp_path)
    store = SqliteStore("relative.db")
    monkeypatch.chdir("/")
    assert store.path == tmp_path / "relative.db"


def test_a_second_child_finds_the_fresh_graph_saved_and_leaves_it(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every serving process starts a child after a forget; the ones after the first find
    the file current and neither load nor write it again."""
    from membot.store.approximate_build import build

    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 20, 5, 30, people=3)
    memory.search("line", bot="shared")
    memory.forget(user="person-0", bot="shared")
    bot = memory.store.bot_id("shared") or 0
    memory.index.approximate._scopes[bot].nominator.settle(60)
    saved = Path(f"{memory.store.path}.ann") / f"bot-{bot}.usearch"
    written = saved.stat().st_mtime_ns
    loaded: list[int] = []
    monkeypatch.setattr(UsearchNominator, "_load", lambda *args: loaded.append(1) or False)
    build(memory.store.path, bot)
    assert saved.stat().st_mtime_ns == written and loaded == []


def test_the_build_command_reports_what_it_built(tmp_path) -> None:
    from membot.store import SqliteStore

    store = SqliteStore(tmp_path / "cmd.db")
    fill(store, 40)
    bot = str(store.bot_id("shared"))
    command = [sys.executable, "-m", "membot.store.approximate_build", str(store.path), bot]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"built the approximate index of bot {bot}: 40 lines in" in done.stderr
    assert (tmp_path / "cmd.db.ann" / f"bot-{bot}.usearch").exists()
    wrong = subprocess.run(command[:-1], capture_output=True, text=True, timeout=60)
    assert (
        wrong.returncode == 1 and "usage: python -m membot.store.approximate_build" in wrong.stderr
    )


def test_a_failed_build_in_a_child_is_done_in_the_process(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 20, 5, 30, people=3)
    memory.search("line", bot="shared")
    failing = [sys.executable, "-c", "raise SystemExit(1)"]
    monkeypatch.setattr(subprocess, "Popen", lambda args, **kw: real_popen(failing, **kw))
    memory.forget(user="person-0", bot="shared")
    nominator = memory.index.approximate._scopes[memory.store.bot_id("shared")].nominator
    old = nominator.index
    nominator.settle(timeout=60)
    assert nominator.index is not old and nominator.rebuild is None
    assert len(nominator.index) == 20 and nominator.generation == memory.store.bot_generation(
        memory.store.bot_id("shared")
    )


real_popen = subprocess.Popen


def test_an_index_file_that_cannot_be_removed_is_named_and_the_forget_still_holds(
    make_memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = shared_memory_saving_its_index(make_memory, monkeypatch, 10, 5, 12, people=2)
    memory.search("line", bot="shared")  # builds and saves the index

    def refused(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refused)
    with pytest.raises(StoreError, match=r"bot-\d+\.(usearch|json).*remove it by hand"):
        memory.forget(user="person-0", bot="shared")
    assert memory.history(user="person-0", bot="shared") == []  # the forget itself holds
    nominator = memory.index.approximate._scopes[memory.store.bot_id("shared") or 0].nominator
    gone = [line for line in range(1, 13, 2)]  # person-0's lines: ids 1, 3, ... 11
    assert not any(nominator.index.contains(gone))  # and the process's graph lost them
    monkeypatch.undo()
    nominator.settle(timeout=60)
    assert len(memory.history(user="person-1", bot="shared")) == 6


def test_usearch_loaded_first_leaves_the_embedder_and_the_model_working() -> None:
    """usearch 2.26.6 loaded before them crashed onnxruntime's import and kept llama.cpp from
    loading a model; a process may search a large shared scope before it embeds."""
    script = (
        "import usearch.compiled, onnxruntime, llama_cpp\n"
        "from membot.turn.tokens import default_token_counter\n"
        "print(default_token_counter().count('still counting'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip().splitlines()[-1]) > 0


def test_a_large_shared_scopes_lexical_side_comes_from_the_stores_full_text_search(
    make_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the threshold a shared scope's words are not held in memory: BM25 is the store's,
    bounded, and placed by thread and seq; a person's scope of the same bot stays in memory."""
    monkeypatch.setenv("MEMBOT_APPROXIMATE_FROM", "100")
    store = make_store()
    ids = fill(store, 300)
    bot = store.bot_id("shared") or 0
    index = VectorIndex(store)
    hits = index.lexical(["line", "42"], Scope.of(bot, None), 5)
    assert hits[0].line_id == ids[42] and len(hits) == 5
    assert (hits[0].thread_id, hits[0].seq) == (
        store.thread_id(ThreadKey("shared", "person-2", "t4")),
        1,  # line 42 opens person-2's thread t4 (line 47 follows it)
    )
    with pytest.raises(ValueError, match="among"):  # the whole scope is never scored
        index.lexical_scores(["42"], Scope.of(bot, None))
    # A blend's lexical side: only the lines the approximate search read, by id.
    read = index.scored_in_scope(vectors(1, seed=7)[0], Scope.of(bot, None)).ids
    among = np.asarray(sorted({*read.tolist()[:5], ids[42]}), dtype=np.int64)
    ranked, scores = index.lexical_scores(["line", "42"], Scope.of(bot, None), among=among)
    assert ranked[0] == ids[42] and set(ranked.tolist()) <= set(among.tolist())
    assert len(ranked) == len(among) and scores[0] > 0  # every line says "line"
    ranked, _ = index.lexical_scores(["42"], Scope.of(bot, None), among=among)
    assert ranked.tolist() == [ids[42]]
    assert index.scopes_held() == []  # nothing of the shared scope was read into memory
    person = Scope.of(bot, store.person_id("person-2"))
    assert index.lexical(["42"], person, 5)[0].line_id == ids[42]
    assert index.scopes_held() == [(bot, person.person_ids)]


def test_a_servers_warm_up_loads_every_shared_memory_before_the_first_turn(
    make_memory, make_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``warm_up(shared_memory=True)`` (what ``membot serve`` runs before taking requests)
    reads a small shared bot's lines into memory and loads a large one's approximate index;
    a bot that keeps people apart is left to its people's turns, and a plain warm-up reads
    no memory at all."""
    monkeypatch.setenv("MEMBOT_APPROXIMATE_FROM", "30")
    memory = make_memory()
    memory.configure_bot("small", share_across_people=True)
    memory.configure_bot("large", share_across_people=True)
    for bot, count in (("small", 10), ("large", 40), ("apart", 40)):
        for n in range(count):
            memory.add(f"{bot} line {n}", user=f"person-{n % 3}", bot=bot, thread="t")
    memory.close()

    plain = make_memory()
    plain.warm_up()
    assert plain.index.scopes_held() == [] and plain.index.approximate._scopes == {}

    warmed = make_memory()
    warmed.warm_up(shared_memory=True)
    small, large = warmed.store.bot_id("small"), warmed.store.bot_id("large")
    assert warmed.index.scopes_held() == [(small, None)]
    (approximate,) = warmed.index.approximate._scopes.values()
    assert isinstance(approximate.nominator, UsearchNominator)
    assert approximate.nominator.index is not None and len(approximate.nominator.index) == 40
    assert list(warmed.index.approximate._scopes) == [large]

    # A store made with another embedder still starts; its first turn says what is wrong.
    other = make_memory(make_embedder(name="another-model"))
    other.warm_up(shared_memory=True)
    assert other.index.scopes_held() == []

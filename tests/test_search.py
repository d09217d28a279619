"""VectorIndex: scope masks, the recent-window exclusion, and staying in step with the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from membot import Role
from membot.index.vectors import InScope, Scope, VectorIndex
from membot.store import NewLine, SqliteStore, ThreadKey


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


QUERY = unit(1, 0, 0)


def add(
    store: SqliteStore,
    person: str,
    thread: str,
    vector: np.ndarray,
    role: Role = Role.HUMAN,
    bot: str = "membot",
) -> int:
    key = ThreadKey(bot, person, thread)
    (line,) = store.add_lines([NewLine(key, role, f"{person}/{thread}", vector, 1)])
    return line.id


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "index.db")


@pytest.fixture
def world(store: SqliteStore) -> dict[str, int]:
    """Lines of two people and two bots, all pointing the same way as QUERY (score 1)."""
    return {
        "alice_t1": add(store, "alice", "t1", QUERY),
        "alice_t1_bot": add(store, "alice", "t1", QUERY, Role.BOT),
        "alice_t2": add(store, "alice", "t2", QUERY),
        "bob_t1": add(store, "bob", "t1", QUERY),
        "alice_other_bot": add(store, "alice", "t1", QUERY, bot="other"),
    }


def scope(store: SqliteStore, person: str | None, **options) -> Scope:
    bot_id = store.bot_id(options.pop("bot", "membot"))
    assert bot_id is not None
    return Scope.of(bot_id, store.person_id(person) if person else None, **options)


def found(index: VectorIndex, scope: Scope, k: int = 10, **options) -> set[int]:
    return {line_id for line_id, _ in index.search(QUERY, scope, k, **options)}


def test_a_person_scope_sees_only_that_persons_lines_of_that_bot(store, world) -> None:
    index = VectorIndex(store)
    assert found(index, scope(store, "alice")) == {
        world["alice_t1"],
        world["alice_t1_bot"],
        world["alice_t2"],
    }
    assert found(index, scope(store, "bob")) == {world["bob_t1"]}
    assert found(index, scope(store, "alice", bot="other")) == {world["alice_other_bot"]}


def test_the_whole_bot_scope_sees_every_person(store, world) -> None:
    index = VectorIndex(store)
    assert found(index, scope(store, None)) == {
        world["alice_t1"],
        world["alice_t1_bot"],
        world["alice_t2"],
        world["bob_t1"],
    }


def test_a_thread_scope_and_a_role_filter(store, world) -> None:
    index = VectorIndex(store)
    t1 = store.thread_id(ThreadKey("membot", "alice", "t1"))
    assert found(index, scope(store, "alice", thread_id=t1)) == {
        world["alice_t1"],
        world["alice_t1_bot"],
    }
    assert found(index, scope(store, "alice", thread_id=t1, roles=("bot",))) == {
        world["alice_t1_bot"]
    }
    assert found(index, scope(store, "alice", roles=())) == set()


def test_the_recent_window_of_the_current_thread_is_left_out(store: SqliteStore) -> None:
    ids = [add(store, "alice", "t1", QUERY) for _ in range(6)]  # seqs 1..6
    other = add(store, "alice", "t2", QUERY)  # seq 1 of another thread: not in the window
    t1 = store.thread_id(ThreadKey("membot", "alice", "t1"))
    index = VectorIndex(store)
    windowed = scope(store, "alice", feed=(t1, 4))
    assert found(index, windowed) == {ids[0], ids[1], ids[2], other}


def test_results_are_best_first_limited_to_k_and_above_the_threshold(store) -> None:
    strong = add(store, "alice", "t1", unit(1, 0.2, 0))
    medium = add(store, "alice", "t1", unit(1, 1, 0))
    weak = add(store, "alice", "t1", unit(0.2, 1, 0))
    add(store, "alice", "t1", unit(0, 0, 1))  # orthogonal: score 0
    index = VectorIndex(store)
    everyone = scope(store, "alice")

    results = index.search(QUERY, everyone, k=3)
    assert [line_id for line_id, _ in results] == [strong, medium, weak]
    assert results[0][1] == pytest.approx(float(unit(1, 0.2, 0)[0]), rel=1e-6)
    assert [line_id for line_id, _ in index.search(QUERY, everyone, k=2)] == [strong, medium]
    assert found(index, everyone, min_score=0.5) == {strong, medium}
    assert index.search(QUERY, everyone, k=0) == []


def test_lines_written_through_another_store_object_are_picked_up(store, tmp_path) -> None:
    first = add(store, "alice", "t1", QUERY)
    index = VectorIndex(store)
    assert len(found(index, scope(store, "alice"))) == 1

    writer = SqliteStore(tmp_path / "index.db")  # another Memory, or another process
    late = add(writer, "alice", "t1", QUERY)

    t1 = store.thread_id(ThreadKey("membot", "alice", "t1"))
    hits = index.hits(QUERY, scope(store, "alice"), 10)
    assert {hit.line_id: (hit.thread_id, hit.seq) for hit in hits} == {
        first: (t1, 1),
        late: (t1, 2),
    }


def test_the_index_reloads_after_lines_are_forgotten_elsewhere(store, tmp_path) -> None:
    kept = add(store, "alice", "t1", QUERY)
    gone = add(store, "alice", "t2", QUERY)
    index = VectorIndex(store)
    assert found(index, scope(store, "alice")) == {kept, gone}

    other = SqliteStore(tmp_path / "index.db")
    other.forget("alice", None, "t2")
    # The forgotten line's id is never given again (tests/store/test_line_ids.py); the index
    # must drop the forgotten row and find the new one.
    later = add(other, "alice", "t3", unit(0, 1, 0))
    assert later > gone

    hits = {hit.line_id: hit for hit in index.hits(QUERY, scope(store, "alice"), 10)}
    assert set(hits) == {kept, later}
    assert hits[later].score == pytest.approx(0.0, abs=1e-6)  # its own vector
    t3 = other.thread_id(ThreadKey("membot", "alice", "t3"))
    assert (hits[later].thread_id, hits[later].seq) == (t3, 1)


def test_an_empty_store_finds_nothing(store: SqliteStore) -> None:
    index = VectorIndex(store)
    assert index.search(QUERY, Scope.of(1, None), 5) == []


WRITER = """
import sys
import numpy as np
from membot.model import Role
from membot.store import NewLine, SqliteStore, ThreadKey

store = SqliteStore(sys.argv[1])
vector = np.array([1, 0, 0], dtype=np.float32)
store.add_lines([NewLine(ThreadKey("membot", "alice", "t9"), Role.HUMAN, "late", vector, 1)])
"""


def test_lines_written_by_another_process_are_picked_up(store: SqliteStore) -> None:
    add(store, "alice", "t1", unit(0, 1, 0))
    index = VectorIndex(store)
    assert len(index.search(QUERY, scope(store, "alice"), 10)) == 1

    subprocess.run([sys.executable, "-c", WRITER, str(store.path)], check=True, timeout=60)

    (best, _) = index.search(QUERY, scope(store, "alice"), 10)
    assert store.lines([best[0]])[0].text == "late"
    assert best[1] == pytest.approx(1.0)


def test_neighbour_scores_read_the_previous_and_next_line_of_the_same_thread() -> None:
    lines = InScope(
        ids=np.array([1, 2, 3, 4, 5]),
        thread_ids=np.array([7, 7, 7, 8, 7]),
        seqs=np.array([1, 2, 3, 1, 5]),  # seq 4 of thread 7 is out of scope
        scores=np.array([0.1, 0.2, 0.3, 0.9, 0.5], dtype=np.float32),
        created=np.zeros(5),
    )
    expected = [
        0.1 + 0.2,  # no seq 0: its own score stands in
        0.1 + 0.3,
        0.2 + 0.3,  # seq 4 missing: its own score
        0.9 + 0.9,  # alone in thread 8
        0.5 + 0.5,
    ]
    assert lines.neighbour_scores() == pytest.approx(expected)
    assert InScope.empty().neighbour_scores().shape == (0,)


def test_scored_in_scope_lists_every_line_of_the_scope_with_its_cosine(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    first = add(store, "alice", "a", unit(1, 0, 0))
    add(store, "bob", "b", unit(0, 1, 0))
    second = add(store, "alice", "a", unit(1, 1, 0))
    index = VectorIndex(store)
    alice = Scope.of(store.bot_id("membot") or 0, store.person_id("alice"))
    lines = index.scored_in_scope(QUERY, alice)
    assert lines.ids.tolist() == [first, second]
    assert lines.seqs.tolist() == [1, 2]
    assert lines.scores.tolist() == pytest.approx([1.0, 2**-0.5])
    store.close()


def test_a_search_holds_only_its_scope_and_old_scopes_leave_past_the_budget(store) -> None:
    for person in ("alice", "bob", "carol"):
        add(store, person, "t1", QUERY)
    index = VectorIndex(store, budget_bytes=1)  # room for one scope only
    alice, bob = scope(store, "alice"), scope(store, "bob")
    assert len(found(index, alice)) == 1
    assert index.scopes_held() == [(alice.bot_id, alice.person_ids)]
    assert len(found(index, bob)) == 1
    assert index.scopes_held() == [(bob.bot_id, bob.person_ids)]
    assert len(found(index, alice)) == 1  # read again when asked again


def test_a_scope_held_in_memory_sees_new_lines_and_forgetting(store, tmp_path) -> None:
    first = add(store, "alice", "t1", QUERY)
    index = VectorIndex(store)
    assert found(index, scope(store, "alice")) == {first}
    second = add(store, "alice", "t2", QUERY)
    add(store, "bob", "t1", QUERY)  # another scope: not read for alice's search
    assert found(index, scope(store, "alice")) == {first, second}
    store.forget("alice", None, "t2")
    assert found(index, scope(store, "alice")) == {first}


def test_searches_looking_once_ask_the_store_for_new_lines_once(store, monkeypatch) -> None:
    """Within ``looking_once`` (one recall), a scope is brought up to date by its first
    search only: the others search the lines as they were then; after it, a search sees the
    lines written meanwhile."""
    first = add(store, "alice", "t1", QUERY)
    index = VectorIndex(store)
    alice = scope(store, "alice")
    snapshots = []
    read = store.scope_vector_snapshot
    monkeypatch.setattr(store, "scope_vector_snapshot",
                        lambda *args: snapshots.append(args) or read(*args))  # fmt: skip
    with index.looking_once():
        assert index.scored_in_scope(QUERY, alice).ids.tolist() == [first]
        second = add(store, "alice", "t1", QUERY)
        assert found(index, alice) == {first}
        assert index.vectors([first, second], alice).tolist() == [QUERY.tolist(), [0, 0, 0]]
        with index.looking_once():  # nested: still the one look
            assert index.scored_in_scope(QUERY, alice).ids.tolist() == [first]
    assert len(snapshots) == 1
    assert index.scored_in_scope(QUERY, alice).ids.tolist() == [first, second]
    assert len(snapshots) == 2


def test_a_reading_asks_the_store_for_each_lines_speaker_once(store, monkeypatch) -> None:
    """Within one recall's reading, speakers already read come from what was read (the
    speaker feature and the name-less search ask for overlapping lines); outside it, and in
    the next reading, the store is asked again."""
    from membot.index.source import IndexedLines

    first = add(store, "alice", "t1", QUERY)
    second = add(store, "alice", "t1", QUERY)
    source = IndexedLines(store, lambda texts: np.zeros((len(texts), 3), np.float32))
    asked: list[list[int]] = []
    read = store.speakers
    monkeypatch.setattr(store, "speakers", lambda ids: asked.append(list(ids)) or read(ids))
    with source.reading():
        assert source.speakers([first]) == {first: None}
        assert source.speakers([first, second]) == {first: None, second: None}
        with source.reading():  # nested: the same reading
            assert source.speakers([second]) == {second: None}
    assert asked == [[first], [second]]
    assert source.speakers([first]) == {first: None}
    assert asked[-1] == [first]

"""The store's tables beside lines: thread state, remembered summaries, expertise documents;
on both stores (``make_store``), the SQLite schema upgrade on SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from membot import EmbedderMismatchError, Role
from membot.store import NewLine, SqliteStore, Store, ThreadKey
from membot.store.extras import NewChunk
from membot.store.migrations import MIGRATIONS
from membot.store.sqlite_driver import sqlite3

ALICE = ThreadKey("membot", "alice", "t1")
BOB = ThreadKey("membot", "bob", "t1")
BY = ("test-embedder", 4)


def vector(value: float = 0.5) -> np.ndarray:
    return np.full(4, value, dtype=np.float32)


def add(store: Store, key: ThreadKey, text: str, when: datetime | None = None) -> None:
    store.add_lines([NewLine(key, Role.HUMAN, text, vector(), 3, when)], BY)


def test_thread_state_ends_reopens_and_keeps_the_longest_running_summary(make_store) -> None:
    store = make_store()
    add(store, ALICE, "hello")
    state = store.thread_state(ALICE)
    assert state is not None and state.ended_at is None and state.last_line_at is not None
    store.end_thread(state.id)
    assert store.thread_state(ALICE).ended_at is not None
    assert store.open_threads("membot") == []
    add(store, ALICE, "back again")  # a new line takes the conversation up again
    assert store.thread_state(ALICE).ended_at is None
    store.save_thread_summary(state.id, "covers 1-4", 4)
    store.save_thread_summary(state.id, "covers 1-2", 2)  # a slower turn's older summary
    after = store.thread_state(ALICE)
    assert (after.summary, after.summary_through) == ("covers 1-4", 4)
    assert store.thread_state(ThreadKey("membot", "alice", "nope")) is None


def test_open_threads_lists_each_persons_threads_with_their_last_line(make_store) -> None:
    store = make_store()
    old = datetime(2024, 1, 1, tzinfo=UTC)
    add(store, ALICE, "old line", old)
    add(store, BOB, "new line")
    everyone = {thread.person: thread for thread in store.open_threads("membot")}
    assert set(everyone) == {"alice", "bob"}
    assert everyone["alice"].last_line_at == old
    assert [t.person for t in store.open_threads("membot", "bob")] == ["bob"]


def test_summaries_are_stored_with_dates_and_categories_and_go_with_their_thread(
    make_store,
) -> None:
    store = make_store()
    add(store, ALICE, "I love hiking")
    add(store, BOB, "I love chess")
    alice_thread = store.thread_state(ALICE).id
    start, end = datetime(2024, 5, 1, 9, tzinfo=UTC), datetime(2024, 5, 1, 10, tzinfo=UTC)
    summary = store.add_summary(
        alice_thread, "Alice loves hiking.", ["preferences"], (start, end), 4, vector(0.1), BY
    )
    assert (summary.kind, summary.person, summary.thread) == ("summary", "alice", "t1")
    assert summary.categories == ("preferences",) and summary.covers_from == start
    assert summary.to_json()["covers_to"] == "2024-05-01T10:00:00Z"
    assert [s.text for s in store.summaries("alice")] == ["Alice loves hiking."]
    assert store.summaries("bob") == []
    ids, matrix = store.summary_vectors(store.bot_id("membot"), (store.person_id("alice"),))
    assert ids.tolist() == [summary.id] and matrix.shape == (1, 4)
    assert store.summary_vectors(store.bot_id("membot"), (store.person_id("bob"),))[0].size == 0
    assert store.summaries_by_id([summary.id, 999]) == [summary]
    removed = store.forget("alice", None, "t1")
    assert removed == {"threads": 1, "lines": 1, "summaries": 1}
    assert store.summaries("alice") == []


def test_a_summary_needs_the_stores_embedder(make_store) -> None:
    store = make_store()
    add(store, ALICE, "hello")
    now = datetime.now(UTC)
    with pytest.raises(EmbedderMismatchError):
        store.add_summary(
            store.thread_state(ALICE).id, "x", [], (now, now), 1, vector(), ("other", 4)
        )
    assert store.summaries("alice") == []


def test_documents_replace_by_name_and_remove_with_their_chunks(make_store) -> None:
    store = make_store()
    chunks = [NewChunk(i, "Intro", f"passage {i}", 2, vector(i / 10)) for i in range(3)]
    store.add_document("membot", "guide.md", "Guide", "markdown", "abc", chunks, BY)
    store.add_document("membot", "guide.md", "Guide v2", "markdown", "def", chunks[:2], BY)
    (info,) = store.documents("membot")
    assert (info.title, info.sha256, info.chunks) == ("Guide v2", "def", 2)
    ids, matrix = store.chunk_vectors(store.bot_id("membot"))
    assert len(ids) == 2 and matrix.shape == (2, 4)
    found = store.chunks(ids.tolist())
    assert [chunk.text for chunk in found] == ["passage 0", "passage 1"]
    assert found[0].document == "guide.md" and found[0].heading == "Intro"
    assert [c.ord for c in store.chunks_between("guide.md", "membot", 1, 5)] == [1]
    assert store.documents("other-bot") == []
    assert store.remove_document("membot", "guide.md") is True
    assert store.remove_document("membot", "guide.md") is False
    assert store.chunk_vectors(store.bot_id("membot"))[0].size == 0


def test_a_store_of_the_first_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
        db.execute("INSERT INTO bots (name, created_at) VALUES ('membot', '2024-01-01')")
    store = SqliteStore(path)
    assert store.bots() == ["membot"]
    add(store, ALICE, "still works", datetime.now(UTC) - timedelta(days=1))
    assert store.thread_state(ALICE).summary == ""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)

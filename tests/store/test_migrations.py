"""Schema migrations: user_version, refusal of newer stores, and a store opened by two at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from membot import Role, StoreError
from membot.store import NewLine, SqliteStore, ThreadKey
from membot.store.migrations import MIGRATIONS
from membot.store.sqlite_driver import sqlite3


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def add_one(store: SqliteStore, text: str) -> None:
    key = ThreadKey("membot", "alice", "t1")
    store.add_lines([NewLine(key, Role.HUMAN, text, np.ones(3, dtype=np.float32), 1)])


def test_a_new_store_gets_every_migration_and_its_version(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SqliteStore(path).close()
    assert user_version(path) == len(MIGRATIONS)
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert {"meta", "bots", "people", "threads", "lines", "line_vectors", "line_text"} <= tables
    assert "buffer_entries" in tables


def test_reopening_a_store_keeps_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    store = SqliteStore(path)
    add_one(store, "remember me")
    store.close()
    again = SqliteStore(path)
    assert [line.text for line in again.history("alice", None, None)] == ["remember me"]
    assert user_version(path) == len(MIGRATIONS)
    again.close()


def test_a_store_from_a_newer_membot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StoreError, match="upgrade membot"):
        SqliteStore(path)


def statements(script: str) -> Iterator[str]:
    """The SQL statements of a migration script, one by one (triggers kept whole)."""
    pending = ""
    for row in script.splitlines(keepends=True):
        pending += row
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""


def test_a_store_opened_while_another_process_creates_it(tmp_path: Path) -> None:
    """Two ``membot`` processes started at once on a new file: the second must wait, not fail.

    The other process is played by a plain connection that holds the write lock while it
    applies the first migration, exactly as ``migrate`` does, so the race is the same every run.
    """
    path = tmp_path / "racing.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("BEGIN IMMEDIATE")
    opened: list[SqliteStore] = []
    failures: list[BaseException] = []

    def open_store() -> None:
        try:
            opened.append(SqliteStore(path))
        except BaseException as error:  # reported below
            failures.append(error)

    opener = threading.Thread(target=open_store)
    opener.start()
    time.sleep(0.5)  # the opener has read user_version 0 and now waits for the lock
    for statement in statements(MIGRATIONS[0]):
        other.execute(statement)
    other.execute("PRAGMA user_version = 1")
    other.execute("COMMIT")
    opener.join(timeout=30)
    other.close()

    assert failures == []
    add_one(opened[0], "the store works")
    assert user_version(path) == len(MIGRATIONS)

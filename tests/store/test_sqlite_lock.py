"""Every write and checkpoint of a SQLite store takes one lock across processes, so no
checkpoint overlaps another process's commit (SQLite's WAL-reset bug, store/sqlite_lock.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membot import Role
from membot.errors import StoreError
from membot.store import NewLine, SqliteStore, ThreadKey
from membot.store import sqlite as sqlite_module


def line(text: str) -> NewLine:
    return NewLine(ThreadKey("membot", "alice", "t1"), Role.HUMAN, text, np.ones(4) / 2, 1)


def test_a_writer_waits_while_another_store_holds_the_lock_then_gives_up_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_SECONDS", 0.3)
    holder, writer = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    holder.add_lines([line("first")])
    with holder._writers.held(1), pytest.raises(StoreError, match="busy"):
        writer.add_lines([line("blocked")])
    with holder._writers.held(1), pytest.raises(StoreError, match="busy"):
        writer.forget("alice", "membot", "t1")  # its checkpoint takes the lock too
    assert [one.text for one in writer.history("alice", "membot", "t1")] == ["first"]
    assert writer.add_lines([line("after")])[0].seq == 2  # free again: it writes
    holder.close()
    writer.close()

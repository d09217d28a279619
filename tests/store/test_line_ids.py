"""A removed line's id is never given to another line, on either store: SQLite on its own
gives a new row the highest id left plus one, so forgetting the newest lines would hand their
ids to the next ones, and a saved id, a citation or an approximate index's key would name
someone else's line."""

from __future__ import annotations

from typing import Any

import numpy as np

from membot import Role
from membot.store import NewLine, ThreadKey


def add(store: Any, person: str, count: int, bot: str = "b") -> list[int]:
    vector = np.full(4, 0.5, dtype=np.float32)
    lines = [NewLine(ThreadKey(bot, person, "t"), Role.HUMAN, f"{person} {n}", vector, 2)
             for n in range(count)]  # fmt: skip
    return [line.id for line in store.add_lines(lines, ("test", 4))]


def test_forgetting_the_newest_lines_leaves_their_ids_unused(make_store) -> None:
    store = make_store()
    kept = add(store, "al", 3)
    newest = add(store, "bea", 3)
    store.forget("bea", None, None)
    later = add(store, "cy", 2)
    assert min(later) > max(newest) > max(kept)
    store.forget("cy", None, None)  # twice in a row: the record only grows
    again = add(store, "al", 1)
    assert again[0] > max(later)


def test_a_deleted_bots_newest_line_ids_stay_unused(make_store) -> None:
    store = make_store()
    add(store, "al", 2, bot="keeps")
    gone = add(store, "al", 4, bot="goes")
    store.delete_bot("goes")
    assert add(store, "al", 1, bot="keeps")[0] > max(gone)


def test_an_emptied_store_starts_after_its_last_id(make_store) -> None:
    store = make_store()
    gone = add(store, "al", 3)
    store.forget("al", None, None)
    assert add(store, "bea", 1)[0] > max(gone)


def test_lines_said_after_a_backup_leave_their_ids_unused_after_a_restore(tmp_path) -> None:
    from membot.store import SqliteStore
    from membot.store.backup import backup_store, restore_store

    store = SqliteStore(tmp_path / "s.db")
    add(store, "al", 2)
    backup_store(tmp_path / "s.db", tmp_path / "b.db")
    later = add(store, "al", 3)
    store.close()
    restore_store(tmp_path / "b.db", tmp_path / "s.db")
    store = SqliteStore(tmp_path / "s.db")
    assert add(store, "bea", 1)[0] > max(later)

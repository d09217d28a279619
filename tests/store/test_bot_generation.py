"""Each bot's generation on SQLite (SqliteStore.bot_generation): it moves when lines of that
bot are removed or replaced, and only then, so an index of one bot's lines (the approximate
index of a bot that shares memory) outlives a forget in another bot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from membot import Role
from membot.store import NewLine, SqliteStore, ThreadKey
from membot.store.backup import backup_store, restore_store
from membot.store.sqlite_driver import sqlite3

KEYS = {
    "a": ThreadKey("bot-a", "al", "t1"),
    "b": ThreadKey("bot-b", "al", "t1"),
    "b2": ThreadKey("bot-b", "bea", "t1"),
    "c": ThreadKey("bot-c", "cy", "t1"),
}


def filled(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    vector = np.full(4, 0.5, dtype=np.float32)
    store.add_lines([NewLine(key, Role.HUMAN, f"line of {name}", vector, 3)
                     for name, key in KEYS.items()])  # fmt: skip
    return store


def generations(store: SqliteStore) -> dict[str, int]:
    bots = {"a": "bot-a", "b": "bot-b", "c": "bot-c"}
    return {name: store.bot_generation(store.bot_id(bot) or 0) for name, bot in bots.items()}


def test_a_forget_moves_the_generation_of_the_bots_it_removed_lines_of(tmp_path: Path) -> None:
    store = filled(tmp_path / "s.db")
    before = generations(store)
    store.add_lines([NewLine(KEYS["c"], Role.BOT, "more", np.ones(4, np.float32), 1)])
    assert generations(store) == before  # appends move nothing

    store.forget("al", "bot-a", None)
    after_a = generations(store)
    assert after_a["a"] > before["a"] and (after_a["b"], after_a["c"]) == (before["b"], before["c"])

    store.forget("bea", None, None)  # bea talks with bot-b only
    after_bea = generations(store)
    assert after_bea["b"] > after_a["b"] and after_bea["c"] == before["c"]

    bot_c = store.bot_id("bot-c") or 0
    store.delete_bot("bot-c")
    assert store.bot_generation(bot_c) > after_bea["c"]  # an index of its lines must go
    assert generations(store)["b"] == after_bea["b"]


def test_a_forget_across_bots_moves_each_and_a_reindex_moves_all(tmp_path: Path) -> None:
    store = filled(tmp_path / "s.db")
    before = generations(store)
    store.forget("al", None, None)  # al talks with bot-a and bot-b
    moved = generations(store)
    assert moved["a"] > before["a"] and moved["b"] > before["b"] and moved["c"] == before["c"]

    last_id = max(line.id for line in store.history("cy", None, None))
    vectors = [(line_id, np.ones(4, np.float32)) for line_id, _ in store.all_line_texts()]
    store.replace_vectors(vectors, {"embedder": "other", "dimension": "4"},
                          last_id=last_id, generation=store.generation())  # fmt: skip
    assert all(generations(store)[name] > moved[name] for name in "abc")


def test_a_restore_moves_every_bot_past_both_stores(tmp_path: Path) -> None:
    store = filled(tmp_path / "s.db")
    backup_store(tmp_path / "s.db", tmp_path / "backup.db")
    store.forget("al", "bot-a", None)
    held = generations(store)
    restore_store(tmp_path / "backup.db", tmp_path / "s.db")
    again = SqliteStore(tmp_path / "s.db")
    assert all(generations(again)[name] > held[name] for name in "abc")


def test_a_store_made_before_bot_generations_gives_every_bot_its_generation(
    tmp_path: Path,
) -> None:
    """Such a store's removals may have been in any bot: each bot starts at the store's
    generation, so an index saved at it still loads and no older one does."""
    path = tmp_path / "old.db"
    filled(path).close()
    with sqlite3.connect(path) as db:  # as membot before migration 8 left it
        db.execute("DELETE FROM meta WHERE key LIKE 'generation:%'")
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', '4')")
        db.execute("PRAGMA user_version = 7")
    store = SqliteStore(path)
    assert generations(store) == {"a": 4, "b": 4, "c": 4}

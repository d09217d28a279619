"""The ``api_keys`` table: its migration onto older stores, and the key methods of the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot import StoreError
from membot.store import SqliteStore
from membot.store.base import KeyStore, StoredKey
from membot.store.migrations import MIGRATIONS
from membot.store.sqlite_driver import sqlite3

CREATED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEYS_MIGRATION = 3  # the migration that made the api_keys table


def stored_key(key_id: str = "0123456789ab", **values) -> StoredKey:
    fields = {
        "bot": "membot",
        "person": None,
        "label": None,
        "created_at": CREATED,
        "expires_at": None,
        "revoked_at": None,
        "last_used_at": None,
    }
    return StoredKey(id=key_id, **{**fields, **values})


@pytest.fixture
def store(make_store):
    """A store of each kind: SQLite, then PostgreSQL."""
    return make_store()


def make_store_before_keys(path: Path) -> None:
    """A store as the membot before API keys left it: every earlier migration, a bot in it."""
    with sqlite3.connect(path) as db:
        for script in MIGRATIONS[: KEYS_MIGRATION - 1]:
            db.executescript(script)
        db.execute(f"PRAGMA user_version = {KEYS_MIGRATION - 1}")
        db.execute(
            "INSERT INTO bots (name, created_at) VALUES ('chomsky', ?)", (CREATED.isoformat(),)
        )
    db.close()


def test_the_keys_migration_applies_to_a_store_of_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    make_store_before_keys(path)
    store = SqliteStore(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    db.close()
    assert store.bots() == ["chomsky"]
    store.add_key(stored_key(bot="chomsky"), "digest")
    assert [key.bot for key in store.api_keys()] == ["chomsky"]
    store.close()


def test_every_store_is_a_key_store(store) -> None:
    assert isinstance(store, KeyStore)


def test_a_key_round_trips_and_is_found_by_its_hash(store) -> None:
    key = stored_key(person="alice", label="phone", expires_at=CREATED + timedelta(days=30))
    store.add_key(key, "digest-of-alice")
    assert store.key_by_hash("digest-of-alice") == key
    assert store.key_by_hash("digest-of-someone-else") is None
    assert store.api_keys() == [key]


def test_keys_are_listed_oldest_first(store) -> None:
    store.add_key(stored_key("bbbbbbbbbbbb", created_at=CREATED + timedelta(hours=1)), "second")
    store.add_key(stored_key("aaaaaaaaaaaa"), "first")
    assert [key.id for key in store.api_keys()] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]


def test_the_hash_is_found_through_its_index(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "keys.db")
    plan = store._query("EXPLAIN QUERY PLAN SELECT id FROM api_keys WHERE hash = ?", ("x",))
    assert any("api_keys_by_hash" in row[-1] for row in plan)


def test_a_second_revoke_keeps_the_first_time(store) -> None:
    store.add_key(stored_key(), "digest")
    first = store.revoke_key("0123456789ab", CREATED + timedelta(days=1))
    again = store.revoke_key("0123456789ab", CREATED + timedelta(days=2))
    assert first is not None and again is not None
    assert first.revoked_at == again.revoked_at == CREATED + timedelta(days=1)
    assert store.revoke_key("no-such-key", CREATED) is None


def test_a_use_is_recorded(store) -> None:
    store.add_key(stored_key(), "digest")
    used = CREATED + timedelta(minutes=5)
    store.mark_key_used("0123456789ab", used)
    found = store.key_by_hash("digest")
    assert found is not None and found.last_used_at == used


def test_a_person_key_without_a_bot_is_refused_by_the_table(store) -> None:
    with pytest.raises(StoreError, match=r"(?i)check constraint"):
        store.add_key(stored_key(bot=None, person="alice"), "digest")
    assert store.api_keys() == []


def test_two_keys_with_one_hash_or_one_id_are_refused(store) -> None:
    store.add_key(stored_key("aaaaaaaaaaaa"), "digest")
    with pytest.raises(StoreError, match=r"(?i)unique"):
        store.add_key(stored_key("bbbbbbbbbbbb"), "digest")
    with pytest.raises(StoreError, match=r"(?i)unique"):
        store.add_key(stored_key("aaaaaaaaaaaa"), "another digest")

"""The SQLite store's API keys: a mixin of :class:`~membot.store.sqlite.SqliteStore`.

Only a hash of each key's secret is kept; :mod:`membot.keys` makes the secrets and checks them.
Times are ISO 8601 text in UTC and compared in Python, so the SQL stays plain enough for any
backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from membot.store.base import StoredKey
from membot.store.sqlite_driver import sqlite3

_KEY_SQL = (
    "SELECT id, bot, person, label, created_at, expires_at, revoked_at, last_used_at FROM api_keys"
)


def _moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text).astimezone(UTC) if text else None


def _text(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment else None


def _stored_key(row: Sequence) -> StoredKey:
    return StoredKey(
        id=row[0],
        bot=row[1],
        person=row[2],
        label=row[3],
        created_at=datetime.fromisoformat(row[4]).astimezone(UTC),
        expires_at=_moment(row[5]),
        revoked_at=_moment(row[6]),
        last_used_at=_moment(row[7]),
    )


class StoreKeys:
    """API keys, found by the hash of their secret; mixed into ``SqliteStore``."""

    # Provided by SqliteStore.
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _query: Callable[..., list[tuple]]

    def add_key(self, key: StoredKey, key_hash: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO api_keys (id, hash, bot, person, label, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key_hash,
                    key.bot,
                    key.person,
                    key.label,
                    _text(key.created_at),
                    _text(key.expires_at),
                ),
            )

    def api_keys(self) -> list[StoredKey]:
        """Every key, revoked and expired ones too, oldest first."""
        return [_stored_key(row) for row in self._query(f"{_KEY_SQL} ORDER BY created_at, id")]

    def key_by_hash(self, key_hash: str) -> StoredKey | None:
        rows = self._query(f"{_KEY_SQL} WHERE hash = ?", (key_hash,))
        return _stored_key(rows[0]) if rows else None

    def revoke_key(self, key_id: str, when: datetime) -> StoredKey | None:
        """Revoke a key (a second revoke keeps the first time); None if there is no such key."""
        with self._write() as db:
            db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_text(when), key_id),
            )
            row = db.execute(f"{_KEY_SQL} WHERE id = ?", (key_id,)).fetchone()
        return _stored_key(row) if row else None

    def mark_key_used(self, key_id: str, when: datetime) -> None:
        with self._write() as db:
            db.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (_text(when), key_id))

"""API keys, in the SQL both stores share: a mixin of :class:`~membot.store.sql_store.SqlStore`.

Only a hash of each key's secret is kept; :mod:`membot.keys` makes the secrets and checks them.
Times are compared in Python, so the SQL stays plain.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from membot.store.base import StoredKey
from membot.store.dialect import Dialect, Row

_KEY_SQL = (
    "SELECT id, bot, person, label, created_at, expires_at, revoked_at, last_used_at FROM api_keys"
)


class StoreKeys:
    """API keys, found by the hash of their secret; mixed into ``SqlStore``."""

    # Provided by SqlStore.
    dialect: Dialect
    _write: Callable[[], AbstractContextManager[Any]]
    _query: Callable[..., list[Row]]
    _run: Callable[..., Any]

    def _stored_key(self, row: Row) -> StoredKey:
        read = self.dialect.read_moment
        return StoredKey(row[0], row[1], row[2], row[3], self.dialect.read_time(row[4]),
                         read(row[5]), read(row[6]), read(row[7]))  # fmt: skip

    def add_key(self, key: StoredKey, key_hash: str) -> None:
        moment = self.dialect.moment
        with self._write() as db:
            self._run(
                db,
                "INSERT INTO api_keys (id, hash, bot, person, label, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key.id, key_hash, key.bot, key.person, key.label, moment(key.created_at),
                 moment(key.expires_at)),
            )  # fmt: skip

    def api_keys(self) -> list[StoredKey]:
        """Every key, revoked and expired ones too, oldest first."""
        rows = self._query(f"{_KEY_SQL} ORDER BY created_at, id")
        return [self._stored_key(row) for row in rows]

    def key_by_hash(self, key_hash: str) -> StoredKey | None:
        rows = self._query(f"{_KEY_SQL} WHERE hash = ?", (key_hash,))
        return self._stored_key(rows[0]) if rows else None

    def revoke_key(self, key_id: str, when: datetime) -> StoredKey | None:
        """Revoke a key (a second revoke keeps the first time); None if there is no such key."""
        with self._write() as db:
            self._run(
                db,
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self.dialect.moment(when), key_id),
            )
            row = self._run(db, f"{_KEY_SQL} WHERE id = ?", (key_id,)).fetchone()
        return self._stored_key(row) if row else None

    def mark_key_used(self, key_id: str, when: datetime) -> None:
        with self._write() as db:
            self._run(
                db,
                "UPDATE api_keys SET last_used_at = ? WHERE id = ?",
                (self.dialect.moment(when), key_id),
            )

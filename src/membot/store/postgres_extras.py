"""The PostgreSQL store's tables beside the lines: thread bookkeeping and relevance buffers,
remembered summaries, a bot's expertise and API keys — as ``extras.py`` and ``keys.py`` are
for SQLite. A mixin of :class:`~membot.store.postgres.PostgresStore`, sharing its pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

import numpy as np
import psycopg

from membot.errors import StoreError
from membot.model import ExpertiseChunk, Summary, ThreadState, utc_now
from membot.store.base import BufferEntry, DocumentInfo, NewChunk, StoredKey, ThreadKey
from membot.store.extras import _blob, _matrix

_SUMMARY_SQL = """
    SELECT m.id, b.name, p.name, t.name, m.text, m.categories, m.created_at, m.covers_from,
           m.covers_to, m.tokens, m.kind
    FROM memories m JOIN bots b ON b.id = m.bot_id JOIN people p ON p.id = m.person_id
    JOIN threads t ON t.id = m.thread_id
"""
_CHUNK_SQL = """
    SELECT c.id, d.name, d.title, c.ord, c.heading, c.text, c.tokens
    FROM chunks c JOIN documents d ON d.id = c.document_id
"""
_THREAD_SQL = """
    SELECT t.id, b.name, p.name, t.name, t.created_at, t.ended_at, t.summary, t.summary_through,
           (SELECT MAX(l.created_at) FROM lines l WHERE l.thread_id = t.id)
    FROM threads t JOIN bots b ON b.id = t.bot_id JOIN people p ON p.id = t.person_id
"""
_KEY_SQL = (
    "SELECT id, bot, person, label, created_at, expires_at, revoked_at, last_used_at FROM api_keys"
)


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment else None


def _summary(row: Sequence) -> Summary:
    return Summary(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        tuple(json.loads(row[5])),
        _utc(row[6]),
        _utc(row[7]),
        _utc(row[8]),
        row[9],
        row[10],
    )


def _thread(row: Sequence) -> ThreadState:
    return ThreadState(
        row[0], row[1], row[2], row[3], _utc(row[4]), _utc(row[5]), row[6], row[7], _utc(row[8])
    )


def _stored_key(row: Sequence) -> StoredKey:
    return StoredKey(row[0], row[1], row[2], row[3], *(_utc(moment) for moment in row[4:]))  # type: ignore[arg-type]


class PostgresExtras:
    """Threads' state and buffers, summaries, expertise and keys; mixed into PostgresStore."""

    # Provided by PostgresStore.
    _write: Callable[[], AbstractContextManager[psycopg.Connection]]
    _query: Callable[..., list[tuple]]
    _retried: Callable[[Callable[[psycopg.Connection], object]], object]
    _check_and_record_embedder: Callable[[psycopg.Connection, tuple[str, int] | None], None]
    _ensure_named: Callable[[psycopg.Connection, str, str], int]
    get_meta: Callable[[str], str | None]

    # -- threads --------------------------------------------------------------------------

    def thread_state(self, key: ThreadKey) -> ThreadState | None:
        rows = self._query(
            f"{_THREAD_SQL} WHERE b.name = %s AND p.name = %s AND t.name = %s",
            (key.bot, key.person, key.thread),
        )
        return _thread(rows[0]) if rows else None

    def open_threads(self, bot: str, person: str | None = None) -> list[ThreadState]:
        """Threads of a bot (one person's, or everyone's) that have lines and are not ended."""
        query = f"{_THREAD_SQL} WHERE b.name = %s AND t.ended_at IS NULL"
        params: list = [bot]
        if person is not None:
            query += " AND p.name = %s"
            params.append(person)
        threads = [_thread(row) for row in self._query(query + " ORDER BY t.id", params)]
        return [thread for thread in threads if thread.last_line_at is not None]

    def end_thread(self, thread_id: int, when: datetime | None = None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE threads SET ended_at = %s WHERE id = %s", (when or utc_now(), thread_id)
            )

    def reopen_thread(self, thread_id: int) -> None:
        with self._write() as db:
            db.execute("UPDATE threads SET ended_at = NULL WHERE id = %s", (thread_id,))

    def save_thread_summary(self, thread_id: int, summary: str, through_seq: int) -> None:
        """A summary written by a slower turn never replaces one that covers more."""
        with self._write() as db:
            db.execute(
                "UPDATE threads SET summary = %s, summary_through = %s "
                "WHERE id = %s AND summary_through < %s",
                (summary, through_seq, thread_id, through_seq),
            )

    # -- relevance buffers ----------------------------------------------------------------

    def buffer(self, thread_id: int) -> list[BufferEntry]:
        rows = self._query(
            "SELECT source_thread_id, first_seq, last_seq, score, matched_seqs "
            "FROM buffer_entries WHERE thread_id = %s ORDER BY position",
            (thread_id,),
        )
        return [BufferEntry(r[0], r[1], r[2], r[3], tuple(r[4])) for r in rows]

    def change_buffer(
        self, thread_id: int, change: Callable[[list[BufferEntry]], list[BufferEntry]]
    ) -> list[BufferEntry]:
        """Read, change and write a thread's buffer with its thread's row locked: two
        servers on one thread cannot lose each other's blocks. ``change`` may be called
        again (a transaction PostgreSQL aborted for a deadlock is run again)."""
        return self._retried(lambda db: self._change_buffer(db, thread_id, change))  # type: ignore[return-value]

    def _change_buffer(
        self,
        db: psycopg.Connection,
        thread_id: int,
        change: Callable[[list[BufferEntry]], list[BufferEntry]],
    ) -> list[BufferEntry]:
        # FOR NO KEY UPDATE: a second change of this buffer, a line written to the thread
        # and a forget of it wait; another thread's turn holding this one as recalled (FOR
        # KEY SHARE, below) does not. With FOR UPDATE, two threads recalling each other
        # waited on each other in a circle, and PostgreSQL killed one of the turns.
        db.execute("SELECT 1 FROM threads WHERE id = %s FOR NO KEY UPDATE", (thread_id,))
        held = [
            BufferEntry(r[0], r[1], r[2], r[3], tuple(r[4]))
            for r in db.execute(
                "SELECT source_thread_id, first_seq, last_seq, score, matched_seqs "
                "FROM buffer_entries WHERE thread_id = %s ORDER BY position",
                (thread_id,),
            )
        ]
        entries = change(held)
        # A block recalled from a thread forgotten since (another person's, on a bot
        # that shares memory) is left out: the thread is gone, and the turn goes on.
        # The rows kept are locked against a forget until the buffer is written.
        sources = sorted({entry.source_thread_id for entry in entries})
        found = db.execute(
            "SELECT id FROM threads WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE", (sources,)
        )
        existing = {row[0] for row in found}
        entries = [entry for entry in entries if entry.source_thread_id in existing]
        if entries != held:
            self._write_buffer(db, thread_id, entries)
        return entries

    def save_buffer(self, thread_id: int, entries: Sequence[BufferEntry]) -> None:
        with self._write() as db:
            self._write_buffer(db, thread_id, entries)

    @staticmethod
    def _write_buffer(
        db: psycopg.Connection, thread_id: int, entries: Sequence[BufferEntry]
    ) -> None:
        db.execute("DELETE FROM buffer_entries WHERE thread_id = %s", (thread_id,))
        db.cursor().executemany(
            "INSERT INTO buffer_entries (thread_id, position, source_thread_id, first_seq, "
            "last_seq, score, matched_seqs) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    thread_id,
                    position,
                    e.source_thread_id,
                    e.first_seq,
                    e.last_seq,
                    e.score,
                    list(e.matched_seqs),
                )
                for position, e in enumerate(entries)
            ],
        )

    # -- remembered summaries -------------------------------------------------------------

    def add_summary(
        self,
        thread_id: int,
        text: str,
        categories: Sequence[str],
        covers: tuple[datetime, datetime],
        tokens: int,
        vector: np.ndarray,
        vectors_by: tuple[str, int] | None = None,
    ) -> Summary:
        with self._write() as db:
            self._check_and_record_embedder(db, vectors_by)
            owner = db.execute(
                "SELECT bot_id, person_id FROM threads WHERE id = %s", (thread_id,)
            ).fetchone()
            if owner is None:
                raise StoreError(f"thread {thread_id} is not in the store")
            (memory_id,) = db.execute(
                "INSERT INTO memories (bot_id, person_id, thread_id, kind, text, categories, "
                "created_at, covers_from, covers_to, tokens, vector) "
                "VALUES (%s, %s, %s, 'summary', %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    *owner,
                    thread_id,
                    text,
                    json.dumps(list(categories)),
                    utc_now(),
                    covers[0],
                    covers[1],
                    tokens,
                    _blob(vector),
                ),
            ).fetchone()
            row = db.execute(f"{_SUMMARY_SQL} WHERE m.id = %s", (memory_id,)).fetchone()
        return _summary(row)

    def summaries(self, person: str, bot: str | None = None) -> list[Summary]:
        query = f"{_SUMMARY_SQL} WHERE p.name = %s" + (" AND b.name = %s" if bot else "")
        rows = self._query(query + " ORDER BY m.id", (person, bot) if bot else (person,))
        return [_summary(row) for row in rows]

    def summaries_by_id(self, ids: Sequence[int]) -> list[Summary]:
        ids = [int(i) for i in ids]
        if not ids:
            return []
        rows = self._query(f"{_SUMMARY_SQL} WHERE m.id = ANY(%s)", (ids,))
        by_id = {row[0]: _summary(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def summary_vectors(self, bot_id: int, person_id: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and vectors of a person's summaries (every person's with ``person_id`` None);
        a summary's id repeats once per vector it holds."""
        query, params = "SELECT id, vector FROM memories WHERE bot_id = %s", [bot_id]
        if person_id is not None:
            query += " AND person_id = %s"
            params.append(person_id)
        rows = self._query(query + " ORDER BY id", params)
        dimension = int(self.get_meta("dimension") or 0)
        if not rows or dimension == 0:
            return _matrix([])
        parts = [np.frombuffer(blob, dtype=np.float32).reshape(-1, dimension) for _, blob in rows]
        ids = np.concatenate(
            [np.full(len(p), i, dtype=np.int64) for (i, _), p in zip(rows, parts, strict=True)]
        )
        return ids, np.vstack(parts)

    def forget_summary(self, summary_id: int) -> bool:
        with self._write() as db:
            return db.execute("DELETE FROM memories WHERE id = %s", (summary_id,)).rowcount > 0

    # -- expertise ------------------------------------------------------------------------

    def add_document(
        self,
        bot: str,
        name: str,
        title: str,
        media: str,
        sha256: str,
        chunks: Sequence[NewChunk],
        vectors_by: tuple[str, int] | None = None,
    ) -> int:
        """Store a document and its chunks in one transaction, replacing one of that name."""
        with self._write() as db:
            self._check_and_record_embedder(db, vectors_by)
            bot_id = self._ensure_named(db, "bots", bot)
            db.execute("DELETE FROM documents WHERE bot_id = %s AND name = %s", (bot_id, name))
            (document_id,) = db.execute(
                "INSERT INTO documents (bot_id, name, title, media, sha256, added_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (bot_id, name, title, media, sha256, utc_now()),
            ).fetchone()
            db.cursor().executemany(
                "INSERT INTO chunks (document_id, bot_id, ord, heading, text, tokens, vector) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (document_id, bot_id, c.ord, c.heading, c.text, c.tokens, _blob(c.vector))
                    for c in chunks
                ],
            )
        return document_id

    def documents(self, bot: str) -> list[DocumentInfo]:
        rows = self._query(
            "SELECT d.name, d.title, d.media, d.sha256, d.added_at, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id) "
            "FROM documents d JOIN bots b ON b.id = d.bot_id WHERE b.name = %s ORDER BY d.name",
            (bot,),
        )
        return [DocumentInfo(r[0], r[1], r[2], r[3], _utc(r[4]), r[5]) for r in rows]  # type: ignore[arg-type]

    def remove_document(self, bot: str, name: str) -> bool:
        with self._write() as db:
            removed = db.execute(
                "DELETE FROM documents WHERE name = %s AND bot_id = "
                "(SELECT id FROM bots WHERE name = %s)",
                (name, bot),
            ).rowcount
        return removed > 0

    def chunk_vectors(self, bot_id: int) -> tuple[np.ndarray, np.ndarray]:
        return _matrix(
            self._query("SELECT id, vector FROM chunks WHERE bot_id = %s ORDER BY id", (bot_id,))
        )

    def chunks(self, ids: Sequence[int]) -> list[ExpertiseChunk]:
        ids = [int(i) for i in ids]
        if not ids:
            return []
        rows = self._query(f"{_CHUNK_SQL} WHERE c.id = ANY(%s)", (ids,))
        by_id = {row[0]: ExpertiseChunk(*row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def chunks_between(
        self, document: str, bot: str, first: int, last: int
    ) -> list[ExpertiseChunk]:
        rows = self._query(
            f"{_CHUNK_SQL} JOIN bots b ON b.id = c.bot_id "
            "WHERE d.name = %s AND b.name = %s AND c.ord BETWEEN %s AND %s ORDER BY c.ord",
            (document, bot, first, last),
        )
        return [ExpertiseChunk(*row) for row in rows]

    # -- re-embedding ---------------------------------------------------------------------

    def all_extra_texts(self) -> dict[str, list[tuple[int, str]]]:
        """Every summary's and chunk's (id, text), for re-embedding."""
        return {
            "memories": self._query("SELECT id, text FROM memories ORDER BY id"),
            # A chunk is embedded with its heading (see Memory.add_document).
            "chunks": self._query(
                "SELECT id, CASE WHEN COALESCE(heading, '') = '' THEN text "
                "ELSE heading || chr(10) || text END FROM chunks ORDER BY id"
            ),
        }

    @staticmethod
    def _replace_extra_vectors(
        db: psycopg.Connection, table: str, vectors: Iterator[tuple[int, np.ndarray]] | list
    ) -> None:
        if table not in {"memories", "chunks"}:
            raise StoreError(f"no vectors in table {table!r}")
        db.cursor().executemany(
            f"UPDATE {table} SET vector = %s WHERE id = %s", [(_blob(v), i) for i, v in vectors]
        )

    # -- API keys -------------------------------------------------------------------------

    def add_key(self, key: StoredKey, key_hash: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO api_keys (id, hash, bot, person, label, created_at, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (key.id, key_hash, key.bot, key.person, key.label, key.created_at, key.expires_at),
            )

    def api_keys(self) -> list[StoredKey]:
        """Every key, revoked and expired ones too, oldest first."""
        return [_stored_key(row) for row in self._query(f"{_KEY_SQL} ORDER BY created_at, id")]

    def key_by_hash(self, key_hash: str) -> StoredKey | None:
        rows = self._query(f"{_KEY_SQL} WHERE hash = %s", (key_hash,))
        return _stored_key(rows[0]) if rows else None

    def revoke_key(self, key_id: str, when: datetime) -> StoredKey | None:
        """Revoke a key (a second revoke keeps the first time); None if there is no such key."""
        with self._write() as db:
            db.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                (when, key_id),
            )
            row = db.execute(f"{_KEY_SQL} WHERE id = %s", (key_id,)).fetchone()
        return _stored_key(row) if row else None

    def mark_key_used(self, key_id: str, when: datetime) -> None:
        with self._write() as db:
            db.execute("UPDATE api_keys SET last_used_at = %s WHERE id = %s", (when, key_id))

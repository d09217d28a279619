"""The tables beside the lines, in the SQL both stores share: thread bookkeeping, remembered
summaries and a bot's expertise (documents cut into embedded chunks).

A mixin of :class:`~membot.store.sql_store.SqlStore`; it uses the store's ``_write``,
``_query`` and dialect, so a summary or a document's chunks commit with their vectors in one
transaction, like lines do. Summaries' and chunks' vectors are float32 bytes in both stores
(a ``BLOB``, a ``bytea``): read whole per scope, never searched in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np

from membot.errors import StoreError
from membot.model import Correction, ExpertiseChunk, Summary, ThreadState, utc_now
from membot.store.base import DocumentInfo, NewChunk, ThreadKey
from membot.store.dialect import Dialect, Row

__all__ = ["NewChunk", "StoreExtras"]


def _blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def _matrix(rows: Sequence[tuple[int, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    ids = np.asarray([row[0] for row in rows], dtype=np.int64)
    return ids, np.vstack([np.frombuffer(row[1], dtype=np.float32) for row in rows])


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


class StoreExtras:
    """Threads' state, summaries and expertise; mixed into ``SqlStore``."""

    # Provided by SqlStore.
    dialect: Dialect
    _write: Callable[[], AbstractContextManager[Any]]
    _query: Callable[..., list[Row]]
    _run: Callable[..., Any]
    _check_and_record_embedder: Callable[[Any, tuple[str, int] | None], None]
    _ensure_named: Callable[[Any, str, str], int]
    _removed: Callable[[Any, bool], None]
    get_meta: Callable[[str], str | None]

    def _summary(self, row: Row) -> Summary:
        time = self.dialect.read_time
        return Summary(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])),
                       time(row[6]), time(row[7]), time(row[8]), row[9], row[10])  # fmt: skip

    def _thread(self, row: Row) -> ThreadState:
        read = self.dialect.read_moment
        return ThreadState(row[0], row[1], row[2], row[3], self.dialect.read_time(row[4]),
                           read(row[5]), row[6], row[7], read(row[8]))  # fmt: skip

    def _by_ids(self, select: str, column: str, ids: Sequence[int]) -> dict[int, Row]:
        """The rows of ``select`` whose ``column`` is one of ``ids``, by their first value."""
        among, params = self.dialect.in_list(column, [int(i) for i in ids])
        return {row[0]: row for row in self._query(f"{select} WHERE {among}", params)}

    # -- threads --------------------------------------------------------------------------

    def thread_state(self, key: ThreadKey) -> ThreadState | None:
        rows = self._query(
            f"{_THREAD_SQL} WHERE b.name = ? AND p.name = ? AND t.name = ?",
            (key.bot, key.person, key.thread),
        )
        return self._thread(rows[0]) if rows else None

    def open_threads(self, bot: str, person: str | None = None) -> list[ThreadState]:
        """Threads of a bot (one person's, or everyone's) that have lines and are not ended."""
        sql = f"{_THREAD_SQL} WHERE b.name = ? AND t.ended_at IS NULL"
        params: list[Any] = [bot]
        if person is not None:
            sql += " AND p.name = ?"
            params.append(person)
        threads = [self._thread(row) for row in self._query(sql + " ORDER BY t.id", params)]
        return [thread for thread in threads if thread.last_line_at is not None]

    def end_thread(self, thread_id: int, when: datetime | None = None) -> None:
        with self._write() as db:
            self._run(
                db,
                "UPDATE threads SET ended_at = ? WHERE id = ?",
                (self.dialect.moment(when or utc_now()), thread_id),
            )

    def reopen_thread(self, thread_id: int) -> None:
        with self._write() as db:
            self._run(db, "UPDATE threads SET ended_at = NULL WHERE id = ?", (thread_id,))

    def save_thread_summary(self, thread_id: int, summary: str, through_seq: int) -> None:
        """The thread's running summary, covering its lines up to ``through_seq``; a summary
        written by a slower turn never replaces one that covers more."""
        with self._write() as db:
            self._run(
                db,
                "UPDATE threads SET summary = ?, summary_through = ? "
                "WHERE id = ? AND summary_through < ?",
                (summary, through_seq, thread_id, through_seq),
            )

    def rewrite_thread_summary(self, thread_id: int, summary: str) -> None:
        with self._write() as db:
            self._run(db, "UPDATE threads SET summary = ? WHERE id = ?", (summary, thread_id))

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
        moment = self.dialect.moment
        with self._write() as db:
            self._check_and_record_embedder(db, vectors_by)
            owner = self._run(
                db, "SELECT bot_id, person_id FROM threads WHERE id = ?", (thread_id,)
            ).fetchone()
            if owner is None:
                raise StoreError(f"thread {thread_id} is not in the store")
            memory_id = self.dialect.insert_id(
                db,
                "INSERT INTO memories (bot_id, person_id, thread_id, kind, text, categories, "
                "created_at, covers_from, covers_to, tokens, vector) "
                "VALUES (?, ?, ?, 'summary', ?, ?, ?, ?, ?, ?, ?)",
                (*owner, thread_id, text, json.dumps(list(categories)), moment(utc_now()),
                 moment(covers[0]), moment(covers[1]), tokens, _blob(vector)),
            )  # fmt: skip
            row = self._run(db, f"{_SUMMARY_SQL} WHERE m.id = ?", (memory_id,)).fetchone()
        return self._summary(row)

    def summaries(self, person: str, bot: str | None = None) -> list[Summary]:
        sql = f"{_SUMMARY_SQL} WHERE p.name = ?" + (" AND b.name = ?" if bot else "")
        rows = self._query(sql + " ORDER BY m.id", (person, bot) if bot else (person,))
        return [self._summary(row) for row in rows]

    def summaries_by_id(self, ids: Sequence[int]) -> list[Summary]:
        if not len(ids):
            return []
        by_id = self._by_ids(_SUMMARY_SQL, "m.id", ids)
        return [self._summary(by_id[int(i)]) for i in ids if int(i) in by_id]

    def summary_vectors(
        self, bot_id: int, person_ids: Sequence[int] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ids and vectors of the summaries of some people (a person and those linked with
        them; every person's with ``person_ids`` None).

        A summary may hold several vectors (the whole text, then each key point): its id
        repeats once per vector."""
        sql = "SELECT id, vector FROM memories WHERE bot_id = ?"
        params: list[Any] = [bot_id]
        if person_ids is not None:
            among, owners = self.dialect.in_list("person_id", list(person_ids))
            sql += f" AND {among}"
            params += owners
        rows = self._query(sql + " ORDER BY id", params)
        dimension = int(self.get_meta("dimension") or 0)
        if not rows or dimension == 0:
            return _matrix([])
        parts = [np.frombuffer(blob, dtype=np.float32).reshape(-1, dimension) for _, blob in rows]
        ids = np.concatenate(
            [np.full(len(p), i, dtype=np.int64) for (i, _), p in zip(rows, parts, strict=True)]
        )
        return ids, np.vstack(parts)

    def forget_summary(self, summary_id: int) -> bool:
        """Remove a summary with its history; its old bytes go at ``finish_removal``."""
        with self._write() as db:
            removed = self._run(db, "DELETE FROM memories WHERE id = ?", (summary_id,))
            self._removed(db, int(removed.rowcount) > 0)
            return int(removed.rowcount) > 0

    def rewrite_summary(
        self,
        summary_id: int,
        text: str,
        tokens: int,
        vector: np.ndarray,
        *,
        correction: tuple[str, str] | None = None,
        forgotten_point: str | None = None,
        vectors_by: tuple[str, int] | None = None,
    ) -> Summary | None:
        """Replace a summary's text and vectors in one transaction (None: it is gone). With
        ``correction`` (a point as it read, as it reads now), its history gains that row;
        with ``forgotten_point``, the history of that point goes (every row of its chain of
        corrections), so a point the person deleted is not kept as history either."""
        with self._write() as db:
            self._check_and_record_embedder(db, vectors_by)
            changed = self._run(
                db,
                "UPDATE memories SET text = ?, tokens = ?, vector = ? WHERE id = ?",
                (text, tokens, _blob(vector), summary_id),
            )
            if int(changed.rowcount) == 0:
                return None
            if correction is not None:
                self._run(
                    db,
                    "INSERT INTO memory_corrections (memory_id, old_text, new_text, "
                    "corrected_at) VALUES (?, ?, ?, ?)",
                    (summary_id, *correction, self.dialect.moment(utc_now())),
                )
            if forgotten_point is not None:  # its old bytes go at finish_removal
                self._forget_point_history(db, summary_id, forgotten_point)
                self._removed(db, True)
            row = self._run(db, f"{_SUMMARY_SQL} WHERE m.id = ?", (summary_id,)).fetchone()
        return self._summary(row)

    def _forget_point_history(self, db: Any, summary_id: int, point: str) -> None:
        rows = self._run(
            db,
            "SELECT id, old_text, new_text FROM memory_corrections WHERE memory_id = ? "
            "ORDER BY id DESC",
            (summary_id,),
        ).fetchall()
        chain, reading = [], point
        for row_id, old_text, new_text in rows:  # newest first: back along the chain
            if new_text == reading:
                chain.append(row_id)
                reading = old_text
        if chain:
            among, ids = self.dialect.in_list("id", chain)
            self._run(db, f"DELETE FROM memory_corrections WHERE {among}", ids)

    def summary_corrections(self, summary_ids: Sequence[int]) -> dict[int, list[Correction]]:
        """Each summary's corrections, oldest first, by summary id."""
        if not len(summary_ids):
            return {}
        among, params = self.dialect.in_list("memory_id", [int(i) for i in summary_ids])
        rows = self._query(
            "SELECT memory_id, old_text, new_text, corrected_at FROM memory_corrections "
            f"WHERE {among} ORDER BY id",
            params,
        )
        found: dict[int, list[Correction]] = {}
        for memory_id, old_text, new_text, when in rows:
            found.setdefault(memory_id, []).append(
                Correction(old_text, new_text, self.dialect.read_time(when))
            )
        return found

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
            self._run(db, "DELETE FROM documents WHERE bot_id = ? AND name = ?", (bot_id, name))
            document_id = self.dialect.insert_id(
                db,
                "INSERT INTO documents (bot_id, name, title, media, sha256, added_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (bot_id, name, title, media, sha256, self.dialect.moment(utc_now())),
            )
            self.dialect.execute_many(
                db,
                "INSERT INTO chunks (document_id, bot_id, ord, heading, text, tokens, vector) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(document_id, bot_id, c.ord, c.heading, c.text, c.tokens, _blob(c.vector))
                 for c in chunks],
            )  # fmt: skip
        return document_id

    def documents(self, bot: str) -> list[DocumentInfo]:
        rows = self._query(
            "SELECT d.name, d.title, d.media, d.sha256, d.added_at, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.document_id = d.id) "
            "FROM documents d JOIN bots b ON b.id = d.bot_id WHERE b.name = ? ORDER BY d.name",
            (bot,),
        )
        time = self.dialect.read_time
        return [DocumentInfo(r[0], r[1], r[2], r[3], time(r[4]), r[5]) for r in rows]

    def remove_document(self, bot: str, name: str) -> bool:
        with self._write() as db:
            removed: int = self._run(
                db,
                "DELETE FROM documents WHERE name = ? AND bot_id = "
                "(SELECT id FROM bots WHERE name = ?)",
                (name, bot),
            ).rowcount
        return removed > 0

    def chunk_vectors(self, bot_id: int) -> tuple[np.ndarray, np.ndarray]:
        return _matrix(
            self._query("SELECT id, vector FROM chunks WHERE bot_id = ? ORDER BY id", (bot_id,))
        )

    def chunks(self, ids: Sequence[int]) -> list[ExpertiseChunk]:
        if not len(ids):
            return []
        by_id = self._by_ids(_CHUNK_SQL, "c.id", ids)
        return [ExpertiseChunk(*by_id[int(i)]) for i in ids if int(i) in by_id]

    def chunks_between(
        self, document: str, bot: str, first: int, last: int
    ) -> list[ExpertiseChunk]:
        rows = self._query(
            f"{_CHUNK_SQL} JOIN bots b ON b.id = c.bot_id "
            "WHERE d.name = ? AND b.name = ? AND c.ord BETWEEN ? AND ? ORDER BY c.ord",
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
                f"ELSE heading || {self.dialect.newline} || text END FROM chunks ORDER BY id"
            ),
        }

    def _replace_extra_vectors(
        self, db: Any, table: str, vectors: Iterable[tuple[int, np.ndarray]]
    ) -> None:
        if table not in {"memories", "chunks"}:
            raise StoreError(f"no vectors in table {table!r}")
        self.dialect.execute_many(
            db, f"UPDATE {table} SET vector = ? WHERE id = ?", [(_blob(v), i) for i, v in vectors]
        )

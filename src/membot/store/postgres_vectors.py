"""The PostgreSQL store's vectors: snapshots of a scope's lines for the in-memory index, and
swapping every vector for another embedder's. A mixin of
:class:`~membot.store.postgres.PostgresStore`.

Ids are taken when a line is inserted but become visible when its transaction commits, so id
11 can be seen before id 10: a snapshot's ``cursor`` is therefore not an id but the oldest
transaction still running when it was read (``pg_snapshot_xmin``), and the next snapshot
returns every line written by that transaction or a later one (``lines.xid``), some of them
again; the index skips the ids it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from membot.errors import StoreError
from membot.store.base import ROLE_CODES, VectorRows, VectorSnapshot

_VECTOR_COLUMNS = (
    "l.id, l.bot_id, l.person_id, l.thread_id, l.seq, l.role, l.embedding, l.created_at"
)


def _vector_rows(rows: Sequence[Sequence]) -> VectorRows:
    if not rows:
        return VectorRows.empty(0)
    columns = list(zip(*rows, strict=True))
    as_int = [np.asarray(column, dtype=np.int64) for column in columns[:5]]
    roles = np.asarray([ROLE_CODES[role] for role in columns[5]], dtype=np.int8)
    vectors = np.vstack([vector.to_numpy() for vector in columns[6]]).astype(np.float32)
    created = np.asarray([when.timestamp() for when in columns[7]], dtype=np.float64)
    return VectorRows(*as_int, roles, vectors, created)


class PostgresVectors:
    """Vector snapshots by scope and re-embedding; mixed into ``PostgresStore``."""

    # Provided by PostgresStore.
    _pool: ConnectionPool
    _errors: Callable[[], AbstractContextManager[None]]
    _write: Callable[[], AbstractContextManager[psycopg.Connection]]
    _query: Callable[..., list[tuple]]
    _read_generation: Callable[[psycopg.Connection], int]
    _bump_generation: Callable[[psycopg.Connection], None]
    _set_meta: Callable[[psycopg.Connection, dict[str, str]], None]
    _replace_extra_vectors: Callable[..., None]

    def _snapshot(self, where: str, params: tuple, known_generation: int | None, after: int):
        """Generation, rows and the next cursor, read in one REPEATABLE READ snapshot. The
        horizon is read first: a transaction that commits later than this read is still
        running now, or starts later, so its id is at least the horizon."""
        with self._errors(), self._pool.connection() as db, db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            (horizon,) = db.execute(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
            ).fetchone()
            generation = self._read_generation(db)
            start = after if generation == known_generation else 0
            cursor = db.cursor(binary=True)
            rows = cursor.execute(
                f"SELECT {_VECTOR_COLUMNS} FROM lines l WHERE {where} "
                "AND l.xid >= %s::text::xid8 ORDER BY l.id",
                (*params, str(start)),
            ).fetchall()
        return VectorSnapshot(generation, _vector_rows(rows), int(horizon))

    def vector_snapshot(self, known_generation: int | None, after: int) -> VectorSnapshot:
        """Every line new to an index that read up to cursor ``after`` at
        ``known_generation`` (all lines when the generation moved); some it may hold."""
        return self._snapshot("TRUE", (), known_generation, after)

    def scope_vector_snapshot(
        self, bot_id: int, person_id: int | None, known_generation: int | None, after: int
    ) -> VectorSnapshot:
        """As :meth:`vector_snapshot`, for one scope (a person's lines with a bot, or with
        ``person_id`` None all the bot's), through the (bot, person, xid) index."""
        if person_id is None:
            return self._snapshot("l.bot_id = %s", (bot_id,), known_generation, after)
        where = "l.bot_id = %s AND l.person_id = %s"
        return self._snapshot(where, (bot_id, person_id), known_generation, after)

    def replace_vectors(
        self,
        vectors: Iterable[tuple[int, np.ndarray]],
        meta: dict[str, str],
        *,
        last_id: int,
        generation: int,
        extras: dict[str, list[tuple[int, np.ndarray]]] | None = None,
    ) -> None:
        """Swap every line's vector (and the summaries' and chunks' in ``extras``) and the
        embedder metadata in one transaction; refused when lines came or went since the
        caller read them (compared by count and generation, not by id: a line with a
        smaller id than ``last_id`` may commit after the read)."""
        pairs = [(np.asarray(vector, dtype=np.float32), int(i)) for i, vector in vectors]
        with self._write() as db:
            db.execute("LOCK TABLE lines IN SHARE ROW EXCLUSIVE MODE")  # no writer meanwhile
            (total,) = db.execute("SELECT COUNT(*) FROM lines").fetchone()
            newer = db.execute("SELECT 1 FROM lines WHERE id > %s LIMIT 1", (last_id,)).fetchone()
            if newer or total != len(pairs) or self._read_generation(db) != generation:
                raise StoreError("lines changed while re-embedding: run `membot reindex` again")
            db.cursor().executemany("UPDATE lines SET embedding = %s WHERE id = %s", pairs)
            for table, rows in (extras or {}).items():
                self._replace_extra_vectors(db, table, rows)
            self._set_meta(db, meta)
            self._bump_generation(db)

    def all_line_texts(self) -> list[tuple[int, str]]:
        return self._query("SELECT id, text FROM lines ORDER BY id")

    def bot_line_texts(self, bot: str) -> list[str]:
        rows = self._query(
            "SELECT l.text FROM lines l JOIN bots b ON b.id = l.bot_id WHERE b.name = %s", (bot,)
        )
        return [row[0] for row in rows]

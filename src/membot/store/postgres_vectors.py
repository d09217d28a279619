"""The PostgreSQL store's vectors: snapshots of a scope's lines for the in-memory index (and
of its lines without vectors, for the ``pairs`` and ``windows`` units), and swapping every
vector for another embedder's. A mixin of :class:`~membot.store.postgres.PostgresStore`.

Ids are taken when a line is inserted but become visible when its transaction commits, so id
11 can be seen before id 10: a snapshot's ``cursor`` is therefore not an id but the oldest
transaction still running when it was read (``pg_snapshot_xmin``), and the next snapshot
returns every line written by that transaction or a later one (``lines.xid``), some of them
again; the index skips the ids it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg_pool import ConnectionPool

from membot.errors import StoreError
from membot.store.base import LineSnapshot, PartVectors, VectorRows, VectorSnapshot
from membot.store.dialect import Row, one_row
from membot.store.sql_store import LineVectors, lines_changed

_VECTOR_COLUMNS = (
    "l.id, l.bot_id, l.person_id, l.thread_id, l.seq, l.role, l.embedding, l.created_at"
)


class _RawVector(Loader):
    """A ``vector`` value as the server sends it in binary: a 16-bit dimension, 16 unused
    bits, then the floats, big-endian. Kept as bytes and decoded a column at a time
    (:func:`_decoded`): one ``Vector`` object a row cost 13 ms of a shared turn's 600 rows."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def _raw_vector_cursor(db: psycopg.Connection) -> psycopg.Cursor:
    """A binary cursor of ``db`` that reads ``vector`` columns as :class:`_RawVector`."""
    cursor = db.cursor(binary=True)
    info = db.adapters.types.get("vector")
    if info is not None:
        cursor.adapters.register_loader(info.oid, _RawVector)
    return cursor


def _decoded(values: Sequence[bytes]) -> np.ndarray:
    """The float32 matrix of raw ``vector`` values (:class:`_RawVector`), one row each."""
    width = len(values[0])
    if any(len(value) != width for value in values):
        raise StoreError(
            "vectors of different dimensions in one scope: run `membot --embedder SPEC reindex`"
        )
    big_endian = np.frombuffer(b"".join(values), dtype=">f4").reshape(len(values), -1)
    return big_endian[:, 1:].astype(np.float32)  # column 0: the dimension and unused bits


def _vector_rows(rows: Sequence[Row]) -> VectorRows:
    """Rows as :meth:`VectorRows.from_rows` reads them, from pgvector's raw vectors and
    ``timestamptz`` values."""
    return VectorRows.from_rows(rows, vectors=_decoded, seconds=lambda when: when.timestamp())


# HNSW's build settings (pgvector's defaults) and the candidates a search keeps by default:
# docs/deploy.md gives recall@10 against exact search for several ef_search values.
HNSW_M, HNSW_EF_CONSTRUCTION, DEFAULT_EF_SEARCH = 16, 64, 100
MAX_EF_SEARCH = 1000  # the most pgvector accepts


def hnsw_index_sql(dimension: int) -> str:
    """The approximate index for the store's dimension: on the expression
    ``embedding::vector(N)`` (the column has no dimension), partial on rows of that dimension
    so that a row of another (during ``membot reindex``) is never cast."""
    return (
        f"CREATE INDEX IF NOT EXISTS lines_hnsw_{dimension} ON lines USING hnsw "
        f"((embedding::vector({dimension})) vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE vector_dims(embedding) = {dimension}"
    )


class PostgresVectors:
    """Vector snapshots by scope, approximate search, re-embedding; mixed into
    ``PostgresStore``."""

    # Provided by PostgresStore.
    _pool: ConnectionPool
    _errors: Callable[[], AbstractContextManager[None]]
    _write: Callable[[], AbstractContextManager[psycopg.Connection]]
    _query: Callable[..., list[Row]]
    _read_generation: Callable[[psycopg.Connection], int]
    _bump_generation: Callable[[psycopg.Connection], None]
    _set_meta: Callable[[psycopg.Connection, dict[str, str]], None]
    _replace_extra_vectors: Callable[..., None]
    _pgvector_iterates: bool | None = None  # read from the server on first use

    def _snapshot(
        self,
        where: str,
        params: tuple[Any, ...],
        known_generation: int | None,
        after: int,
        texts: bool = False,
    ) -> VectorSnapshot:
        """Generation, rows and the next cursor (see :meth:`_snapshot_rows`)."""
        columns = _VECTOR_COLUMNS + (", l.text" if texts else "")
        parts = (
            "SELECT p.line_id, p.vectors FROM line_parts p JOIN lines l ON l.id = p.line_id "
            f"WHERE {where} AND l.xid >= %s::text::xid8 ORDER BY p.line_id"
        )
        snapshot = self._snapshot_rows(columns, where, params, known_generation, after, parts)
        generation, rows, horizon, part_rows = snapshot
        lines = _vector_rows(rows)
        found = PartVectors.from_rows(part_rows, int(lines.vectors.shape[1]))
        return VectorSnapshot(generation, replace(lines, parts=found), horizon)

    def _snapshot_rows(
        self,
        columns: str,
        where: str,
        params: tuple[Any, ...],
        known_generation: int | None,
        after: int,
        parts: str | None = None,
    ) -> tuple[int, list[Row], int, list[Row]]:
        """Generation, rows of ``columns`` in id order, the next cursor and the rows of
        ``parts`` (the same lines' parts), read in one REPEATABLE READ snapshot. The horizon
        is read first: a transaction that commits later than this read is still running now,
        or starts later, so its id is at least the horizon."""
        with self._errors(), self._pool.connection() as db, db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            (horizon,) = one_row(
                db.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text").fetchone()
            )
            generation = self._read_generation(db)
            start = after if generation == known_generation else 0
            cursor = _raw_vector_cursor(db)
            rows = cursor.execute(
                f"SELECT {columns} FROM lines l WHERE {where} "
                "AND l.xid >= %s::text::xid8 ORDER BY l.id",
                (*params, str(start)),
            ).fetchall()
            part_rows = db.execute(parts, (*params, str(start))).fetchall() if parts else []
        return generation, rows, int(horizon), part_rows

    def scope_vector_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> VectorSnapshot:
        """Every line of one scope (a person's lines with a bot, with those of the identities
        linked with them: ``person_ids``; or with ``person_ids`` None all the bot's), with its
        vector and text, new to an index that read up to cursor ``after`` at
        ``known_generation`` (all of them when the generation moved); some it may hold
        already. Read through the (bot, person, xid) index."""
        if person_ids is None:
            return self._snapshot("l.bot_id = %s", (bot_id,), known_generation, after, True)
        where = "l.bot_id = %s AND l.person_id = ANY(%s)"
        params = (bot_id, list(person_ids))
        return self._snapshot(where, params, known_generation, after, True)

    def scope_line_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> LineSnapshot:
        """As :meth:`scope_vector_snapshot`, the lines' thread, seq, role, text and speaker
        without their vectors (what the ``pairs`` and ``windows`` units are cut from)."""
        where = "l.bot_id = %s"
        params: tuple[Any, ...] = (bot_id,)
        if person_ids is not None:
            where, params = where + " AND l.person_id = ANY(%s)", (bot_id, list(person_ids))
        columns = "l.id, l.thread_id, l.seq, l.role, l.text, l.speaker"
        generation, rows, horizon, _ = self._snapshot_rows(
            columns, where, params, known_generation, after
        )
        return LineSnapshot.from_rows(generation, rows, horizon)

    def approximate_search(
        self,
        query: np.ndarray,
        bot_id: int,
        person_id: int | None = None,
        k: int = 10,
        ef_search: int = DEFAULT_EF_SEARCH,
    ) -> list[tuple[int, float]]:
        """The ``k`` lines of a scope nearest ``query`` by cosine, best first, through the
        HNSW index: approximate, for scopes too large to read into memory (a bot sharing
        memory across 50,000 lines and more). The index holds every bot's lines and the scope
        is a filter: pgvector 0.8 and later scan on until ``k`` lines of the scope are found
        (``hnsw.iterative_scan``); older ones filter the index's ``ef_search`` candidates, so
        a scope that is a small part of the store wants a larger ``ef_search`` there."""
        vector = np.asarray(query, dtype=np.float32)
        dimension = len(vector)
        owner = "bot_id = %s" + (" AND person_id = %s" if person_id is not None else "")
        params = (bot_id,) if person_id is None else (bot_id, person_id)
        cast = f"embedding::vector({dimension})"
        with self._errors(), self._pool.connection() as db, db.transaction():
            db.execute(f"SET LOCAL hnsw.ef_search = {min(int(ef_search), MAX_EF_SEARCH)}")
            if self._iterative_scans(db):
                db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            # Materialised, then ordered: relaxed_order may return rows slightly out of order.
            rows = db.execute(
                f"WITH near AS MATERIALIZED (SELECT id, {cast} <=> %s::vector({dimension}) "
                f"AS distance FROM lines WHERE vector_dims(embedding) = {dimension} AND {owner} "
                "ORDER BY distance LIMIT %s) SELECT id, 1 - distance FROM near ORDER BY distance",
                (vector, *params, k),
            ).fetchall()
        return [(row[0], float(row[1])) for row in rows]

    def _iterative_scans(self, db: psycopg.Connection) -> bool:
        """Whether the server's pgvector scans its HNSW index on past a filter (0.8.0 on)."""
        if self._pgvector_iterates is None:
            sql = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            row = db.execute(sql).fetchone()
            version = tuple(int(part) for part in (row[0] if row else "0").split(".")[:2])
            self._pgvector_iterates = version >= (0, 8)
        return bool(self._pgvector_iterates)

    def vector_rows_around(self, line_ids: Sequence[int]) -> VectorRows:
        """The lines ``line_ids`` that still exist and the lines right before and after each
        in its thread, once each, in id order (through the (thread, seq) key)."""
        if not len(line_ids):
            return VectorRows.empty(0)
        with self._errors(), self._pool.connection() as db:
            rows = (
                _raw_vector_cursor(db)
                .execute(
                    f"SELECT DISTINCT ON (l.id) {_VECTOR_COLUMNS} FROM lines h JOIN lines l "
                    "ON l.thread_id = h.thread_id AND l.seq BETWEEN h.seq - 1 AND h.seq + 1 "
                    "WHERE h.id = ANY(%s) ORDER BY l.id",
                    ([int(line_id) for line_id in line_ids],),
                )
                .fetchall()
            )
        return _vector_rows(rows)

    def _hold_lines(self, db: psycopg.Connection) -> None:
        db.execute("LOCK TABLE lines IN SHARE ROW EXCLUSIVE MODE")  # no writer meanwhile

    def _swap_line_vectors(
        self, db: psycopg.Connection, vectors: LineVectors, meta: dict[str, str]
    ) -> None:
        """The lines' new vectors and the approximate index for their dimension. Lines are
        compared by count too, not by id alone: a line with a smaller id than the last one
        read may have committed after the read."""
        pairs = [(np.asarray(vector, dtype=np.float32), int(i)) for i, vector in vectors]
        (total,) = one_row(db.execute("SELECT COUNT(*) FROM lines").fetchone())
        if total != len(pairs):
            raise lines_changed()
        db.cursor().executemany("UPDATE lines SET embedding = %s WHERE id = %s", pairs)
        self._swap_index(db, meta.get("dimension"))

    @staticmethod
    def _swap_index(db: psycopg.Connection, dimension: str | None) -> None:
        """The approximate index for the vectors' new dimension, in place of the old one."""
        row = db.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
        if dimension is None or (row and row[0] == dimension):
            return
        if row:
            db.execute(f"DROP INDEX IF EXISTS lines_hnsw_{int(row[0])}")
        db.execute(hnsw_index_sql(int(dimension)))

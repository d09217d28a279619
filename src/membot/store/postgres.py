"""The store for more than one machine: PostgreSQL with pgvector, through a connection pool.

It behaves as :class:`~membot.store.sqlite.SqliteStore` does. What differs is how the
invariants are kept with many writers on many machines:

- ``seq``: a line is written after ``SELECT … FOR UPDATE`` on its thread's row, in the
  transaction that writes the line, its vector and its lexical row, so two writers on one
  thread take turns and ``seq`` has no gaps or repeats; ``UNIQUE (thread_id, seq)`` stands
  behind it. A batch locks all its threads first, in one order, so batches over the same
  threads wait for each other; a deadlock met anyway (PostgreSQL aborts one side) is retried.
- Relevance buffers: a turn changes its thread's buffer holding the thread ``FOR NO KEY
  UPDATE`` and the threads it recalls ``FOR KEY SHARE`` (against a forget), locks that do
  not conflict, so turns of threads recalling each other do not wait on each other.
- New lines: ids can commit out of order, so a vector snapshot's cursor is a transaction
  horizon, not an id (``postgres_vectors.py``).
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from membot.errors import StoreError, StoreFullError
from membot.model import Line, utc_now
from membot.store.base import BufferEntry, NewLine, ThreadKey
from membot.store.dialect import POSTGRESQL, Row, one_row
from membot.store.postgres_lexical import bm25_query, word_count
from membot.store.postgres_schema import migrate
from membot.store.postgres_turns import (
    RECONNECT_SECONDS,
    PostgresTurnLocks,
    warn_of_short_idle_timeout,
)
from membot.store.postgres_vectors import PostgresVectors, hnsw_index_sql
from membot.store.sql_store import NEW_LINE_COLUMNS, LexicalQuery, SqlStore, ThreadRef, line_values

log = logging.getLogger(__name__)

Connection = psycopg.Connection[TupleRow]
Result = TypeVar("Result")

_INSERT_LINE = (
    f"INSERT INTO lines ({NEW_LINE_COLUMNS}, embedding, words) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)

# The key of the advisory lock under which a bot's SMS number is checked and saved.
SMS_NUMBER_LOCK_CLASS = 0x6D63


def _insert_values(placed: tuple[ThreadRef, NewLine, int], line: Line) -> Row:
    ref, new, seq = placed
    vector = np.ascontiguousarray(new.vector, dtype=np.float32)
    return (*line_values(ref, new, seq, line.created_at), vector, word_count(new.text or ""))


# Connections per process: a server's worker threads share them (docs/deploy.md).
DEFAULT_POOL_SIZE = 8
_RETRIES = 5


def _redacted(url: str) -> str:
    """The URL without its password, for messages: ``postgresql://USER@HOST:PORT/DB``, a
    socket folder as ``?host=``."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://…"
    user = f"{info['user']}@" if info.get("user") else ""
    host, port, database = str(info.get("host") or ""), info.get("port"), info.get("dbname") or ""
    if host.startswith("/"):
        return f"postgresql://{user}/{database}?host={host}"
    return f"postgresql://{user}{host or 'localhost'}{f':{port}' if port else ''}/{database}"


_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_PASSWORD_SETTING = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


def without_secrets(message: str, url: str) -> str:
    """``message`` (a driver's error) with the URL's password taken out, wherever it shows."""
    password = urlparse(url).password
    if password:
        message = message.replace(password, "***").replace(unquote(password), "***")
    message = _PASSWORD_IN_URL.sub(r"\1:***@", message)
    return _PASSWORD_SETTING.sub(r"\1***", message)


class PostgresStore(PostgresVectors, SqlStore):
    """Bots, people, threads, lines, vectors and the rest in a PostgreSQL database (or one
    schema of it), shared by any number of processes on any number of machines."""

    dialect = POSTGRESQL

    def __init__(self, url: str, schema: str | None = None, pool_size: int | None = None) -> None:
        self.url, self.schema = url, schema
        self.location = _redacted(url) + (f" (schema {schema})" if schema else "")
        # A schema of its own (scratch stores, tests) is chosen by the search path; without
        # one, the URL's own settings stand.
        kwargs: dict[str, Any] = {"autocommit": True}
        if schema:
            kwargs["options"] = f"-c search_path={schema},public"
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                if schema:
                    connection.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                    )
            with psycopg.connect(url, **kwargs) as connection:
                migrate(connection)
                warn_of_short_idle_timeout(connection)
        except psycopg.Error as error:
            said = without_secrets(str(error), url)
            raise StoreError(f"cannot open the store at {self.location}: {said}") from error
        size = pool_size or int(os.environ.get("MEMBOT_PG_POOL", DEFAULT_POOL_SIZE))
        # Checked as handed out (an empty query: one round trip, about 75 µs on a local
        # socket): after PostgreSQL restarted, every pooled connection was dead, and the
        # next call on each failed.
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs=kwargs,
            configure=_configure,
            check=ConnectionPool.check_connection,
            reconnect_timeout=RECONNECT_SECONDS,
            open=True,
        )
        self._turns = PostgresTurnLocks(url, kwargs, schema)

    def close(self) -> None:
        self._turns.close()
        self._pool.close()

    def turn_lock(self, *keys: ThreadKey) -> AbstractContextManager[None]:
        """Held while a turn of the thread is answered: one at a time in any process on any
        machine (:mod:`membot.store.postgres_turns`)."""
        return self._turns.held(*((key.bot, key.person, key.thread) for key in keys))

    def drop(self) -> None:
        """Close, and remove this store's schema with everything in it (a scratch store's)."""
        self.close()
        if not self.schema:
            raise StoreError("only a store in a schema of its own can be dropped")
        with self._errors(), psycopg.connect(self.url, autocommit=True) as connection:
            statement = sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema))
            connection.execute(statement)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as error:
            raise self._failure(error) from error

    def _failure(self, error: psycopg.Error) -> StoreError:
        """The error to raise for ``error``: a full disk says so (HTTP 507), as on SQLite."""
        if isinstance(error, psycopg.errors.DiskFull):
            return StoreFullError(
                f"the store at {self.location} is full (its disk): nothing of this change was "
                "stored, what was stored before is intact; free some space"
            )
        return StoreError(f"the store at {self.location} failed: {error}")

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        with self._errors(), self._pool.connection() as db:
            yield db

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._errors(), self._pool.connection() as db, db.transaction():
            yield db

    def _retried(self, work: Callable[[Connection], Result]) -> Result:
        """Run ``work`` in a transaction, again when PostgreSQL aborted it for a deadlock."""
        for attempt in range(_RETRIES):
            try:
                with self._pool.connection() as db, db.transaction():
                    return work(db)
            except psycopg.errors.DeadlockDetected as error:
                if attempt == _RETRIES - 1:
                    raise self._failure(error) from error
                log.info("deadlock between writers, retrying (%d)", attempt + 1)
                time.sleep(random.uniform(0, 0.02 * (attempt + 1)))  # apart, not in step
            except psycopg.Error as error:
                raise self._failure(error) from error
        raise AssertionError("unreachable")

    def check_reachable(self, timeout: float) -> str | None:
        """``StoreError`` unless a connection answers within ``timeout`` seconds (a call
        otherwise waits the pool's 30 s for one while the database is down); the store's
        embedder."""
        with self._errors(), self._pool.connection(timeout=timeout) as db:
            rows = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchall()
        return rows[0][0] if rows else None

    # -- metadata -------------------------------------------------------------------------

    @staticmethod
    def _bump_generation(db: Connection, bot_ids: Iterable[int] | None = None) -> None:
        """Move the generation (every bot's: ``bot_ids`` are for SQLite's per-bot stamps)."""
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = (meta.value::bigint + 1)::text"
        )

    # -- bots, people, threads ------------------------------------------------------------

    def _ensure_thread(self, db: Connection, key: ThreadKey) -> ThreadRef:
        """The thread's row, made if new, locked until the transaction ends: the writer
        holding it is the only one taking seqs of that thread. A thread that exists is found
        and locked in one statement (a turn's lines go to one); a new one takes six."""
        row = db.execute(
            "SELECT t.id, t.bot_id, t.person_id FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id "
            "WHERE b.name = %s AND p.name = %s AND t.name = %s FOR UPDATE OF t",
            (key.bot, key.person, key.thread),
        ).fetchone()
        if row is not None:
            return ThreadRef(row[0], row[1], row[2], key)
        bot_id = self._ensure_named(db, "bots", key.bot)
        person_id = self._ensure_named(db, "people", key.person)
        db.execute(
            "INSERT INTO threads (bot_id, person_id, name, created_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (bot_id, person_id, name) DO NOTHING",
            (bot_id, person_id, key.thread, utc_now()),
        )
        row = db.execute(
            "SELECT id FROM threads WHERE bot_id = %s AND person_id = %s AND name = %s FOR UPDATE",
            (bot_id, person_id, key.thread),
        ).fetchone()
        return ThreadRef(one_row(row)[0], bot_id, person_id, key)

    def finish_removal(self) -> None:
        """Nothing to do at once: the rows a removal deleted stay in the table files as dead
        tuples until VACUUM (docs/reliability.md, "Forget")."""

    # -- lines ----------------------------------------------------------------------------

    def add_lines(
        self, lines: Iterable[NewLine], vectors_by: tuple[str, int] | None = None
    ) -> list[Line]:
        """Store lines with their vectors and lexical rows, all in one transaction; a line
        whose ``source_key`` its thread holds already is skipped (it is not in the result)."""
        batch = list(lines)  # read before the transaction: it may be retried
        return self._retried(lambda db: self._add_lines(db, batch, vectors_by))

    def _add_lines(
        self, db: Connection, batch: Sequence[NewLine], vectors_by: tuple[str, int] | None
    ) -> list[Line]:
        self._check_and_record_embedder(db, vectors_by)
        # A reply is stored only while the line it answers is (held until commit: a forget
        # deleting that line waits, then takes the reply with its thread).
        batch = [new for new in batch if new.answers is None or _holds_line(db, new.answers)]
        # Every thread of the batch locked first, in one order: two batches over the same
        # threads wait for each other instead of deadlocking.
        keys = sorted({new.key for new in batch}, key=lambda k: (k.bot, k.person, k.thread))
        refs = {key: self._ensure_thread(db, key) for key in keys}
        held = self._held_keys(db, batch, refs)
        next_seq: dict[int, int] = {}
        placed: list[tuple[ThreadRef, NewLine, int]] = []
        for new in batch:
            ref = refs[new.key]
            if new.source_key is not None:
                if (ref.id, new.source_key) in held:
                    continue
                held.add((ref.id, new.source_key))  # a key twice in one batch: stored once
            if ref.id not in next_seq:
                if new.answers is None:  # a line said (not a reply) takes an ended thread up
                    self._resume_thread(db, ref.id)
                next_seq[ref.id] = self._next_seq(db, ref.id)
            placed.append((ref, new, next_seq[ref.id]))
            next_seq[ref.id] += 1
        return self._insert_lines(db, placed)

    @staticmethod
    def _held_keys(
        db: Connection, batch: Sequence[NewLine], refs: dict[ThreadKey, ThreadRef]
    ) -> set[tuple[int, str]]:
        """(thread id, source key) of the batch's keys the threads hold already: one query
        for the batch (its threads are locked, so none is added meanwhile)."""
        wanted = [(refs[new.key].id, new.source_key) for new in batch if new.source_key]
        if not wanted:
            return set()
        threads, keys = (list(column) for column in zip(*wanted, strict=True))
        rows = db.execute(
            "SELECT l.thread_id, l.source_key FROM lines l "
            "JOIN unnest(%s::bigint[], %s::text[]) AS w (thread_id, source_key) "
            "ON l.thread_id = w.thread_id AND l.source_key = w.source_key",
            (threads, keys),
        ).fetchall()
        return {(thread_id, key) for thread_id, key in rows}

    def _check_and_record_embedder(
        self, db: Connection, vectors_by: tuple[str, int] | None
    ) -> None:
        """Refuse another embedder's vectors; record the embedder on the store's first write.
        A second writer with another embedder waits on the first's rows, then is refused."""
        if vectors_by is None:
            return
        recorded = db.execute(
            "INSERT INTO meta (key, value) VALUES ('dimension', %s) ON CONFLICT (key) DO NOTHING "
            "RETURNING value",
            (str(vectors_by[1]),),
        ).fetchone()
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('embedder', %s) ON CONFLICT (key) DO NOTHING",
            (vectors_by[0],),
        )
        self._check_embedder(db, *vectors_by)
        if recorded:  # the store's first vectors: its approximate index, while it is empty
            db.execute(hnsw_index_sql(vectors_by[1]))

    @staticmethod
    def _insert_lines(
        db: Connection, placed: Sequence[tuple[ThreadRef, NewLine, int]]
    ) -> list[Line]:
        """Insert lines at their seqs, sent together: one round trip for the batch, where each
        line took two (its key checked, then inserted), each a wait on the network."""
        if not placed:
            return []
        now = utc_now()
        lines = [
            Line(
                0,
                ref.key.bot,
                ref.key.person,
                ref.key.thread,
                seq,
                new.role,
                new.text,
                (new.created_at or now).astimezone(UTC),
                new.tokens,
                new.speaker,
                new.ref,
            )
            for ref, new, seq in placed
        ]
        ids = []
        with db.cursor() as cursor:
            cursor.executemany(_INSERT_LINE, map(_insert_values, placed, lines), returning=True)
            while True:
                ids.append(one_row(cursor.fetchone())[0])
                if not cursor.nextset():
                    break
            parts = [
                (line_id, *new.parts.to_bytes())
                for (_, new, _), line_id in zip(placed, ids, strict=True)
                if new.parts is not None
            ]
            if parts:
                cursor.executemany(
                    "INSERT INTO line_parts (line_id, bounds, vectors) VALUES (%s, %s, %s)", parts
                )
        return [replace(line, id=line_id) for line, line_id in zip(lines, ids, strict=True)]

    def _lexical_rows(self, query: LexicalQuery) -> list[tuple[int, float]]:
        """BM25 from the ``tsvector`` column (``postgres_lexical.py``); with
        ``max_postings``, the rarest terms by the store's counts (as SQLite's FTS5 has them);
        with ``among``, the IDF and mean length are still the store's."""
        sql, params = bm25_query(query)
        return [(row[0], float(row[1])) for row in self._query(sql, params)]

    def _lock_sms_numbers(self, db: Connection) -> None:
        # One lock for every bot's number: a new bot's row, then this lock, deadlocked with
        # a save of that bot taking them the other way round (so it is taken first).
        db.execute("SELECT pg_advisory_xact_lock(%s, 0)", (SMS_NUMBER_LOCK_CLASS,))

    # -- relevance buffers ----------------------------------------------------------------

    def change_buffer(
        self, thread_id: int, change: Callable[[list[BufferEntry]], list[BufferEntry]]
    ) -> list[BufferEntry]:
        """Read, change and write a thread's buffer with its thread's row locked: two
        servers on one thread cannot lose each other's blocks. ``change`` may be called
        again (a transaction PostgreSQL aborted for a deadlock is run again)."""
        return self._retried(lambda db: self._change_buffer(db, thread_id, change))

    def _change_buffer(
        self,
        db: Connection,
        thread_id: int,
        change: Callable[[list[BufferEntry]], list[BufferEntry]],
    ) -> list[BufferEntry]:
        # FOR NO KEY UPDATE: a second change of this buffer, a line written to the thread
        # and a forget of it wait; another thread's turn holding this one as recalled (FOR
        # KEY SHARE, below) does not. With FOR UPDATE, two threads recalling each other
        # waited on each other in a circle, and PostgreSQL killed one of the turns.
        db.execute("SELECT 1 FROM threads WHERE id = %s FOR NO KEY UPDATE", (thread_id,))
        held = self._read_buffer(db, thread_id)
        entries = change(held)
        # A block recalled from a thread forgotten since (another person's, on a bot
        # that shares memory) is left out: the thread is gone, and the turn goes on.
        # The rows kept are locked against a forget until the buffer is written.
        sources = [entry.source_thread_id for entry in entries]
        existing = self._existing_threads(db, sources, lock=" FOR KEY SHARE")
        entries = [entry for entry in entries if entry.source_thread_id in existing]
        if entries != held:
            self._write_buffer(db, thread_id, entries)
        return entries


def _configure(connection: Connection) -> None:
    """Each pooled connection sends and reads ``vector`` values as numpy arrays, in binary."""
    from pgvector.psycopg import register_vector

    register_vector(connection)


def _holds_line(db: Connection, line_id: int) -> bool:
    """Whether the line is there, held until commit against a delete (``FOR KEY SHARE``)."""
    row = db.execute("SELECT 1 FROM lines WHERE id = %s FOR KEY SHARE", (line_id,)).fetchone()
    return row is not None

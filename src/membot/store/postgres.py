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

import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import unquote, urlparse

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from membot.errors import StoreError, StoreFullError
from membot.model import Line, Role, ThreadInfo, utc_now
from membot.store.base import (
    NewLine,
    SourceKey,
    ThreadKey,
    bot_taken,
    check_embedder_meta,
    number_owner,
    number_taken,
    ranges_condition,
    split_ranges,
)
from membot.store.postgres_extras import PostgresExtras
from membot.store.postgres_lexical import bm25_query, word_count
from membot.store.postgres_schema import migrate
from membot.store.postgres_sms import PostgresSms
from membot.store.postgres_turns import (
    RECONNECT_SECONDS,
    PostgresTurnLocks,
    warn_of_short_idle_timeout,
)
from membot.store.postgres_vectors import PostgresVectors, hnsw_index_sql

log = logging.getLogger(__name__)

Connection = psycopg.Connection[TupleRow]

_INSERT_LINE = (
    "INSERT INTO lines (thread_id, bot_id, person_id, seq, role, speaker, text, created_at, "
    "tokens, ref, source_key, embedding, words) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)

# The key of the advisory lock under which a bot's SMS number is checked and saved.
SMS_NUMBER_LOCK_CLASS = 0x6D63


def _insert_values(placed: tuple[ThreadRef, NewLine, int], line: Line) -> tuple:
    ref, new, seq = placed
    vector = np.ascontiguousarray(new.vector, dtype=np.float32)
    return (
        ref.id,
        ref.bot_id,
        ref.person_id,
        seq,
        str(new.role),
        new.speaker,
        new.text,
        line.created_at,
        new.tokens,
        new.ref,
        new.source_key,
        vector,
        word_count(new.text or ""),
    )


_LINE_COLUMNS = """
    l.id, b.name, p.name, t.name, l.seq, l.role, l.text, l.created_at, l.tokens, l.speaker, l.ref
"""
_LINE_FROM = """
    FROM lines l JOIN threads t ON t.id = l.thread_id
    JOIN bots b ON b.id = l.bot_id JOIN people p ON p.id = l.person_id
"""
# Connections per process: a server's worker threads share them (docs/deploy.md).
DEFAULT_POOL_SIZE = 8
_RETRIES = 5


def _line(row: Sequence) -> Line:
    return Line(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        Role(row[5]),
        row[6],
        row[7].astimezone(UTC),
        row[8],
        row[9],
        row[10],
    )


def _redacted(url: str) -> str:
    """The URL without its password, for messages: ``postgresql://USER@HOST:PORT/DB``, a
    socket folder as ``?host=``."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://…"
    user = f"{info['user']}@" if info.get("user") else ""
    host, port, database = info.get("host") or "", info.get("port"), info.get("dbname") or ""
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


def _check_embedder(db: Connection, name: str, dimension: int | None) -> None:
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dimension')"))
    check_embedder_meta(meta, name, dimension)


def _owner_filter(person: str, bot: str | None, thread: str | None) -> tuple[str, list[str]]:
    conditions, params = ["p.name = %s"], [person]
    for column, value in (("b.name", bot), ("t.name", thread)):
        if value:
            conditions.append(f"{column} = %s")
            params.append(value)
    return " AND ".join(conditions), params


@dataclass(frozen=True)
class ThreadRef:
    id: int
    bot_id: int
    person_id: int
    key: ThreadKey


class PostgresStore(PostgresVectors, PostgresExtras, PostgresSms):
    """Bots, people, threads, lines, vectors and the rest in a PostgreSQL database (or one
    schema of it), shared by any number of processes on any number of machines."""

    def __init__(self, url: str, schema: str | None = None, pool_size: int | None = None) -> None:
        self.url, self.schema = url, schema
        self.location = _redacted(url) + (f" (schema {schema})" if schema else "")
        # A schema of its own (scratch stores, tests) is chosen by the search path; without
        # one, the URL's own settings stand.
        kwargs: dict = {"autocommit": True}
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
    def _write(self) -> Iterator[Connection]:
        with self._errors(), self._pool.connection() as db, db.transaction():
            yield db

    def _retried(self, work: Callable[[Connection], object]) -> object:
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

    def _query(self, query: str, params: Sequence | dict = ()) -> list[tuple]:
        with self._errors(), self._pool.connection() as db:
            return db.execute(query, params).fetchall()

    def check_reachable(self, timeout: float) -> str | None:
        """``StoreError`` unless a connection answers within ``timeout`` seconds (a call
        otherwise waits the pool's 30 s for one while the database is down); the store's
        embedder."""
        with self._errors(), self._pool.connection(timeout=timeout) as db:
            rows = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchall()
        return rows[0][0] if rows else None

    # -- metadata -------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as db:
            self._set_meta(db, values)

    @staticmethod
    def _set_meta(db: Connection, values: dict[str, str]) -> None:
        db.cursor().executemany(
            "INSERT INTO meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            list(values.items()),
        )

    def generation(self) -> int:
        """Bumped whenever lines or vectors are removed or replaced (not on plain appends)."""
        return int(self.get_meta("generation") or 0)

    @staticmethod
    def _bump_generation(db: Connection) -> None:
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = (meta.value::bigint + 1)::text"
        )

    @staticmethod
    def _read_generation(db: Connection) -> int:
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    # -- bots, people, threads ------------------------------------------------------------

    def bot_settings(self, bot: str) -> dict | None:
        rows = self._query("SELECT settings FROM bots WHERE name = %s", (bot,))
        return json.loads(rows[0][0]) if rows else None

    def save_bot(self, bot: str, settings: dict, *, new: bool = False) -> None:
        with self._write() as db:
            number = settings.get("sms_number")
            if number:
                # Checked under one lock, in the transaction that saves it: two bots given one
                # number at once both passed a check made before it. Taken first, before any
                # row, so every save takes its locks in one order (a new bot's row, then this
                # lock, deadlocked with a save of that bot taking them the other way round).
                db.execute("SELECT pg_advisory_xact_lock(%s, 0)", (SMS_NUMBER_LOCK_CLASS,))
            if new:  # ON CONFLICT waits for another creation of the name to commit
                made = db.execute(
                    "INSERT INTO bots (name, created_at) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO NOTHING RETURNING id",
                    (bot, utc_now()),
                ).fetchone()
                if made is None:
                    raise bot_taken(bot)
            if number:
                rows = db.execute(
                    "SELECT name, settings FROM bots WHERE name != %s AND strpos(settings, %s) > 0",
                    (bot, number),
                ).fetchall()
                if owner := number_owner(rows, number):
                    raise number_taken(owner, number)
            bot_id = self._ensure_named(db, "bots", bot)
            db.execute(
                "UPDATE bots SET settings = %s WHERE id = %s", (json.dumps(settings), bot_id)
            )

    def bots(self) -> list[str]:
        return [row[0] for row in self._query("SELECT name FROM bots ORDER BY name")]

    def people(self, bot: str) -> list[str]:
        """The people with a thread with ``bot``, by name."""
        rows = self._query(
            "SELECT DISTINCT p.name FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id WHERE b.name = %s ORDER BY p.name",
            (bot,),
        )
        return [row[0] for row in rows]

    @staticmethod
    def _ensure_named(db: Connection, table: str, name: str) -> int:
        # ON CONFLICT waits for a concurrent writer of the same name, then finds its row.
        row = db.execute(
            f"INSERT INTO {table} (name, created_at) VALUES (%s, %s) "
            "ON CONFLICT (name) DO NOTHING RETURNING id",
            (name, utc_now()),
        ).fetchone()
        if row is None:
            row = db.execute(f"SELECT id FROM {table} WHERE name = %s", (name,)).fetchone()
        return row[0]

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
        return ThreadRef(row[0], bot_id, person_id, key)

    def thread_id(self, key: ThreadKey) -> int | None:
        rows = self._query(
            "SELECT t.id FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id "
            "WHERE b.name = %s AND p.name = %s AND t.name = %s",
            (key.bot, key.person, key.thread),
        )
        return rows[0][0] if rows else None

    def person_id(self, person: str) -> int | None:
        rows = self._query("SELECT id FROM people WHERE name = %s", (person,))
        return rows[0][0] if rows else None

    def bot_id(self, bot: str) -> int | None:
        rows = self._query("SELECT id FROM bots WHERE name = %s", (bot,))
        return rows[0][0] if rows else None

    def threads(self, bot: str | None, person: str) -> list[ThreadInfo]:
        """A person's threads (with one bot, or all), oldest first."""
        query = (
            "SELECT b.name, p.name, t.name, COUNT(l.id), t.created_at, MAX(l.created_at), "
            "t.ended_at FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id LEFT JOIN lines l ON l.thread_id = t.id "
            "WHERE p.name = %s"
            + (" AND b.name = %s" if bot else "")
            + " GROUP BY t.id, b.name, p.name ORDER BY t.id"
        )
        rows = self._query(query, (person, bot) if bot else (person,))
        return [ThreadInfo(*row[:4], *(_utc(moment) for moment in row[4:])) for row in rows]

    def delete_bot(self, bot: str) -> dict[str, int]:
        """Remove a bot with everything it holds; people left with nothing are removed too."""
        with self._write() as db:
            row = db.execute("SELECT id FROM bots WHERE name = %s", (bot,)).fetchone()
            if row is None:
                return {"threads": 0, "lines": 0, "summaries": 0, "documents": 0}
            counts = {
                name: db.execute(f"SELECT COUNT(*) FROM {table} = %s", (row[0],)).fetchone()[0]
                for name, table in (
                    ("threads", "threads WHERE bot_id"),
                    ("lines", "lines WHERE bot_id"),
                    ("summaries", "memories WHERE bot_id"),
                    ("documents", "documents WHERE bot_id"),
                )
            }
            db.execute("DELETE FROM bots WHERE id = %s", (row[0],))  # cascades to the rest
            self._forget_sms(db, None, bot)
            db.execute(
                "DELETE FROM people WHERE NOT EXISTS "
                "(SELECT 1 FROM threads t WHERE t.person_id = people.id)"
            )
            # Its keys go with it, in this transaction (see SqliteStore.delete_bot).
            db.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE bot = %s AND revoked_at IS NULL",
                (utc_now(), bot),
            )
            self._bump_generation(db)
        return counts

    def finish_removal(self) -> None:
        """Nothing to do at once: the rows a removal deleted stay in the table files as dead
        tuples until VACUUM (docs/reliability.md, "Forget")."""

    # -- lines ----------------------------------------------------------------------------

    def check_embedder(self, name: str, dimension: int | None = None) -> None:
        """Refuse vectors of another model or dimension than the store's."""
        with self._errors(), self._pool.connection() as db:
            _check_embedder(db, name, dimension)

    def add_lines(
        self, lines: Iterable[NewLine], vectors_by: tuple[str, int] | None = None
    ) -> list[Line]:
        """Store lines with their vectors and lexical rows, all in one transaction; a line
        whose ``source_key`` its thread holds already is skipped (it is not in the result)."""
        batch = list(lines)  # read before the transaction: it may be retried
        return self._retried(lambda db: self._add_lines(db, batch, vectors_by))  # type: ignore[return-value]

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
                    db.execute(
                        "UPDATE threads SET ended_at = NULL WHERE id = %s AND ended_at IS NOT NULL",
                        (ref.id,),
                    )
                next_seq[ref.id] = db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM lines WHERE thread_id = %s", (ref.id,)
                ).fetchone()[0]
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

    def stored_source_keys(self, keys: Iterable[SourceKey]) -> set[SourceKey]:
        """Which of ``keys`` their threads hold: asked before embedding."""
        by_thread: dict[ThreadKey, list[str]] = {}
        for key in keys:
            by_thread.setdefault(key.thread, []).append(key.key)
        held: set[SourceKey] = set()
        for thread, wanted in by_thread.items():
            thread_id = self.thread_id(thread)
            if thread_id is None:
                continue
            rows = self._query(
                "SELECT source_key FROM lines WHERE thread_id = %s AND source_key = ANY(%s)",
                (thread_id, wanted),
            )
            held.update(SourceKey(thread, row[0]) for row in rows)
        return held

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
        _check_embedder(db, *vectors_by)
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
                ids.append(cursor.fetchone()[0])
                if not cursor.nextset():
                    break
        return [replace(line, id=line_id) for line, line_id in zip(lines, ids, strict=True)]

    def lines(self, line_ids: Sequence[int]) -> list[Line]:
        if not line_ids:
            return []
        ids = [int(line_id) for line_id in line_ids]
        rows = self._query(f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE l.id = ANY(%s)", (ids,))
        by_id = {row[0]: _line(row) for row in rows}
        return [by_id[line_id] for line_id in line_ids if line_id in by_id]

    def lines_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[Line]]:
        """The lines of each (thread id, first seq, last seq) range, in seq order, as a
        query for each would give them, in one round trip."""
        if not ranges:
            return []
        where, params = ranges_condition(ranges, "%s")
        rows = self._query(
            f"SELECT {_LINE_COLUMNS}, l.thread_id {_LINE_FROM} WHERE {where} ORDER BY l.seq",
            params,
        )
        return split_ranges(ranges, [(row[-1], _line(row)) for row in rows])

    def lines_after(self, thread_id: int, after_seq: int, limit: int) -> list[Line]:
        """Up to ``limit`` lines of a thread after ``after_seq``, in order."""
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} "
            "WHERE l.thread_id = %s AND l.seq > %s ORDER BY l.seq LIMIT %s",
            (thread_id, after_seq, limit),
        )
        return [_line(row) for row in rows]

    def last_lines(self, thread_id: int, count: int) -> list[Line]:
        """The newest ``count`` lines of a thread, oldest first."""
        if count <= 0:
            return []
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE l.thread_id = %s "
            "ORDER BY l.seq DESC LIMIT %s",
            (thread_id, count),
        )
        return [_line(row) for row in reversed(rows)]

    def history(self, person: str, bot: str | None, thread: str | None) -> list[Line]:
        where, params = _owner_filter(person, bot, thread)
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE {where} ORDER BY l.thread_id, l.seq", params
        )
        return [_line(row) for row in rows]

    def count_lines(self) -> int:
        return self._query("SELECT COUNT(*) FROM lines")[0][0]

    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_id: int | None = None,
        thread_id: int | None = None,
        roles: Sequence[str] = ("human", "bot"),
        limit: int = 100,
        max_postings: int | None = None,
        among: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """(line id, score) of lines holding any of ``terms`` (words), best first, by BM25
        (``postgres_lexical.py``); terms are passed as values, never as query syntax. With
        ``max_postings``, only the rarest terms holding at most that many lines together are
        asked (as the SQLite store does; the counts are the store's); with ``among``, only
        those lines are scored (the IDF and mean length are still the store's)."""
        if not terms or (among is not None and not len(among)):
            return []
        query, params = bm25_query(terms, bot_id, person_id, thread_id, roles, limit,
                                   max_postings, among)  # fmt: skip
        return [(row[0], float(row[1])) for row in self._query(query, params)]

    # -- forgetting -----------------------------------------------------------------------

    def forget(self, person: str, bot: str | None, thread: str | None) -> dict[str, int]:
        """Remove a person's threads (or one), with lines, vectors, lexical rows, buffers and
        the summaries made from them."""
        where, params = _owner_filter(person, bot, thread)
        with self._write() as db:
            thread_ids = [
                row[0]
                for row in db.execute(
                    "SELECT t.id FROM threads t JOIN bots b ON b.id = t.bot_id "
                    f"JOIN people p ON p.id = t.person_id WHERE {where}",
                    params,
                )
            ]
            lines = summaries = 0
            if thread_ids:
                (lines,) = db.execute(
                    "SELECT COUNT(*) FROM lines WHERE thread_id = ANY(%s)", (thread_ids,)
                ).fetchone()
                (summaries,) = db.execute(
                    "SELECT COUNT(*) FROM memories WHERE thread_id = ANY(%s)", (thread_ids,)
                ).fetchone()
                db.execute("DELETE FROM threads WHERE id = ANY(%s)", (thread_ids,))
                db.execute(
                    "DELETE FROM people WHERE name = %s AND NOT EXISTS "
                    "(SELECT 1 FROM threads t WHERE t.person_id = people.id)",
                    (person,),
                )
                self._bump_generation(db)
            if thread is None:
                self._forget_sms(db, person, bot)
        return {"threads": len(thread_ids), "lines": lines, "summaries": summaries}


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment else None


def _configure(connection: Connection) -> None:
    """Each pooled connection sends and reads ``vector`` values as numpy arrays, in binary."""
    from pgvector.psycopg import register_vector

    register_vector(connection)


def _holds_line(db: Connection, line_id: int) -> bool:
    """Whether the line is there, held until commit against a delete (``FOR KEY SHARE``)."""
    row = db.execute("SELECT 1 FROM lines WHERE id = %s FOR KEY SHARE", (line_id,)).fetchone()
    return row is not None

"""The embedded default store: one SQLite file in WAL mode.

A line, its vector and its lexical row are written in one transaction. ``seq`` is taken inside
a ``BEGIN IMMEDIATE`` transaction, which SQLite serialises across processes, so it has no gaps
or repeats even with several writers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from membot.errors import StoreError, StoreFullError
from membot.model import Line, Role, ThreadInfo, utc_now
from membot.store.base import (
    BufferEntry,
    NewLine,
    SourceKey,
    ThreadKey,
    VectorRows,
    VectorSnapshot,
    bot_taken,
    check_embedder_meta,
    number_owner,
    number_taken,
    ranges_condition,
    split_ranges,
)
from membot.store.extras import StoreExtras, _moment
from membot.store.keys import StoreKeys
from membot.store.migrations import ALL_BOTS_MOVED, LAST_LINE_ID, bot_moved, migrate
from membot.store.sms import StoreSms
from membot.store.sqlite_driver import sqlite3
from membot.store.sqlite_lock import ProcessWriteLock, TurnLocks
from membot.store.sqlite_near import SqliteNearLines
from membot.store.sqlite_vectors import SqliteVectors

log = logging.getLogger(__name__)

_LINE_COLUMNS = """
    l.id, b.name, p.name, t.name, l.seq, l.role, l.text, l.created_at, l.tokens, l.speaker, l.ref
"""
_LINE_FROM = """
    FROM lines l JOIN threads t ON t.id = l.thread_id
    JOIN bots b ON b.id = l.bot_id JOIN people p ON p.id = l.person_id
"""


def _line(row: Sequence) -> Line:
    return Line(
        id=row[0],
        bot=row[1],
        person=row[2],
        thread=row[3],
        seq=row[4],
        role=Role(row[5]),
        text=row[6],
        created_at=datetime.fromisoformat(row[7]).astimezone(UTC),
        tokens=row[8],
        speaker=row[9],
        ref=row[10],
    )


# How long a write waits for another connection's write lock before it gives up.
BUSY_TIMEOUT_SECONDS = 10
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024


@contextmanager
def _store_errors(path: Path) -> Iterator[None]:
    """SQLite failures become a StoreError that says what to do."""
    try:
        yield
    except sqlite3.Error as error:
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise StoreFullError(
                f"the store at {path} is full (its disk, or its size limit): nothing of this "
                "change was stored, what was stored before is intact; free some space"
            ) from error
        if "locked" in str(error) or "busy" in str(error):
            hint = f"another process held it for over {BUSY_TIMEOUT_SECONDS} s; try again"
        else:
            hint = str(error)
        raise StoreError(f"the store at {path} failed: {hint}") from error


def _line_id_marks(db: sqlite3.Connection) -> tuple[int, int]:
    """(the highest line id held, the highest recorded as given out before lines were
    removed); 0 for none."""
    ((top, recorded),) = db.execute(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM lines), (SELECT value FROM meta WHERE key = ?)",
        (LAST_LINE_ID,),
    ).fetchall()
    return int(top), int(recorded or 0)


def _check_embedder(db: sqlite3.Connection, name: str, dimension: int | None) -> None:
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dimension')"))
    check_embedder_meta(meta, name, dimension)


def _owner_filter(person: str, bot: str | None, thread: str | None) -> tuple[str, list[str]]:
    """SQL condition on the aliases p (people), b (bots), t (threads) for a person's lines."""
    conditions, params = ["p.name = ?"], [person]
    for column, value in (("b.name", bot), ("t.name", thread)):
        if value:
            conditions.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(conditions), params


@dataclass(frozen=True)
class ThreadRef:
    id: int
    bot_id: int
    person_id: int
    key: ThreadKey


class SqliteStore(StoreExtras, StoreKeys, StoreSms, SqliteVectors, SqliteNearLines):
    """Bots, people, threads, lines, vectors and relevance buffers in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        # Absolute: a child process (membot.ann_build) or a later chdir must find it again.
        self.path = Path(path).absolute()
        self.location = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot open the store at {self.path}: {error}") from error
        self._lock = threading.RLock()
        self._writers = ProcessWriteLock(self.path)
        self._turns = TurnLocks(self.path)
        try:
            # busy_timeout first: another process may hold the lock while it creates the store.
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECONDS * 1000}")
            self._refuse_a_stranger()  # before anything is written into it
            self._into_wal()
            self._db.execute("PRAGMA foreign_keys = ON")
            # FULL: a line the caller was told is stored survives a power cut (about 0.25 ms
            # per commit here); forgotten text is overwritten, not left in free pages.
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA secure_delete = ON")
            # A log left full by a checkpoint a reader held back (after a rewrite it is as
            # large as the store) is cut to this at the next checkpoint that can reset it.
            self._db.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
            migrate(self._db)
            # Each word's line count, read where a large scope's search picks its rarest
            # words (_rarest_terms); a view over the index, kept with this connection.
            self._db.execute(
                "CREATE VIRTUAL TABLE temp.line_vocabulary USING fts5vocab(main, line_text, 'row')"
            )
        except StoreError:
            self._db.close()
            raise
        except sqlite3.DatabaseError as error:
            self._db.close()
            if "readonly" in str(error):  # SQLite's words: "attempt to write a readonly database"
                raise StoreError(
                    f"cannot write to the store at {self.path}: the file or its folder is "
                    "read-only (membot writes beside it even to read: its log and locks)"
                ) from error
            raise StoreError(f"{self.path} is not a membot store: {error}") from error

    def _into_wal(self) -> None:
        """The log in WAL mode. Switching needs the file to itself, and SQLite says "database
        is locked" at once, without the busy timeout, while another process opening the
        store holds it for a moment (it reads the schema first): tried again meanwhile."""
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _refuse_a_stranger(self) -> None:
        """``StoreError`` when the file is another program's SQLite database: membot made
        its tables in there (and turned its log to WAL) as if it were a new store. A membot
        store has its ``meta`` table from its first migration on (made with the others, in
        one transaction); another program may set ``user_version`` too."""
        tables = [
            row[0]
            for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        if tables and "meta" not in tables:
            shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
            raise StoreError(
                f"{self.path} is a SQLite database but not a membot store (it holds {shown}): "
                "membot leaves it as it is; name a new file or a membot store"
            )

    def close(self) -> None:
        self._db.close()
        self._writers.close()

    def check_reachable(self, timeout: float) -> str | None:
        """``StoreError`` unless the file can be read (``timeout``: for PostgreSQL's sake);
        the store's embedder."""
        rows = self._query("SELECT value FROM meta WHERE key = 'embedder'")
        return rows[0][0] if rows else None

    def turn_lock(self, *keys: ThreadKey) -> AbstractContextManager[None]:
        """Held for a whole turn of the thread (see :class:`TurnLocks`)."""
        return self._turns.held(*((key.bot, key.person, key.thread) for key in keys))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._writers.held(BUSY_TIMEOUT_SECONDS), _store_errors(self.path):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._lock, _store_errors(self.path):
            return self._db.execute(sql, params).fetchall()

    # -- metadata -------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as db:
            self._set_meta(db, values)

    @staticmethod
    def _set_meta(db: sqlite3.Connection, values: dict[str, str]) -> None:
        db.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            list(values.items()),
        )

    def generation(self) -> int:
        """Bumped whenever lines or vectors are removed or replaced (not on plain appends)."""
        return int(self.get_meta("generation") or 0)

    def bot_generation(self, bot_id: int) -> int:
        """The store's generation when lines or vectors of ``bot_id`` were last removed or
        replaced (by a forget or delete in that bot, or by a change to every bot: a reindex,
        a restore): what an index of that bot's lines alone must be rebuilt after, where
        :meth:`generation` moves with every bot's."""
        rows = self._query(
            "SELECT value FROM meta WHERE key IN (?, ?)", (ALL_BOTS_MOVED, bot_moved(bot_id))
        )
        return max((int(value) for (value,) in rows), default=0)

    def _bump_generation(
        self, db: sqlite3.Connection, bot_ids: Iterable[int] | None = None
    ) -> None:
        """Move the generation, and stamp it on ``bot_ids`` (None: every bot)."""
        current = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        moved = str(int(current[0] if current else 0) + 1)
        stamps = [ALL_BOTS_MOVED] if bot_ids is None else [bot_moved(b) for b in bot_ids]
        self._set_meta(db, {"generation": moved} | dict.fromkeys(stamps, moved))

    # -- bots, people, threads ------------------------------------------------------------

    def bot_settings(self, bot: str) -> dict | None:
        rows = self._query("SELECT settings FROM bots WHERE name = ?", (bot,))
        return json.loads(rows[0][0]) if rows else None

    def save_bot(self, bot: str, settings: dict, *, new: bool = False) -> None:
        with self._write() as db:
            # One writer at a time (BEGIN IMMEDIATE): no other creation comes between.
            if new and db.execute("SELECT 1 FROM bots WHERE name = ?", (bot,)).fetchone():
                raise bot_taken(bot)
            if number := settings.get("sms_number"):
                # In the write that saves it: two bots given one number at once both passed
                # a check made before it.
                rows = db.execute(
                    "SELECT name, settings FROM bots WHERE name != ? AND instr(settings, ?) > 0",
                    (bot, number),
                ).fetchall()
                if owner := number_owner(rows, number):
                    raise number_taken(owner, number)
            bot_id = self._ensure_named(db, "bots", bot)
            db.execute("UPDATE bots SET settings = ? WHERE id = ?", (json.dumps(settings), bot_id))

    def bots(self) -> list[str]:
        return [row[0] for row in self._query("SELECT name FROM bots ORDER BY name")]

    @staticmethod
    def _ensure_named(db: sqlite3.Connection, table: str, name: str) -> int:
        row = db.execute(f"SELECT id FROM {table} WHERE name = ?", (name,)).fetchone()
        if row:
            return row[0]
        created = utc_now().isoformat()
        return db.execute(
            f"INSERT INTO {table} (name, created_at) VALUES (?, ?)", (name, created)
        ).lastrowid

    def _ensure_thread(self, db: sqlite3.Connection, key: ThreadKey) -> ThreadRef:
        bot_id = self._ensure_named(db, "bots", key.bot)
        person_id = self._ensure_named(db, "people", key.person)
        row = db.execute(
            "SELECT id FROM threads WHERE bot_id = ? AND person_id = ? AND name = ?",
            (bot_id, person_id, key.thread),
        ).fetchone()
        if row:
            return ThreadRef(row[0], bot_id, person_id, key)
        thread_id = db.execute(
            "INSERT INTO threads (bot_id, person_id, name, created_at) VALUES (?, ?, ?, ?)",
            (bot_id, person_id, key.thread, utc_now().isoformat()),
        ).lastrowid
        return ThreadRef(thread_id, bot_id, person_id, key)

    def thread_id(self, key: ThreadKey) -> int | None:
        rows = self._query(
            "SELECT t.id FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id "
            "WHERE b.name = ? AND p.name = ? AND t.name = ?",
            (key.bot, key.person, key.thread),
        )
        return rows[0][0] if rows else None

    def person_id(self, person: str) -> int | None:
        rows = self._query("SELECT id FROM people WHERE name = ?", (person,))
        return rows[0][0] if rows else None

    def bot_id(self, bot: str) -> int | None:
        rows = self._query("SELECT id FROM bots WHERE name = ?", (bot,))
        return rows[0][0] if rows else None

    def threads(self, bot: str | None, person: str) -> list[ThreadInfo]:
        """A person's threads (with one bot, or all), oldest first."""
        sql = (
            "SELECT b.name, p.name, t.name, COUNT(l.id), t.created_at, MAX(l.created_at), "
            "t.ended_at FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id LEFT JOIN lines l ON l.thread_id = t.id "
            "WHERE p.name = ?" + (" AND b.name = ?" if bot else "") + " GROUP BY t.id ORDER BY t.id"
        )
        rows = self._query(sql, (person, bot) if bot else (person,))
        return [
            ThreadInfo(*row[:4], _moment(row[4]), _moment(row[5]), _moment(row[6])) for row in rows
        ]

    def people(self, bot: str) -> list[str]:
        """The people with a thread with ``bot``, by name."""
        rows = self._query(
            "SELECT DISTINCT p.name FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id WHERE b.name = ? ORDER BY p.name",
            (bot,),
        )
        return [row[0] for row in rows]

    def delete_bot(self, bot: str) -> dict[str, int]:
        """Remove a bot with everything it holds: profile, threads, lines, vectors, lexical
        rows, buffers, summaries and documents. People left with nothing are removed too."""
        with self._write() as db:
            row = db.execute("SELECT id FROM bots WHERE name = ?", (bot,)).fetchone()
            if row is None:
                return {"threads": 0, "lines": 0, "summaries": 0, "documents": 0}
            counts = {
                name: db.execute(f"SELECT COUNT(*) FROM {sql} = ?", (row[0],)).fetchone()[0]
                for name, sql in (
                    ("threads", "threads WHERE bot_id"),
                    ("lines", "lines l JOIN threads t ON t.id = l.thread_id WHERE t.bot_id"),
                    ("summaries", "memories WHERE bot_id"),
                    ("documents", "documents WHERE bot_id"),
                )
            }
            self._retire_line_ids(db)
            db.execute("DELETE FROM bots WHERE id = ?", (row[0],))  # cascades to the rest
            self._forget_sms(db, None, bot)
            db.execute(
                "DELETE FROM people WHERE NOT EXISTS "
                "(SELECT 1 FROM threads t WHERE t.person_id = people.id)"
            )
            # Its keys go with it, in this transaction: a key checked after the deletion
            # committed would otherwise speak through a bot that is gone.
            db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE bot = ? AND revoked_at IS NULL",
                (utc_now().isoformat(), bot),
            )
            self._bump_generation(db, [row[0]])
            _mark_rewrite(db)
        return counts

    # -- lines ----------------------------------------------------------------------------

    def check_embedder(self, name: str, dimension: int | None = None) -> None:
        """Refuse vectors of another model or dimension than the store's."""
        with self._lock, _store_errors(self.path):
            _check_embedder(self._db, name, dimension)

    def add_lines(
        self, lines: Iterable[NewLine], vectors_by: tuple[str, int] | None = None
    ) -> list[Line]:
        """Store lines with their vectors and lexical rows, all in one transaction; a line
        whose ``source_key`` its thread holds already is skipped (it is not in the result).

        ``vectors_by`` (model name, dimension) is checked against the store's and recorded
        on the first write, inside the same transaction, so two writers with different
        embedders cannot both get in."""
        stored: list[Line] = []
        with self._write() as db:
            self._check_and_record_embedder(db, vectors_by)
            refs: dict[ThreadKey, ThreadRef] = {}
            resumed: set[int] = set()
            next_id = self._next_line_id(db)
            for new in lines:
                if new.answers is not None and not _exists(db, new.answers):
                    continue  # what it answers was forgotten: the reply goes with it
                ref = refs.get(new.key)
                if ref is None:
                    ref = refs[new.key] = self._ensure_thread(db, new.key)
                if new.source_key is not None and self._holds_key(db, ref.id, new.source_key):
                    continue
                if ref.id not in resumed and new.answers is None:  # a reply takes up nothing
                    resumed.add(ref.id)
                    # A line in an ended thread takes the conversation up again.
                    db.execute(
                        "UPDATE threads SET ended_at = NULL WHERE id = ? AND ended_at IS NOT NULL",
                        (ref.id,),
                    )
                stored.append(self._insert_line(db, ref, new, next_id))
                next_id = None  # from here on SQLite's own next id follows it
        return stored

    def last_line_id(self) -> int:
        """The highest line id this store has given out, removed lines' included."""
        with self._lock, _store_errors(self.path):
            return max(_line_id_marks(self._db))

    def _retire_line_ids(self, db: sqlite3.Connection) -> None:
        """Before lines are removed: record the highest line id given out, so that no later
        line gets the id of a removed one (a saved id, a citation, an approximate index's
        key must never name another line)."""
        top, recorded = _line_id_marks(db)
        if top > recorded:
            self._set_meta(db, {LAST_LINE_ID: str(top)})

    @staticmethod
    def _next_line_id(db: sqlite3.Connection) -> int | None:
        """The id the next line must take when the newest lines were removed (SQLite would
        give one of theirs again); None when SQLite's own choice is new."""
        top, recorded = _line_id_marks(db)
        return recorded + 1 if top < recorded else None

    @staticmethod
    def _holds_key(db: sqlite3.Connection, thread_id: int, source_key: str) -> bool:
        sql = "SELECT 1 FROM lines WHERE thread_id = ? AND source_key = ?"
        return db.execute(sql, (thread_id, source_key)).fetchone() is not None

    def stored_source_keys(self, keys: Iterable[SourceKey]) -> set[SourceKey]:
        """Which of ``keys`` their threads hold: asked before embedding, so lines stored by
        an earlier run of an import are neither embedded nor stored again."""
        by_thread: dict[ThreadKey, list[str]] = {}
        for key in keys:
            by_thread.setdefault(key.thread, []).append(key.key)
        held: set[SourceKey] = set()
        for thread, wanted in by_thread.items():
            thread_id = self.thread_id(thread)
            if thread_id is None:
                continue
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = self._query(
                    "SELECT source_key FROM lines WHERE thread_id = ? "
                    f"AND source_key IN ({','.join('?' * len(chunk))})",
                    [thread_id, *chunk],
                )
                held.update(SourceKey(thread, row[0]) for row in rows)
        return held

    def _check_and_record_embedder(
        self, db: sqlite3.Connection, vectors_by: tuple[str, int] | None
    ) -> None:
        """Refuse another embedder's vectors; record the embedder on the store's first write."""
        if vectors_by is None:
            return
        _check_embedder(db, *vectors_by)
        if db.execute("SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None:
            self._set_meta(db, {"embedder": vectors_by[0], "dimension": str(vectors_by[1])})

    def _insert_line(
        self, db: sqlite3.Connection, ref: ThreadRef, new: NewLine, line_id: int | None = None
    ) -> Line:
        seq = db.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM lines WHERE thread_id = ?", (ref.id,)
        ).fetchone()[0]
        created = (new.created_at or utc_now()).astimezone(UTC)
        line_id = db.execute(
            "INSERT INTO lines (id, thread_id, bot_id, person_id, seq, role, speaker, text, "
            "created_at, tokens, ref, source_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                line_id,  # None: SQLite's next id
                ref.id,
                ref.bot_id,
                ref.person_id,
                seq,
                str(new.role),
                new.speaker,
                new.text,
                created.isoformat(),
                new.tokens,
                new.ref,
                new.source_key,
            ),
        ).lastrowid
        vector = np.ascontiguousarray(new.vector, dtype=np.float32)
        db.execute(
            "INSERT INTO line_vectors (line_id, vector) VALUES (?, ?)", (line_id, vector.tobytes())
        )
        db.execute("INSERT INTO line_text (rowid, text) VALUES (?, ?)", (line_id, new.text))
        return Line(
            line_id, ref.key.bot, ref.key.person, ref.key.thread, seq, new.role, new.text,
            created, new.tokens, new.speaker, new.ref,
        )  # fmt: skip

    def lines(self, line_ids: Sequence[int]) -> list[Line]:
        if not line_ids:
            return []
        marks = ",".join("?" * len(line_ids))
        rows = self._query(f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE l.id IN ({marks})", line_ids)
        by_id = {row[0]: _line(row) for row in rows}
        return [by_id[line_id] for line_id in line_ids if line_id in by_id]

    def lines_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[Line]]:
        """The lines of each (thread id, first seq, last seq) range, in seq order, as a
        query for each would give them, in one query."""
        if not ranges:
            return []
        where, params = ranges_condition(ranges, "?")
        rows = self._query(
            f"SELECT {_LINE_COLUMNS}, l.thread_id {_LINE_FROM} WHERE {where} ORDER BY l.seq",
            params,
        )
        return split_ranges(ranges, [(row[-1], _line(row)) for row in rows])

    def lines_after(self, thread_id: int, after_seq: int, limit: int) -> list[Line]:
        """Up to ``limit`` lines of a thread after ``after_seq``, in order."""
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} "
            "WHERE l.thread_id = ? AND l.seq > ? ORDER BY l.seq LIMIT ?",
            (thread_id, after_seq, limit),
        )
        return [_line(row) for row in rows]

    def last_lines(self, thread_id: int, count: int) -> list[Line]:
        """The newest ``count`` lines of a thread, oldest first."""
        if count <= 0:
            return []
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE l.thread_id = ? "
            "ORDER BY l.seq DESC LIMIT ?",
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
        """(line id, score) of lines holding any of ``terms`` (words), best first; the score
        is FTS5's BM25 negated, so higher is better. Each term is quoted, so no text can be
        read as FTS5 syntax. With ``among``, only those lines are returned (their scores are
        the same: FTS5's statistics are the store's).

        FTS5 scores every line that holds a term: a common word in a store of a million
        lines costs it seconds (docs/performance.md). With ``max_postings``, only the
        rarest terms are asked, as many as hold at most that many lines between them (the
        store's counts; none if even the rarest holds more): the common ones weigh least in
        BM25 (their IDF is the lowest) and cost most."""
        if among is not None and not len(among):
            return []
        if max_postings is not None:
            terms = self._rarest_terms(terms, max_postings)
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        sql = (
            "SELECT l.id, -bm25(line_text) AS score FROM line_text "
            "JOIN lines l ON l.id = line_text.rowid WHERE line_text MATCH ? AND l.bot_id = ?"
        )
        params: list = [match, bot_id]
        for column, value in (("person_id", person_id), ("thread_id", thread_id)):
            if value is not None:
                sql += f" AND l.{column} = ?"
                params.append(value)
        if among is not None:
            sql += " AND l.id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(line_id) for line_id in among]))
        sql += f" AND l.role IN ({','.join('?' * len(roles))}) ORDER BY score DESC, l.id LIMIT ?"
        try:
            return self._query(sql, [*params, *roles, limit])
        except sqlite3.OperationalError as error:
            raise StoreError(f"lexical search failed for {match!r}: {error}") from error

    def _rarest_terms(self, terms: Sequence[str], max_postings: int) -> list[str]:
        """The rarest of ``terms`` holding at most ``max_postings`` lines between them, by
        the counts in FTS5's vocabulary (a lookup per term, not a scan)."""
        wanted = sorted(set(terms))
        if not wanted:
            return []
        with self._lock, _store_errors(self.path):
            counts = self._db.execute(
                "SELECT term, doc FROM temp.line_vocabulary "
                f"WHERE term IN ({','.join('?' * len(wanted))})",
                wanted,
            ).fetchall()
        chosen, spent = [], 0
        for term, count in sorted(counts, key=lambda row: (row[1], row[0])):
            if spent + count > max_postings:
                break
            chosen.append(term)
            spent += count
        return chosen

    # -- vector snapshots (the rest of the vectors: sqlite_vectors.py) ---------------------

    def _snapshot(
        self, sql: str, owners: tuple, known_generation: int | None, after: int
    ) -> VectorSnapshot:
        generation, rows, cursor = self._snapshot_rows(sql, owners, known_generation, after)
        return VectorSnapshot(generation, VectorRows.from_rows(rows), cursor)

    def _snapshot_rows(
        self, sql: str, owners: tuple, known_generation: int | None, after: int
    ) -> tuple[int, list[tuple], int]:
        """The generation, the rows of ``sql`` (ids first, in id order) past ``after`` (all
        of them when the generation moved) and the next cursor, read in one transaction."""
        with self._lock, _store_errors(self.path):
            self._db.execute("BEGIN")
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                generation = int(row[0]) if row else 0
                start = after if generation == known_generation else 0
                rows = self._db.execute(sql, (*owners, start)).fetchall()
            finally:
                self._db.execute("COMMIT")
        return generation, rows, rows[-1][0] if rows else start

    # -- relevance buffers ----------------------------------------------------------------

    def buffer(self, thread_id: int) -> list[BufferEntry]:
        with self._lock, _store_errors(self.path):
            return self._read_buffer(self._db, thread_id)

    @staticmethod
    def _read_buffer(db: sqlite3.Connection, thread_id: int) -> list[BufferEntry]:
        rows = db.execute(
            "SELECT source_thread_id, first_seq, last_seq, score, matched_seqs "
            "FROM buffer_entries WHERE thread_id = ? ORDER BY position",
            (thread_id,),
        ).fetchall()
        return [BufferEntry(r[0], r[1], r[2], r[3], tuple(json.loads(r[4]))) for r in rows]

    def change_buffer(
        self, thread_id: int, change: Callable[[list[BufferEntry]], list[BufferEntry]]
    ) -> list[BufferEntry]:
        """Read, change and write a thread's buffer in one transaction: two front ends on one
        thread cannot lose each other's blocks."""
        with self._write() as db:
            held = self._read_buffer(db, thread_id)
            entries = change(held)
            # A block recalled from a thread forgotten since (another person's, on a bot
            # that shares memory) is left out: the thread is gone, and the turn goes on.
            sources = sorted({entry.source_thread_id for entry in entries})
            marks = ", ".join("?" * len(sources))
            found = db.execute(f"SELECT id FROM threads WHERE id IN ({marks})", sources)
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
        db: sqlite3.Connection, thread_id: int, entries: Sequence[BufferEntry]
    ) -> None:
        db.execute("DELETE FROM buffer_entries WHERE thread_id = ?", (thread_id,))
        db.executemany(
            "INSERT INTO buffer_entries (thread_id, position, source_thread_id, first_seq, "
            "last_seq, score, matched_seqs) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (thread_id, position, e.source_thread_id, e.first_seq, e.last_seq, e.score,
                 json.dumps(list(e.matched_seqs)))
                for position, e in enumerate(entries)
            ],
        )  # fmt: skip

    # -- forgetting -----------------------------------------------------------------------

    def forget(self, person: str, bot: str | None, thread: str | None) -> dict[str, int]:
        """Remove a person's threads (or one), with lines, vectors, lexical rows, buffers and
        the summaries made from them."""
        where, params = _owner_filter(person, bot, thread)
        sql = (
            "SELECT t.id, t.bot_id FROM threads t JOIN bots b ON b.id = t.bot_id "
            f"JOIN people p ON p.id = t.person_id WHERE {where}"
        )
        with self._write() as db:
            changes = db.total_changes
            found = db.execute(sql, params).fetchall()
            thread_ids = [thread_id for thread_id, _ in found]
            bot_ids = {bot_id for _, bot_id in found}
            marks = ",".join("?" * len(thread_ids))
            lines = summaries = 0
            if thread_ids:
                lines = db.execute(
                    f"SELECT COUNT(*) FROM lines WHERE thread_id IN ({marks})", thread_ids
                ).fetchone()[0]
                summaries = db.execute(
                    f"SELECT COUNT(*) FROM memories WHERE thread_id IN ({marks})", thread_ids
                ).fetchone()[0]
                self._retire_line_ids(db)
                db.execute(f"DELETE FROM threads WHERE id IN ({marks})", thread_ids)
                # A person with nothing left is forgotten too, name included.
                db.execute(
                    "DELETE FROM people WHERE name = ? AND NOT EXISTS "
                    "(SELECT 1 FROM threads t WHERE t.person_id = people.id)",
                    (person,),
                )
                self._bump_generation(db, bot_ids)
            if thread is None:
                self._forget_sms(db, person, bot)
            if db.total_changes != changes:  # something went: its old bytes must go too
                _mark_rewrite(db)
        return {"threads": len(thread_ids), "lines": lines, "summaries": summaries}

    def finish_removal(self) -> None:
        """Rewrite the file if a removal asked for it, then empty the log.

        ``secure_delete`` zeroes a row where it is deleted, but a page split earlier copied
        rows to another page and left their old bytes in the unused space of the page they
        left, where no delete reaches them: a probe found forgotten lines there after an
        import ran beside other writes. So a forget or a bot's deletion marks the store (in
        its own transaction) and this rewrites it (VACUUM), on a connection of its own:
        this process's reads go on, writes wait for it, here and in other processes. A
        rewrite that fails leaves the mark, and the next removal's rewrite takes it up.
        Then the log is emptied: its older frames hold pages as they were before."""
        if self._query("SELECT 1 FROM meta WHERE key = ?", (REWRITE_PENDING,)):
            with self._writers.held(BUSY_TIMEOUT_SECONDS):
                rewriter = sqlite3.connect(self.path, isolation_level=None)
                try:
                    rewriter.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECONDS * 1000}")
                    rewriter.execute("VACUUM")
                    rewriter.execute("DELETE FROM meta WHERE key = ?", (REWRITE_PENDING,))
                except sqlite3.Error as error:
                    raise StoreError(
                        f"rewriting the store at {self.path} failed ({error}): what was removed "
                        "is gone from its tables, but old copies may stay in the file until "
                        "a later forget rewrites it (it needs free disk as large as the store)"
                    ) from error
                finally:
                    rewriter.close()
        with self._lock, self._writers.held(BUSY_TIMEOUT_SECONDS), _store_errors(self.path):
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.warning("%s: a reader held the write-ahead log; it is emptied later", self.path)


# The meta key a removal sets, in its transaction, for finish_removal's rewrite.
REWRITE_PENDING = "rewrite_pending"


def _mark_rewrite(db: sqlite3.Connection) -> None:
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (REWRITE_PENDING,))


def _exists(db: sqlite3.Connection, line_id: int) -> bool:
    return db.execute("SELECT 1 FROM lines WHERE id = ?", (line_id,)).fetchone() is not None

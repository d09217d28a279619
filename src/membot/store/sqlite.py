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
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np

from membot.errors import StoreError, StoreFullError
from membot.model import Line, utc_now
from membot.store.base import (
    BufferEntry,
    NewLine,
    PartVectors,
    ThreadKey,
    VectorRows,
    VectorSnapshot,
)
from membot.store.dialect import SQLITE, Row
from membot.store.migrations import ALL_BOTS_MOVED, LAST_LINE_ID, bot_moved, migrate
from membot.store.sql_store import NEW_LINE_COLUMNS, LexicalQuery, SqlStore, ThreadRef, line_values
from membot.store.sqlite_driver import sqlite3
from membot.store.sqlite_lock import ProcessWriteLock, TurnLocks
from membot.store.sqlite_near import SqliteNearLines
from membot.store.sqlite_vectors import SqliteVectors

log = logging.getLogger(__name__)

# How long a write waits for another connection's write lock before it gives up.
BUSY_TIMEOUT_SECONDS = 10
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
PAGE_SIZE = 8192


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


class SqliteStore(SqliteVectors, SqliteNearLines, SqlStore):
    """Bots, people, threads, lines, vectors and relevance buffers in one SQLite file."""

    dialect = SQLITE

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
            # For a new file (an existing one keeps its own): a 384-float vector's row (1,545
            # bytes) fits twice in a 4 KB page, which left 1 KB of each page unused, 2,053
            # bytes a vector; five fit in 8 KB, 1,641 bytes a vector.
            self._db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
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

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock, _store_errors(self.path):
            yield self._db

    # -- metadata -------------------------------------------------------------------------

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

    # -- lines ----------------------------------------------------------------------------

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
                    self._resume_thread(db, ref.id)
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

    def _check_and_record_embedder(
        self, db: sqlite3.Connection, vectors_by: tuple[str, int] | None
    ) -> None:
        """Refuse another embedder's vectors; record the embedder on the store's first write."""
        if vectors_by is None:
            return
        self._check_embedder(db, *vectors_by)
        if db.execute("SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None:
            self._set_meta(db, {"embedder": vectors_by[0], "dimension": str(vectors_by[1])})

    def _insert_line(
        self, db: sqlite3.Connection, ref: ThreadRef, new: NewLine, line_id: int | None = None
    ) -> Line:
        seq = self._next_seq(db, ref.id)
        created = (new.created_at or utc_now()).astimezone(UTC)
        line_id = db.execute(
            f"INSERT INTO lines (id, {NEW_LINE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (line_id, *line_values(ref, new, seq, created.isoformat())),  # None: SQLite's next id
        ).lastrowid
        vector = np.ascontiguousarray(new.vector, dtype=np.float32)
        db.execute(
            "INSERT INTO line_vectors (line_id, vector) VALUES (?, ?)", (line_id, vector.tobytes())
        )
        db.execute("INSERT INTO line_text (rowid, text) VALUES (?, ?)", (line_id, new.text))
        if new.parts is not None:
            db.execute(
                "INSERT INTO line_parts (line_id, bounds, vectors) VALUES (?, ?, ?)",
                (line_id, *new.parts.to_bytes()),
            )
        return Line(
            line_id, ref.key.bot, ref.key.person, ref.key.thread, seq, new.role, new.text,
            created, new.tokens, new.speaker, new.ref,
        )  # fmt: skip

    def _lexical_rows(self, query: LexicalQuery) -> list[tuple[int, float]]:
        """FTS5's BM25, negated (higher is better); each term quoted, so no text can be read
        as FTS5 syntax. With ``max_postings``, the rarest terms by FTS5's vocabulary."""
        terms = query.terms
        if query.max_postings is not None:
            terms = self._rarest_terms(terms, query.max_postings)
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        sql = (
            "SELECT l.id, -bm25(line_text) AS score FROM line_text "
            "JOIN lines l ON l.id = line_text.rowid WHERE line_text MATCH ? AND l.bot_id = ?"
        )
        params: list[Any] = [match, query.bot_id]
        if query.person_ids is not None:
            sql += f" AND l.person_id IN ({','.join('?' * len(query.person_ids))})"
            params.extend(query.person_ids)
        if query.thread_id is not None:
            sql += " AND l.thread_id = ?"
            params.append(query.thread_id)
        if query.among is not None:
            sql += " AND l.id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(line_id) for line_id in query.among]))
        roles = query.roles
        sql += f" AND l.role IN ({','.join('?' * len(roles))}) ORDER BY score DESC, l.id LIMIT ?"
        return self._query(sql, [*params, *roles, query.limit])

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
        self,
        sql: str,
        owners: tuple[int, ...],
        known_generation: int | None,
        after: int,
        parts_sql: str,
    ) -> VectorSnapshot:
        """As :meth:`_snapshot_rows`, the rows as vectors, with the parts ``parts_sql``
        reads of the same lines, in the same transaction."""
        generation, (rows, part_rows), cursor = self._snapshot_reads(
            (sql, parts_sql), owners, known_generation, after
        )
        lines = VectorRows.from_rows(rows)
        parts = PartVectors.from_rows(part_rows, int(lines.vectors.shape[1]))
        return VectorSnapshot(generation, replace(lines, parts=parts), cursor)

    def _snapshot_rows(
        self, sql: str, owners: tuple[int, ...], known_generation: int | None, after: int
    ) -> tuple[int, list[Row], int]:
        """The generation, the rows of ``sql`` (ids first, in id order) past ``after`` (all
        of them when the generation moved) and the next cursor, read in one transaction."""
        generation, (rows,), cursor = self._snapshot_reads((sql,), owners, known_generation, after)
        return generation, rows, cursor

    def _snapshot_reads(
        self,
        statements: tuple[str, ...],
        owners: tuple[int, ...],
        known_generation: int | None,
        after: int,
    ) -> tuple[int, list[list[Row]], int]:
        """The generation, the rows of each statement (the first's ids first, in id order)
        past ``after`` (all of them when the generation moved), and the next cursor (the
        first statement's last id), read in one transaction."""
        with self._lock, _store_errors(self.path):
            self._db.execute("BEGIN")
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                generation = int(row[0]) if row else 0
                start = after if generation == known_generation else 0
                found = [self._db.execute(sql, (*owners, start)).fetchall() for sql in statements]
            finally:
                self._db.execute("COMMIT")
        return generation, found, found[0][-1][0] if found[0] else start

    # -- relevance buffers ----------------------------------------------------------------

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
            existing = self._existing_threads(db, [e.source_thread_id for e in entries])
            entries = [entry for entry in entries if entry.source_thread_id in existing]
            if entries != held:
                self._write_buffer(db, thread_id, entries)
        return entries

    # -- forgetting -----------------------------------------------------------------------

    def _changes(self, db: sqlite3.Connection) -> int:
        return int(db.total_changes)

    def _removed(self, db: sqlite3.Connection, changed: bool) -> None:
        if changed:  # something went: its old bytes must go too (finish_removal)
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (REWRITE_PENDING,)
            )

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


def _exists(db: sqlite3.Connection, line_id: int) -> bool:
    return db.execute("SELECT 1 FROM lines WHERE id = ?", (line_id,)).fetchone() is not None

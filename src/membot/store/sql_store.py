"""The SQL both stores run, written once: metadata, bots, people and threads, reading lines,
relevance buffers, forgetting and deleting a bot.

:class:`SqlStore` is the base of :class:`~membot.store.sqlite.SqliteStore` and
:class:`~membot.store.postgres.PostgresStore`. Statements are written with ``?`` marks and
run through the store's :class:`~membot.store.dialect.Dialect`; each backend brings how it
reads and writes (``_reading``, ``_write``: its connection or pool, its locks and errors) and
what is its own: how seqs are taken (``add_lines``), vectors and their index, lexical search,
the schema and its migrations.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from membot.errors import StoreError
from membot.model import Line, Role, ThreadInfo, utc_now
from membot.store.base import (
    BufferEntry,
    LineParts,
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
from membot.store.dialect import Dialect, Params, Row
from membot.store.extras import StoreExtras
from membot.store.keys import StoreKeys
from membot.store.links import StoreLinks
from membot.store.sms_state import SmsState

_LINE_COLUMNS = """
    l.id, b.name, p.name, t.name, l.seq, l.role, l.text, l.created_at, l.tokens, l.speaker, l.ref
"""
_LINE_FROM = """
    FROM lines l JOIN threads t ON t.id = l.thread_id
    JOIN bots b ON b.id = l.bot_id JOIN people p ON p.id = l.person_id
"""
# Values in one IN list at the most (SQLite allows 32,766 since 3.32; this keeps it short).
_CHUNK = 500


@dataclass(frozen=True)
class LexicalQuery:
    """A lexical search, as :meth:`SqlStore.lexical_search` was asked it."""

    terms: Sequence[str]
    bot_id: int
    person_ids: Sequence[int] | None
    thread_id: int | None
    roles: Sequence[str]
    limit: int
    max_postings: int | None
    among: Sequence[int] | None


@dataclass(frozen=True)
class ThreadRef:
    """A thread's row as a writer found or made it."""

    id: int
    bot_id: int
    person_id: int
    key: ThreadKey


# (line id, vector) pairs: every line's new vector, in a re-embedding.
LineVectors = Iterable[tuple[int, np.ndarray]]

# The columns of a new line both stores write, in the order of line_values.
NEW_LINE_COLUMNS = (
    "thread_id, bot_id, person_id, seq, role, speaker, text, created_at, tokens, ref, source_key"
)


def line_values(ref: ThreadRef, new: NewLine, seq: int, created: Any) -> Row:
    """A new line's values for NEW_LINE_COLUMNS (``created`` as the store keeps times)."""
    return (ref.id, ref.bot_id, ref.person_id, seq, str(new.role), new.speaker, new.text,
            created, new.tokens, new.ref, new.source_key)  # fmt: skip


def lines_changed() -> StoreError:
    return StoreError(
        "lines changed while re-embedding: run `membot --embedder SPEC reindex` again"
    )


def owner_filter(person: str, bot: str | None, thread: str | None) -> tuple[str, list[str]]:
    """SQL condition on the aliases p (people), b (bots), t (threads) for a person's lines."""
    conditions, params = ["p.name = ?"], [person]
    for column, value in (("b.name", bot), ("t.name", thread)):
        if value:
            conditions.append(f"{column} = ?")
            params.append(value)
    return " AND ".join(conditions), params


class SqlStore(StoreExtras, StoreKeys, StoreLinks, SmsState):
    """What both stores do the same way, in the SQL both read."""

    dialect: Dialect

    # Provided by each backend.
    def _reading(self) -> AbstractContextManager[Any]:
        """A connection to read from, its driver's errors raised as ``StoreError``."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:
        """A connection in a write transaction, committed when the block ends."""
        raise NotImplementedError

    def _bump_generation(self, db: Any, bot_ids: Iterable[int] | None = None) -> None:
        raise NotImplementedError

    def _retire_line_ids(self, db: Any) -> None:
        """Before lines are removed (SQLite would give their ids again)."""

    def _changes(self, db: Any) -> int:
        """A count that moves with every row the connection changes (for ``_removed``)."""
        return 0

    def _removed(self, db: Any, changed: bool) -> None:
        """In a removal's transaction, after it (``changed``: whether it removed anything):
        what its old bytes need (SQLite's rewrite)."""

    def _lexical_rows(self, query: LexicalQuery) -> list[tuple[int, float]]:
        """(line id, score) rows for a search with terms, by the database's own ranking."""
        raise NotImplementedError

    def _hold_lines(self, db: Any) -> None:
        """In a re-embedding's transaction, first: no line is written until it commits
        (SQLite: its one writer)."""

    def _swap_line_vectors(self, db: Any, vectors: LineVectors, meta: dict[str, str]) -> None:
        raise NotImplementedError

    def _next_seq(self, db: Any, thread_id: int) -> int:
        """The seq the thread's next line takes (its writer holds the thread)."""
        sql = "SELECT COALESCE(MAX(seq), 0) + 1 FROM lines WHERE thread_id = ?"
        return int(self._run(db, sql, (thread_id,)).fetchone()[0])

    def _resume_thread(self, db: Any, thread_id: int) -> None:
        """A line said in an ended thread (not a reply) takes the conversation up again."""
        self._run(
            db, "UPDATE threads SET ended_at = NULL WHERE id = ? AND ended_at IS NOT NULL",
            (thread_id,),
        )  # fmt: skip

    def _lock_sms_numbers(self, db: Any) -> None:
        """Taken before a bot's SMS number is checked and saved (SQLite: its one writer)."""

    # -- running SQL ----------------------------------------------------------------------

    def _query(self, sql: str, params: Params = ()) -> list[Row]:
        with self._reading() as db:
            rows: list[Row] = self.dialect.execute(db, sql, params).fetchall()
            return rows

    def _run(self, db: Any, sql: str, params: Params = ()) -> Any:
        """Run ``sql`` (``?`` marks) on ``db``; its cursor."""
        return self.dialect.execute(db, sql, params)

    def _line(self, row: Row) -> Line:
        return Line(
            id=row[0],
            bot=row[1],
            person=row[2],
            thread=row[3],
            seq=row[4],
            role=Role(row[5]),
            text=row[6],
            created_at=self.dialect.read_time(row[7]),
            tokens=row[8],
            speaker=row[9],
            ref=row[10],
        )

    # -- metadata -------------------------------------------------------------------------

    def check_reachable(self, timeout: float) -> str | None:
        """``StoreError`` unless the store answers (within ``timeout`` seconds, where it is
        reached over a network); the store's embedder."""
        return self.get_meta("embedder")

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self._write() as db:
            self._set_meta(db, values)

    def _set_meta(self, db: Any, values: dict[str, str]) -> None:
        self.dialect.execute_many(
            db,
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            list(values.items()),
        )

    def generation(self) -> int:
        """Bumped whenever lines or vectors are removed or replaced (not on plain appends)."""
        return int(self.get_meta("generation") or 0)

    def _read_generation(self, db: Any) -> int:
        row = self._run(db, "SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def check_embedder(self, name: str, dimension: int | None = None) -> None:
        """Refuse vectors of another model or dimension than the store's."""
        with self._reading() as db:
            self._check_embedder(db, name, dimension)

    def _check_embedder(self, db: Any, name: str, dimension: int | None) -> None:
        meta = dict(
            self._run(db, "SELECT key, value FROM meta WHERE key IN ('embedder', 'dimension')")
        )
        check_embedder_meta(meta, name, dimension)

    # -- bots, people, threads ------------------------------------------------------------

    def bot_settings(self, bot: str) -> dict[str, Any] | None:
        rows = self._query("SELECT settings FROM bots WHERE name = ?", (bot,))
        return json.loads(rows[0][0]) if rows else None

    def save_bot(self, bot: str, settings: dict[str, Any], *, new: bool = False) -> None:
        with self._write() as db:
            number = settings.get("sms_number")
            if number:
                # Taken first, before any row, so every save takes its locks in one order.
                self._lock_sms_numbers(db)
            if new:  # ON CONFLICT waits for another creation of the name to commit
                made = self._run(
                    db,
                    "INSERT INTO bots (name, created_at) VALUES (?, ?) "
                    "ON CONFLICT (name) DO NOTHING RETURNING id",
                    (bot, self.dialect.moment(utc_now())),
                ).fetchone()
                if made is None:
                    raise bot_taken(bot)
            if number:
                # In the write that saves it: two bots given one number at once both passed
                # a check made before it.
                rows = self._run(
                    db,
                    "SELECT name, settings FROM bots WHERE name != ? "
                    f"AND {self.dialect.find}(settings, ?) > 0",
                    (bot, number),
                ).fetchall()
                if owner := number_owner(rows, number):
                    raise number_taken(owner, number)
            bot_id = self._ensure_named(db, "bots", bot)
            self._run(
                db, "UPDATE bots SET settings = ? WHERE id = ?", (json.dumps(settings), bot_id)
            )

    def bots(self) -> list[str]:
        return [row[0] for row in self._query("SELECT name FROM bots ORDER BY name")]

    def people(self, bot: str) -> list[str]:
        """The people with a thread with ``bot``, by name."""
        rows = self._query(
            "SELECT DISTINCT p.name FROM threads t JOIN bots b ON b.id = t.bot_id "
            "JOIN people p ON p.id = t.person_id WHERE b.name = ? ORDER BY p.name",
            (bot,),
        )
        return [row[0] for row in rows]

    def _ensure_named(self, db: Any, table: str, name: str) -> int:
        """The id of the bot or person ``name``, made if new. ON CONFLICT waits for a
        concurrent writer of the same name (PostgreSQL), then the row is read."""
        select = f"SELECT id FROM {table} WHERE name = ?"
        row = self._run(db, select, (name,)).fetchone()
        if row is None:
            row = self._run(
                db,
                f"INSERT INTO {table} (name, created_at) VALUES (?, ?) "
                "ON CONFLICT (name) DO NOTHING RETURNING id",
                (name, self.dialect.moment(utc_now())),
            ).fetchone()
        if row is None:
            row = self._run(db, select, (name,)).fetchone()
        return int(row[0])

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
            "WHERE p.name = ?"
            + (" AND b.name = ?" if bot else "")
            + " GROUP BY t.id, b.name, p.name ORDER BY t.id"
        )
        rows = self._query(sql, (person, bot) if bot else (person,))
        read = self.dialect.read_moment
        return [ThreadInfo(*row[:4], *(read(moment) for moment in row[4:])) for row in rows]

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
            for start in range(0, len(wanted), _CHUNK):
                among, params = self.dialect.in_list("source_key", wanted[start : start + _CHUNK])
                rows = self._query(
                    f"SELECT source_key FROM lines WHERE thread_id = ? AND {among}",
                    [thread_id, *params],
                )
                held.update(SourceKey(thread, row[0]) for row in rows)
        return held

    # -- reading lines --------------------------------------------------------------------

    def lines(self, line_ids: Sequence[int]) -> list[Line]:
        if not len(line_ids):
            return []
        among, params = self.dialect.in_list("l.id", [int(line_id) for line_id in line_ids])
        rows = self._query(f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE {among}", params)
        by_id = {row[0]: self._line(row) for row in rows}
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
        return split_ranges(ranges, [(row[-1], self._line(row)) for row in rows])

    def speakers(self, line_ids: Sequence[int]) -> dict[int, str | None]:
        """The speaker of each of ``line_ids`` still stored, by id (None: the line's role
        speaks for it), without reading the rest of the lines."""
        if not len(line_ids):
            return {}
        among, params = self.dialect.in_list("id", [int(line_id) for line_id in line_ids])
        return dict(self._query(f"SELECT id, speaker FROM lines WHERE {among}", params))

    def lines_after(self, thread_id: int, after_seq: int, limit: int) -> list[Line]:
        """Up to ``limit`` lines of a thread after ``after_seq``, in order."""
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} "
            "WHERE l.thread_id = ? AND l.seq > ? ORDER BY l.seq LIMIT ?",
            (thread_id, after_seq, limit),
        )
        return [self._line(row) for row in rows]

    def last_lines(self, thread_id: int, count: int) -> list[Line]:
        """The newest ``count`` lines of a thread, oldest first."""
        if count <= 0:
            return []
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE l.thread_id = ? "
            "ORDER BY l.seq DESC LIMIT ?",
            (thread_id, count),
        )
        return [self._line(row) for row in reversed(rows)]

    def history(self, person: str, bot: str | None, thread: str | None) -> list[Line]:
        where, params = owner_filter(person, bot, thread)
        rows = self._query(
            f"SELECT {_LINE_COLUMNS} {_LINE_FROM} WHERE {where} ORDER BY l.thread_id, l.seq", params
        )
        return [self._line(row) for row in rows]

    def count_lines(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM lines")[0][0])

    def scope_line_count(self, bot_id: int) -> int:
        """How many lines the bot holds, every person's (through the (bot, id) index)."""
        return int(self._query("SELECT COUNT(*) FROM lines WHERE bot_id = ?", (bot_id,))[0][0])

    def all_line_texts(self) -> list[tuple[int, str]]:
        return self._query("SELECT id, text FROM lines ORDER BY id")

    def line_parts(self, line_ids: Sequence[int]) -> dict[int, LineParts]:
        """The stored parts of the lines ``line_ids`` that have them, by line id."""
        found: dict[int, LineParts] = {}
        wanted = sorted({int(line_id) for line_id in line_ids})
        for start in range(0, len(wanted), _CHUNK):
            among, params = self.dialect.in_list("line_id", wanted[start : start + _CHUNK])
            rows = self._query(
                f"SELECT line_id, bounds, vectors FROM line_parts WHERE {among}", params
            )
            found.update({row[0]: LineParts.from_bytes(row[1], row[2]) for row in rows})
        return found

    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_ids: Sequence[int] | None = None,
        thread_id: int | None = None,
        roles: Sequence[str] = ("human", "bot"),
        limit: int = 100,
        max_postings: int | None = None,
        among: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """(line id, score) of lines holding any of ``terms`` (words), best first, higher
        better, by BM25 (SQLite: FTS5's; PostgreSQL: ``postgres_lexical.py``); terms are
        passed as values, never as query syntax. With ``among``, only those lines are
        returned (their scores are the same: the statistics are the store's).

        A common word in a store of a million lines costs seconds to score everywhere it
        stands (docs/performance.md). With ``max_postings``, only the rarest terms are asked,
        as many as hold at most that many lines between them (the store's counts; none if
        even the rarest holds more): the common ones weigh least in BM25 (their IDF is the
        lowest) and cost most."""
        if not terms or (among is not None and not len(among)):
            return []
        query = LexicalQuery(terms, bot_id, person_ids, thread_id, roles, limit, max_postings,
                             among)  # fmt: skip
        return self._lexical_rows(query)

    # -- re-embedding ---------------------------------------------------------------------

    def replace_vectors(
        self,
        vectors: Iterable[tuple[int, np.ndarray]],
        meta: dict[str, str],
        *,
        last_id: int,
        generation: int,
        extras: dict[str, list[tuple[int, np.ndarray]]] | None = None,
        parts: Iterable[tuple[int, LineParts]] | None = None,
    ) -> None:
        """Swap every line's vector (and the summaries' and chunks' in ``extras``, by table;
        and, given ``parts``, every line's parts for these) and the embedder metadata in one
        transaction; refused when lines came or went since the caller read them up to
        ``last_id``."""
        with self._write() as db:
            self._hold_lines(db)
            newer = self._run(db, "SELECT 1 FROM lines WHERE id > ? LIMIT 1", (last_id,))
            if newer.fetchone() or self._read_generation(db) != generation:
                raise lines_changed()
            self._swap_line_vectors(db, vectors, meta)
            if parts is not None:
                self._run(db, "DELETE FROM line_parts")
                self.dialect.execute_many(
                    db,
                    "INSERT INTO line_parts (line_id, bounds, vectors) VALUES (?, ?, ?)",
                    ((line_id, *each.to_bytes()) for line_id, each in parts),
                )
            for table, rows in (extras or {}).items():
                self._replace_extra_vectors(db, table, rows)
            self._set_meta(db, meta)
            self._bump_generation(db)

    # -- relevance buffers ----------------------------------------------------------------

    def buffer(self, thread_id: int) -> list[BufferEntry]:
        with self._reading() as db:
            return self._read_buffer(db, thread_id)

    def _read_buffer(self, db: Any, thread_id: int) -> list[BufferEntry]:
        rows = self._run(
            db,
            "SELECT source_thread_id, first_seq, last_seq, score, matched_seqs "
            "FROM buffer_entries WHERE thread_id = ? ORDER BY position",
            (thread_id,),
        ).fetchall()
        read = self.dialect.read_numbers
        return [BufferEntry(r[0], r[1], r[2], r[3], read(r[4])) for r in rows]

    def save_buffer(self, thread_id: int, entries: Sequence[BufferEntry]) -> None:
        with self._write() as db:
            self._write_buffer(db, thread_id, entries)

    def _write_buffer(self, db: Any, thread_id: int, entries: Sequence[BufferEntry]) -> None:
        self._run(db, "DELETE FROM buffer_entries WHERE thread_id = ?", (thread_id,))
        self.dialect.execute_many(
            db,
            "INSERT INTO buffer_entries (thread_id, position, source_thread_id, first_seq, "
            "last_seq, score, matched_seqs) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (thread_id, position, e.source_thread_id, e.first_seq, e.last_seq, e.score,
                 self.dialect.numbers(e.matched_seqs))
                for position, e in enumerate(entries)
            ],
        )  # fmt: skip

    def _existing_threads(self, db: Any, thread_ids: Sequence[int], lock: str = "") -> set[int]:
        """Which of ``thread_ids`` are still there (``lock``: a locking clause for them)."""
        if not thread_ids:
            return set()
        among, params = self.dialect.in_list("id", sorted(thread_ids))
        found = self._run(db, f"SELECT id FROM threads WHERE {among} ORDER BY id{lock}", params)
        return {row[0] for row in found}

    # -- forgetting -----------------------------------------------------------------------

    def forget(self, person: str, bot: str | None, thread: str | None) -> dict[str, int]:
        """Remove a person's threads (or one), with lines, vectors, lexical rows, buffers and
        the summaries made from them; with all of them, the person's links, link codes and
        failed code entries with the bot (every bot where ``bot`` is None)."""
        return self.forget_identities([(person, bot)], thread)

    def forget_identities(
        self, identities: Sequence[tuple[str, str | None]], thread: str | None = None
    ) -> dict[str, int]:
        """:meth:`forget` each (person, bot) identity, all in one transaction: a person linked
        across channels is forgotten whole or, where it fails partway, not at all (the links
        that lead to the other identities stay, so asking again reaches them all)."""
        removed = {"threads": 0, "lines": 0, "summaries": 0}
        with self._write() as db:
            changes = self._changes(db)
            for person, bot in identities:
                for name, count in self._forget_identity(db, person, bot, thread).items():
                    removed[name] += count
            self._removed(db, self._changes(db) != changes)
        return removed

    def _forget_identity(
        self, db: Any, person: str, bot: str | None, thread: str | None
    ) -> dict[str, int]:
        where, params = owner_filter(person, bot, thread)
        if thread is None:
            self._forget_links(db, person, bot)
        found = self._run(
            db,
            "SELECT t.id, t.bot_id FROM threads t JOIN bots b ON b.id = t.bot_id "
            f"JOIN people p ON p.id = t.person_id WHERE {where}",
            params,
        ).fetchall()
        thread_ids = [thread_id for thread_id, _ in found]
        lines = summaries = 0
        if thread_ids:
            among, ids = self.dialect.in_list("thread_id", thread_ids)
            (lines,) = self._run(db, f"SELECT COUNT(*) FROM lines WHERE {among}", ids).fetchone()
            (summaries,) = self._run(
                db, f"SELECT COUNT(*) FROM memories WHERE {among}", ids
            ).fetchone()
            self._retire_line_ids(db)
            among, ids = self.dialect.in_list("id", thread_ids)
            self._run(db, f"DELETE FROM threads WHERE {among}", ids)
            # A person with nothing left is forgotten too, name included.
            self._run(
                db,
                "DELETE FROM people WHERE name = ? AND NOT EXISTS "
                "(SELECT 1 FROM threads t WHERE t.person_id = people.id)",
                (person,),
            )
            self._bump_generation(db, {bot_id for _, bot_id in found})
        if thread is None:
            self._forget_sms(db, person, bot)
        return {"threads": len(thread_ids), "lines": lines, "summaries": summaries}

    def forget_line(self, line_id: int) -> bool:
        """Remove one line: its vector, parts and lexical row go with it (the tables'
        cascades and trigger), and the generation moves for its bot, so every process's
        in-memory and approximate indexes drop it at their next search."""
        with self._write() as db:
            row = self._run(
                db, "SELECT bot_id, thread_id FROM lines WHERE id = ?", (line_id,)
            ).fetchone()
            if row is None:
                return False
            self._retire_line_ids(db)
            self._run(db, "DELETE FROM lines WHERE id = ?", (line_id,))
            # The thread's newest line gone, the next one takes its seq: the running summary
            # must not count that one as folded in already.
            newest = "(SELECT COALESCE(MAX(seq), 0) FROM lines WHERE thread_id = ?)"
            self._run(
                db,
                f"UPDATE threads SET summary_through = {newest} "
                f"WHERE id = ? AND summary_through > {newest}",
                (row[1], row[1], row[1]),
            )
            self._bump_generation(db, [row[0]])
            self._removed(db, True)
        return True

    def delete_bot(self, bot: str) -> dict[str, int]:
        """Remove a bot with everything it holds: profile, threads, lines, vectors, lexical
        rows, buffers, summaries and documents. People left with nothing are removed too."""
        with self._write() as db:
            row = self._run(db, "SELECT id FROM bots WHERE name = ?", (bot,)).fetchone()
            if row is None:
                return {"threads": 0, "lines": 0, "summaries": 0, "documents": 0}
            counts = {
                name: self._run(
                    db, f"SELECT COUNT(*) FROM {table} WHERE bot_id = ?", row
                ).fetchone()[0]
                for name, table in (
                    ("threads", "threads"),
                    ("lines", "lines"),
                    ("summaries", "memories"),
                    ("documents", "documents"),
                )
            }
            self._retire_line_ids(db)
            self._run(db, "DELETE FROM bots WHERE id = ?", row)  # cascades to the rest
            self._forget_sms(db, None, bot)
            self._run(
                db,
                "DELETE FROM people WHERE NOT EXISTS "
                "(SELECT 1 FROM threads t WHERE t.person_id = people.id)",
            )
            # Its keys go with it, in this transaction: a key checked after the deletion
            # committed would otherwise speak through a bot that is gone.
            self._run(
                db,
                "UPDATE api_keys SET revoked_at = ? WHERE bot = ? AND revoked_at IS NULL",
                (self.dialect.moment(utc_now()), bot),
            )
            self._bump_generation(db, [row[0]])
            self._removed(db, True)
        return counts

"""Identities linked as one person, link codes and failed entries, in the SQL both stores
share: a mixin of :class:`~membot.store.sql_store.SqlStore`.

A group is the rows of ``person_links`` of one bot with one ``group_id``; a person in no group
has no row. A new group takes the bot's highest label plus one, so a label is never given
again while a row holds it (a row left alone by a cascade is a group of one, which is no link).
Every change to a bot's links or codes first holds the bot's row (``Dialect.hold``): two
processes linking at once merge groups one after the other, and a code is used once.
Codes are kept only as a hash (:mod:`membot.memory.person_links` makes and checks them);
times are compared in Python, so the SQL stays plain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from membot.errors import NotFoundError
from membot.store.base import CodeEntry
from membot.store.dialect import Dialect, Row

_GROUP_OF = "(SELECT group_id FROM person_links WHERE bot_id = ? AND person_id = ?)"


def wait_for(times: Sequence[datetime], now: datetime, most: int, per: timedelta) -> float | None:
    """Seconds until fewer than ``most`` of ``times`` fall in the ``per`` before a moment
    (None: fewer already at ``now``)."""
    recent = sorted(when for when in times if now - per < when <= now)
    if len(recent) < most:
        return None
    return max((recent[-most] + per - now).total_seconds(), 1.0)


class StoreLinks:
    """Linked identities and their codes; mixed into ``SqlStore``."""

    # Provided by SqlStore.
    dialect: Dialect
    _write: Callable[[], AbstractContextManager[Any]]
    _query: Callable[..., list[Row]]
    _run: Callable[..., Any]
    _ensure_named: Callable[[Any, str, str], int]

    # -- reading --------------------------------------------------------------------------

    def link_group(self, bot_id: int, person_id: int) -> tuple[int, ...]:
        """The ids of every person linked with ``person_id`` in the bot, sorted, the person's
        own included (just it, when it is linked with nobody)."""
        rows = self._query(
            f"SELECT person_id FROM person_links WHERE bot_id = ? AND group_id = {_GROUP_OF}",
            (bot_id, bot_id, person_id),
        )
        return tuple(sorted({person_id, *(row[0] for row in rows)}))

    def linked_people(self, bot: str, person: str) -> tuple[str, ...]:
        """The names of every identity linked with ``person`` by ``bot``, sorted, the
        person's own included."""
        rows = self._query(
            "SELECT p.name FROM person_links l JOIN people p ON p.id = l.person_id "
            "JOIN bots b ON b.id = l.bot_id WHERE b.name = ? AND l.group_id = "
            "(SELECT m.group_id FROM person_links m JOIN people q ON q.id = m.person_id "
            "WHERE m.bot_id = b.id AND q.name = ?)",
            (bot, person),
        )
        return tuple(sorted({person, *(row[0] for row in rows)}))

    def link_bots(self, person: str) -> list[str]:
        """The bots by which ``person`` is linked with someone."""
        rows = self._query(
            "SELECT DISTINCT b.name FROM person_links l JOIN bots b ON b.id = l.bot_id "
            "JOIN people p ON p.id = l.person_id WHERE p.name = ? ORDER BY b.name",
            (person,),
        )
        return [row[0] for row in rows]

    # -- codes ----------------------------------------------------------------------------

    def add_link_code(
        self,
        bot: str,
        person: str,
        code_hash: str,
        expires_at: datetime,
        *,
        now: datetime,
        most: int,
        per: timedelta,
    ) -> float | None:
        """Keep a new code's hash for ``person`` of ``bot`` (both stored), unless the person
        made ``most`` codes in the last ``per``: then nothing is kept, and the seconds until
        the next is allowed are returned. Codes made before that are removed."""
        moment = self.dialect.moment
        with self._write() as db:
            bot_id, person_id = self._hold_bot(db, bot), self._ensure_named(db, "people", person)
            wait = self._wait(
                db,
                "SELECT made_at FROM link_codes WHERE bot_id = ? AND person_id = ?",
                (bot_id, person_id),
                now,
                most,
                per,
            )
            if wait is not None:
                return wait
            self._run(
                db,
                "DELETE FROM link_codes WHERE bot_id = ? AND person_id = ? AND made_at <= ?",
                (bot_id, person_id, moment(now - per)),
            )
            self._run(
                db,
                "INSERT INTO link_codes (hash, bot_id, person_id, made_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (code_hash, bot_id, person_id, moment(now), moment(expires_at)),
            )
        return None

    def link_code_taken(self, code_hash: str) -> bool:
        """Whether a code of this hash is kept (a new code must not be one still kept)."""
        return bool(self._query("SELECT 1 FROM link_codes WHERE hash = ?", (code_hash,)))

    def enter_link_code(
        self,
        bot: str,
        person: str,
        code_hash: str | None,
        *,
        now: datetime,
        most_failures: int,
        per: timedelta,
    ) -> CodeEntry:
        """``person`` of ``bot`` enters the code of hash ``code_hash`` (None: not even the
        shape of a code). If another identity of the bot made it, unused and unexpired, it
        is marked used and the two identities' groups become one, in one transaction;
        otherwise the failure is kept. Not tried at all when ``person`` failed
        ``most_failures`` times in the last ``per``."""
        moment = self.dialect.moment
        with self._write() as db:
            bot_id = self._hold_bot(db, bot)
            wait = self._wait(
                db,
                "SELECT failed_at FROM link_failures WHERE bot_id = ? AND person = ?",
                (bot_id, person),
                now,
                most_failures,
                per,
            )
            if wait is not None:
                return CodeEntry(None, wait)
            made_by = self._use_code(db, bot_id, person, code_hash, now)
            if made_by is None:
                self._run(
                    db,
                    "DELETE FROM link_failures WHERE bot_id = ? AND person = ? AND failed_at < ?",
                    (bot_id, person, moment(now - per)),
                )
                self._run(
                    db,
                    "INSERT INTO link_failures (bot_id, person, failed_at) VALUES (?, ?, ?)",
                    (bot_id, person, moment(now)),
                )
                return CodeEntry(None)
            person_id = self._ensure_named(db, "people", person)
            self._join(db, bot_id, made_by, person_id, now)
        return CodeEntry(self.linked_people(bot, person))

    def _wait(
        self,
        db: Any,
        sql: str,
        params: tuple[Any, ...],
        now: datetime,
        most: int,
        per: timedelta,
    ) -> float | None:
        """:func:`wait_for` over the moments ``sql`` reads (one column) in ``db``."""
        times = [self.dialect.read_time(row[0]) for row in self._run(db, sql, params).fetchall()]
        return wait_for(times, now, most, per)

    def _use_code(
        self, db: Any, bot_id: int, person: str, code_hash: str | None, now: datetime
    ) -> int | None:
        """Mark the code used if it links ``person``; the id of the person who made it."""
        if code_hash is None:
            return None
        row = self._run(
            db,
            "UPDATE link_codes SET used_at = ? WHERE hash = ? AND bot_id = ? AND used_at IS NULL "
            "AND person_id NOT IN (SELECT id FROM people WHERE name = ?) "
            "RETURNING person_id, expires_at",
            (self.dialect.moment(now), code_hash, bot_id, person),
        ).fetchone()
        if row is None or self.dialect.read_time(row[1]) <= now:
            return None
        return int(row[0])

    # -- groups ---------------------------------------------------------------------------

    def _hold_bot(self, db: Any, bot: str) -> int:
        """The bot's id, its row held until commit (links and codes change one at a time)."""
        row = self._run(db, f"SELECT id FROM bots WHERE name = ?{self.dialect.hold}", (bot,))
        found = row.fetchone()
        if found is None:
            raise NotFoundError(f"no bot named {bot!r}: make it with `membot bots add {bot}`")
        return int(found[0])

    def _join(self, db: Any, bot_id: int, first: int, second: int, now: datetime) -> None:
        """Make the groups of two people of a bot one."""
        among, params = self.dialect.in_list("person_id", [first, second])
        groups = dict(
            self._run(
                db,
                f"SELECT person_id, group_id FROM person_links WHERE bot_id = ? AND {among}",
                [bot_id, *params],
            ).fetchall()
        )
        into, other = groups.get(first), groups.get(second)
        if into is None and other is None:
            (into,) = self._run(
                db,
                "SELECT COALESCE(MAX(group_id), 0) + 1 FROM person_links WHERE bot_id = ?",
                (bot_id,),
            ).fetchone()
        elif into is None:
            into, other = other, None
        if other is not None and other != into:
            self._run(
                db,
                "UPDATE person_links SET group_id = ? WHERE bot_id = ? AND group_id = ?",
                (into, bot_id, other),
            )
        for person_id in (first, second):
            if person_id not in groups:
                self._run(
                    db,
                    "INSERT INTO person_links (bot_id, person_id, group_id, linked_at) "
                    "VALUES (?, ?, ?, ?)",
                    (bot_id, person_id, into, self.dialect.moment(now)),
                )

    def unlink_person(self, bot: str, person: str) -> None:
        """Take ``person`` out of its group of ``bot`` (a group left with one is undone)."""
        with self._write() as db:
            bot_id = self._hold_bot(db, bot)
            row = self._run(db, "SELECT id FROM people WHERE name = ?", (person,)).fetchone()
            if row is not None:
                self._leave_group(db, bot_id, int(row[0]))

    def _leave_group(self, db: Any, bot_id: int, person_id: int) -> None:
        row = self._run(
            db,
            "SELECT group_id FROM person_links WHERE bot_id = ? AND person_id = ?",
            (bot_id, person_id),
        ).fetchone()
        if row is None:
            return
        self._run(
            db,
            "DELETE FROM person_links WHERE bot_id = ? AND person_id = ?",
            (bot_id, person_id),
        )
        (left,) = self._run(
            db,
            "SELECT COUNT(*) FROM person_links WHERE bot_id = ? AND group_id = ?",
            (bot_id, row[0]),
        ).fetchone()
        if left == 1:
            self._run(
                db,
                "DELETE FROM person_links WHERE bot_id = ? AND group_id = ?",
                (bot_id, row[0]),
            )

    def _forget_links(self, db: Any, person: str, bot: str | None) -> None:
        """In a forget's transaction: the person's links, codes and failed entries with
        ``bot`` (every bot's where None)."""
        row = self._run(db, "SELECT id FROM people WHERE name = ?", (person,)).fetchone()
        sql = "SELECT id FROM bots" + (" WHERE name = ?" if bot else "")
        bot_ids = [found[0] for found in self._run(db, sql, (bot,) if bot else ())]
        for bot_id in bot_ids:
            self._run(
                db, "DELETE FROM link_failures WHERE bot_id = ? AND person = ?", (bot_id, person)
            )
            if row is not None:
                self._leave_group(db, bot_id, int(row[0]))
                self._run(
                    db,
                    "DELETE FROM link_codes WHERE bot_id = ? AND person_id = ?",
                    (bot_id, row[0]),
                )

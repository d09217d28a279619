"""Text conversations' state (SMS), in the SQL both stores share: a mixin of
:class:`~membot.store.sql_store.SqlStore`.

Senders and texts are named by the bot's and the person's names (the person's is a keyed hash
of their number), not by references, like API keys: the state of a sender who said STOP must
outlive ``membot forget`` of their threads, or a forgotten person would be texted again. The
tables are the same in both stores (PostgreSQL's migrations 2 and 3 are SQLite's 6 and 9 as
they are), times included (ISO 8601 text). The compare-and-set and the claim are safe between
processes by ``ON CONFLICT`` and a row lock (``FOR UPDATE``; SQLite has one writer at a time).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from membot.store.base import SmsRecord, SmsSender
from membot.store.dialect import Dialect, Row

_SENDER_COLUMNS = "bot, sender, thread, stopped, asking_about, held_text, held_sid"
# A text's record, with the process answering it (none once answered, or in a record an
# earlier membot made).
_RECORD_SQL = (
    "SELECT m.sid, m.bot, m.sender, m.received_at, m.replies, m.via, a.answerer "
    "FROM sms_messages m LEFT JOIN sms_answerers a ON a.sid = m.sid "
)
_SENDER_SQL = f"SELECT {_SENDER_COLUMNS} FROM sms_senders WHERE bot = ? AND sender = ?"
# A text still unanswered goes to a new answerer if its answerer is still the one read
# (none noted, in an earlier membot's record, or the one a retry found gone).
_TAKE_OVER_SQL = (
    "INSERT INTO sms_answerers (sid, answerer) SELECT ?, ? WHERE EXISTS "
    "(SELECT 1 FROM sms_messages WHERE sid = ? AND via IS NULL) "
    "ON CONFLICT (sid) DO UPDATE SET answerer = excluded.answerer "
    "WHERE sms_answerers.answerer = ?"
)


def _sender(row: Row) -> SmsSender:
    return SmsSender(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6])


def _record(row: Row) -> SmsRecord:
    replies = tuple(json.loads(row[4])) if row[4] is not None else None
    received = datetime.fromisoformat(row[3]).astimezone(UTC)
    return SmsRecord(row[0], row[1], row[2], received, replies, row[5], row[6])


class SmsState:
    """Senders' state and the texts received; mixed into ``SqlStore``."""

    # Provided by SqlStore.
    dialect: Dialect
    _write: Callable[[], AbstractContextManager[Any]]
    _query: Callable[..., list[Row]]
    _run: Callable[..., Any]

    def sms_sender(self, bot: str, sender: str) -> SmsSender | None:
        rows = self._query(_SENDER_SQL, (bot, sender))
        return _sender(rows[0]) if rows else None

    def save_sms_sender(self, state: SmsSender, expected: SmsSender | None) -> bool:
        """``state`` stored if the stored one is still ``expected`` (compare and set: two
        processes answering one person's texts cannot overwrite each other's change)."""
        values = (state.bot, state.sender, state.thread, int(state.stopped),
                  state.asking_about, state.held_text, state.held_sid)  # fmt: skip
        with self._write() as db:
            if expected is None:  # a first state: only if no other process wrote one
                inserted = self._run(
                    db,
                    f"INSERT INTO sms_senders ({_SENDER_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    values,
                )
                return int(inserted.rowcount) == 1
            row = self._run(
                db, _SENDER_SQL + self.dialect.for_update, (state.bot, state.sender)
            ).fetchone()
            if row is None or _sender(row) != expected:
                return False
            self._run(
                db,
                "UPDATE sms_senders SET thread = ?, stopped = ?, asking_about = ?, "
                "held_text = ?, held_sid = ? WHERE bot = ? AND sender = ?",
                (*values[2:], state.bot, state.sender),
            )
        return True

    def claim_sms_message(self, record: SmsRecord, forget_before: datetime) -> SmsRecord | None:
        """None when ``record`` is new (it is stored, in flight); else the record held. One
        transaction, so two workers given the same text cannot both answer it."""
        with self._write() as db:
            self._run(
                db,
                "DELETE FROM sms_messages WHERE received_at < ?",
                (forget_before.astimezone(UTC).isoformat(),),
            )
            claimed = self._run(
                db,
                "INSERT INTO sms_messages (sid, bot, sender, received_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (sid) DO NOTHING",
                (record.sid, record.bot, record.sender,
                 record.received_at.astimezone(UTC).isoformat()),
            )  # fmt: skip
            if claimed.rowcount == 1:
                if record.answerer is not None:
                    self._run(
                        db,
                        "INSERT INTO sms_answerers (sid, answerer) VALUES (?, ?)",
                        (record.sid, record.answerer),
                    )
                return None
            row = self._run(db, _RECORD_SQL + "WHERE m.sid = ?", (record.sid,)).fetchone()
        return _record(row)

    def take_over_sms_message(self, record: SmsRecord, by: str) -> bool:
        with self._write() as db:
            taken = self._run(db, _TAKE_OVER_SQL, (record.sid, by, record.sid, record.answerer))
        return int(taken.rowcount) == 1

    def answer_sms_message(self, sid: str, replies: Sequence[str], via: str) -> None:
        with self._write() as db:
            self._run(
                db,
                "UPDATE sms_messages SET replies = ?, via = ? WHERE sid = ?",
                (json.dumps(list(replies)), via, sid),
            )

    def _forget_sms(self, db: Any, person: str | None, bot: str | None) -> None:
        """A forgotten person's (or deleted bot's) held text and the replies kept for retries
        go too; whether a sender said STOP stays (see the module's docstring)."""
        conditions = [(c, v) for c, v in (("sender", person), ("bot", bot)) if v is not None]
        where = " AND ".join(f"{column} = ?" for column, _ in conditions) or "TRUE"
        params = [value for _, value in conditions]
        self._run(db, f"DELETE FROM sms_messages WHERE {where}", params)
        self._run(
            db,
            "UPDATE sms_senders SET thread = NULL, asking_about = NULL, held_text = NULL, "
            f"held_sid = NULL WHERE {where}",
            params,
        )

"""The SQLite store's text conversations: a mixin of :class:`~membot.store.sqlite.SqliteStore`.

Senders and texts are named by the bot's and the person's names (the person's is a keyed hash
of their number), not by references, like API keys: the state of a sender who said STOP must
outlive ``membot forget`` of their threads, or a forgotten person would be texted again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from membot.store.base import SmsRecord, SmsSender
from membot.store.sqlite_driver import sqlite3

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


def _sender(row: Sequence) -> SmsSender:
    return SmsSender(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6])


def _record(row: Sequence) -> SmsRecord:
    replies = tuple(json.loads(row[4])) if row[4] is not None else None
    return SmsRecord(
        row[0],
        row[1],
        row[2],
        datetime.fromisoformat(row[3]).astimezone(UTC),
        replies,
        row[5],
        row[6],
    )


class StoreSms:
    """Senders' state and the texts received; mixed into ``SqliteStore``."""

    # Provided by SqliteStore.
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _query: Callable[..., list[tuple]]

    def sms_sender(self, bot: str, sender: str) -> SmsSender | None:
        rows = self._query(_SENDER_SQL, (bot, sender))
        return _sender(rows[0]) if rows else None

    def save_sms_sender(self, state: SmsSender, expected: SmsSender | None) -> bool:
        """``state`` stored if the stored one is still ``expected`` (compare and set: two
        processes answering one person's texts cannot overwrite each other's change)."""
        with self._write() as db:
            row = db.execute(_SENDER_SQL, (state.bot, state.sender)).fetchone()
            if (_sender(row) if row else None) != expected:
                return False
            db.execute(
                f"INSERT OR REPLACE INTO sms_senders ({_SENDER_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    state.bot,
                    state.sender,
                    state.thread,
                    int(state.stopped),
                    state.asking_about,
                    state.held_text,
                    state.held_sid,
                ),
            )
        return True

    def claim_sms_message(self, record: SmsRecord, forget_before: datetime) -> SmsRecord | None:
        """None when ``record`` is new (it is stored, in flight); else the record held. One
        transaction, so two workers given the same text cannot both answer it."""
        with self._write() as db:
            db.execute(
                "DELETE FROM sms_messages WHERE received_at < ?",
                (forget_before.astimezone(UTC).isoformat(),),
            )
            row = db.execute(_RECORD_SQL + "WHERE m.sid = ?", (record.sid,)).fetchone()
            if row is not None:
                return _record(row)
            db.execute(
                "INSERT INTO sms_messages (sid, bot, sender, received_at) VALUES (?, ?, ?, ?)",
                (
                    record.sid,
                    record.bot,
                    record.sender,
                    record.received_at.astimezone(UTC).isoformat(),
                ),
            )
            if record.answerer is not None:
                db.execute(
                    "INSERT INTO sms_answerers (sid, answerer) VALUES (?, ?)",
                    (record.sid, record.answerer),
                )
        return None

    def take_over_sms_message(self, record: SmsRecord, by: str) -> bool:
        with self._write() as db:
            taken = db.execute(_TAKE_OVER_SQL, (record.sid, by, record.sid, record.answerer))
        return taken.rowcount == 1

    def answer_sms_message(self, sid: str, replies: Sequence[str], via: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE sms_messages SET replies = ?, via = ? WHERE sid = ?",
                (json.dumps(list(replies)), via, sid),
            )

    @staticmethod
    def _forget_sms(db: sqlite3.Connection, person: str | None, bot: str | None) -> None:
        """A forgotten person's (or deleted bot's) held text and the replies kept for retries
        go too; whether a sender said STOP stays (see the module's docstring)."""
        conditions = [
            (column, value)
            for column, value in (("sender", person), ("bot", bot))
            if value is not None
        ]
        where = " AND ".join(f"{column} = ?" for column, _ in conditions) or "1"
        params = [value for _, value in conditions]
        db.execute(f"DELETE FROM sms_messages WHERE {where}", params)
        db.execute(
            "UPDATE sms_senders SET thread = NULL, asking_about = NULL, held_text = NULL, "
            f"held_sid = NULL WHERE {where}",
            params,
        )

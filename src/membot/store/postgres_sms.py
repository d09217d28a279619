"""The PostgreSQL store's text conversations (the SQLite store's are in ``store/sms.py``).

The same tables and behaviour; the compare-and-set and the claim are made safe between
servers on many machines by row locks and ``ON CONFLICT`` rather than SQLite's one writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from psycopg import Connection

from membot.store.base import SmsRecord, SmsSender
from membot.store.migrations import MIGRATIONS as SQLITE_MIGRATIONS
from membot.store.sms import _RECORD_SQL, _SENDER_COLUMNS, _TAKE_OVER_SQL, _record, _sender

_SENDER_SQL = f"SELECT {_SENDER_COLUMNS} FROM sms_senders WHERE bot = %s AND sender = %s"

# The PostgreSQL store's migration 2 (postgres_schema.MIGRATIONS): the SQLite store's migration
# 6 as it is, whose SQL both databases read the same way, so ``membot migrate`` copies the
# tables column for column.
SMS_TABLES = SQLITE_MIGRATIONS[5]
SMS_ANSWERERS = SQLITE_MIGRATIONS[8]


class PostgresSms:
    """Senders' state and the texts received; mixed into ``PostgresStore``."""

    # Provided by PostgresStore.
    _write: Callable[[], AbstractContextManager[Connection]]
    _query: Callable[..., list[tuple]]

    def sms_sender(self, bot: str, sender: str) -> SmsSender | None:
        rows = self._query(_SENDER_SQL, (bot, sender))
        return _sender(rows[0]) if rows else None

    def save_sms_sender(self, state: SmsSender, expected: SmsSender | None) -> bool:
        """``state`` stored if the stored one is still ``expected`` (compare and set)."""
        values = (
            state.bot,
            state.sender,
            state.thread,
            int(state.stopped),
            state.asking_about,
            state.held_text,
            state.held_sid,
        )
        with self._write() as db:
            if expected is None:  # a first state: only if no other process wrote one
                inserted = db.execute(
                    f"INSERT INTO sms_senders ({_SENDER_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    values,
                )
                return inserted.rowcount == 1
            row = db.execute(_SENDER_SQL + " FOR UPDATE", (state.bot, state.sender)).fetchone()
            if row is None or _sender(row) != expected:
                return False
            db.execute(
                "UPDATE sms_senders SET thread = %s, stopped = %s, asking_about = %s, "
                "held_text = %s, held_sid = %s WHERE bot = %s AND sender = %s",
                (*values[2:], state.bot, state.sender),
            )
        return True

    def claim_sms_message(self, record: SmsRecord, forget_before: datetime) -> SmsRecord | None:
        """None when ``record`` is new (it is stored, in flight); else the record held."""
        with self._write() as db:
            db.execute(
                "DELETE FROM sms_messages WHERE received_at < %s",
                (forget_before.astimezone(UTC).isoformat(),),
            )
            claimed = db.execute(
                "INSERT INTO sms_messages (sid, bot, sender, received_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (sid) DO NOTHING",
                (
                    record.sid,
                    record.bot,
                    record.sender,
                    record.received_at.astimezone(UTC).isoformat(),
                ),
            )
            if claimed.rowcount == 1:
                if record.answerer is not None:
                    db.execute(
                        "INSERT INTO sms_answerers (sid, answerer) VALUES (%s, %s)",
                        (record.sid, record.answerer),
                    )
                return None
            row = db.execute(_RECORD_SQL + "WHERE m.sid = %s", (record.sid,)).fetchone()
        return _record(row)

    def take_over_sms_message(self, record: SmsRecord, by: str) -> bool:
        with self._write() as db:
            taken = db.execute(
                _TAKE_OVER_SQL.replace("?", "%s"), (record.sid, by, record.sid, record.answerer)
            )
        return taken.rowcount == 1

    def answer_sms_message(self, sid: str, replies: Sequence[str], via: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE sms_messages SET replies = %s, via = %s WHERE sid = %s",
                (json.dumps(list(replies)), via, sid),
            )

    @staticmethod
    def _forget_sms(db: Connection, person: str | None, bot: str | None) -> None:
        """As the SQLite store's: held texts and kept replies go, a STOP stays."""
        conditions = [(c, v) for c, v in (("sender", person), ("bot", bot)) if v is not None]
        where = " AND ".join(f"{column} = %s" for column, _ in conditions) or "TRUE"
        params = [value for _, value in conditions]
        db.execute(f"DELETE FROM sms_messages WHERE {where}", params)
        db.execute(
            "UPDATE sms_senders SET thread = NULL, asking_about = NULL, held_text = NULL, "
            f"held_sid = NULL WHERE {where}",
            params,
        )

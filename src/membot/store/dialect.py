"""What the SQL both stores share leaves to their database: how a statement marks its values,
how times, lists of numbers and id lists travel, and how a driver runs a batch.

The shared SQL (:mod:`membot.store.sql_store`, ``extras.py``, ``keys.py``, ``sms_state.py``)
is written once, with ``?`` for each value; :class:`SqliteDialect` runs it as it is and
:class:`PostgresDialect` (``postgres.py``, which imports psycopg) with ``%s``. Both
databases read the rest the same way: ``INSERT … ON CONFLICT``, ``RETURNING`` (SQLite 3.35+;
membot bundles 3.50), ``COALESCE``, ``||``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from membot.errors import StoreError

# A row as a driver gives it (sqlite3 and psycopg's default: a tuple), and a statement's
# values: a sequence for ``?`` marks, a mapping for named ones.
Row = tuple[Any, ...]
Params = Sequence[Any] | Mapping[str, Any]


class Dialect:
    """SQLite's spelling; :class:`PostgresDialect` says what PostgreSQL spells otherwise."""

    name = "sqlite"
    # The newline character in SQL (a chunk's heading and text are embedded as one text).
    newline = "char(10)"
    # The function giving where one text stands in another (0: nowhere).
    find = "instr"
    # What takes a row's lock until commit, after a SELECT (SQLite: the one writer has it).
    for_update = ""
    # What holds a row against other writers until commit without blocking the rows that
    # reference it (a line written for a bot while its links change).
    hold = ""

    def sql(self, statement: str) -> str:
        """``statement`` with the driver's value marks in place of ``?``."""
        return statement

    def execute(self, db: Any, statement: str, params: Params = ()) -> Any:
        return db.execute(self.sql(statement), params)

    def execute_many(self, db: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        db.executemany(self.sql(statement), rows)

    def insert_id(self, db: Any, statement: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` of one row; the row's new id."""
        return int(self.execute(db, statement + " RETURNING id", params).fetchone()[0])

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition that ``column`` is one of ``values``, and its parameters."""
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    @staticmethod
    def moment(when: datetime | None) -> Any:
        """A time as the store keeps it: ISO 8601 text in UTC."""
        return when.astimezone(UTC).isoformat() if when else None

    @staticmethod
    def read_moment(value: Any) -> datetime | None:
        return datetime.fromisoformat(value).astimezone(UTC) if value else None

    def read_time(self, value: Any) -> datetime:
        """A time from a ``NOT NULL`` column (a line's, a summary's, a key's creation)."""
        moment = self.read_moment(value)
        if moment is None:
            raise StoreError(f"a stored time is missing ({value!r} where the schema requires one)")
        return moment

    @staticmethod
    def numbers(values: Sequence[int]) -> Any:
        """A list of whole numbers as a column holds it (JSON text)."""
        return json.dumps(list(values))

    @staticmethod
    def read_numbers(value: Any) -> tuple[int, ...]:
        return tuple(json.loads(value))


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg: ``%s`` marks, ``timestamptz`` and ``integer[]`` columns,
    an id list as one array parameter."""

    name = "postgresql"
    newline = "chr(10)"
    find = "strpos"
    for_update = " FOR UPDATE"
    hold = " FOR NO KEY UPDATE"

    def sql(self, statement: str) -> str:
        return _percent_marks(statement)

    def execute_many(self, db: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        db.cursor().executemany(self.sql(statement), list(rows))

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    @staticmethod
    def moment(when: datetime | None) -> Any:
        return when

    @staticmethod
    def read_moment(value: Any) -> datetime | None:
        return value.astimezone(UTC) if value else None

    @staticmethod
    def numbers(values: Sequence[int]) -> Any:
        return list(values)

    @staticmethod
    def read_numbers(value: Any) -> tuple[int, ...]:
        return tuple(value)


@lru_cache(maxsize=512)
def _percent_marks(statement: str) -> str:
    # Statements written for PostgreSQL alone already hold %s and no ?: they pass unchanged.
    return statement.replace("?", "%s")


def one_row(row: Row | None) -> Row:
    """The row a statement always returns (an aggregate, ``RETURNING`` of a row inserted, a
    row just locked): a ``StoreError`` if the database returned none after all."""
    if row is None:
        raise StoreError("the database returned no row where the statement always returns one")
    return row


SQLITE = Dialect()
POSTGRESQL = PostgresDialect()

"""Copying a whole store to another, SQLite to PostgreSQL and back (``membot migrate``).

Every table is read in batches into plain rows — times as UTC datetimes, vectors as float32
bytes, lists as lists — with their ids, so references between tables stay as they are, and
written into the destination in one transaction: a copy that fails leaves the destination as
it was. The destination's lexical rows are made by the destination (FTS5 rows on SQLite, the
generated ``tsvector`` on PostgreSQL), and its counts are compared with the source's before
the transaction commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from membot.errors import ConfigError, StoreError
from membot.store.base import Store
from membot.store.dialect import Row
from membot.store.migrations import LAST_LINE_ID
from membot.store.postgres_lexical import word_count
from membot.store.sqlite import SqliteStore, _line_id_marks
from membot.store.sqlite_driver import sqlite3

# Tables in an order that respects their references, with the columns copied.
TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "bots": ("id", "name", "settings", "created_at"),
    "people": ("id", "name", "created_at"),
    # Identities linked as one person; link codes and failed entries are not carried (a code
    # lives ten minutes; a copy starts its rate limits afresh).
    "person_links": ("bot_id", "person_id", "group_id", "linked_at"),
    "threads": (
        "id",
        "bot_id",
        "person_id",
        "name",
        "created_at",
        "ended_at",
        "summary",
        "summary_through",
    ),
    "lines": (
        "id",
        "thread_id",
        "bot_id",
        "person_id",
        "seq",
        "role",
        "speaker",
        "text",
        "ref",
        "created_at",
        "tokens",
        "source_key",
        "vector",
    ),
    # A line's parts: offsets and vectors as the same bytes in both stores.
    "line_parts": ("line_id", "bounds", "vectors"),
    "buffer_entries": (
        "thread_id",
        "position",
        "source_thread_id",
        "first_seq",
        "last_seq",
        "score",
        "matched_seqs",
    ),
    "memories": (
        "id",
        "bot_id",
        "person_id",
        "thread_id",
        "kind",
        "text",
        "categories",
        "created_at",
        "covers_from",
        "covers_to",
        "tokens",
        "vector",
    ),
    "memory_corrections": ("id", "memory_id", "old_text", "new_text", "corrected_at"),
    "documents": ("id", "bot_id", "name", "title", "media", "sha256", "added_at"),
    "chunks": ("id", "document_id", "bot_id", "ord", "heading", "text", "tokens", "vector"),
    "sms_senders": (
        "bot",
        "sender",
        "thread",
        "stopped",
        "asking_about",
        "held_text",
        "held_sid",
    ),
    "sms_messages": ("sid", "bot", "sender", "received_at", "replies", "via"),
    "api_keys": (
        "id",
        "hash",
        "bot",
        "person",
        "label",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ),
}
_TIMES = {
    "created_at",
    "ended_at",
    "covers_from",
    "covers_to",
    "added_at",
    "expires_at",
    "revoked_at",
    "last_used_at",
    "corrected_at",
    "linked_at",
}
_BATCH = 2000


@dataclass(frozen=True)
class CopyReport:
    """Rows per table in the source and in the destination after the copy (equal, or the
    copy was rolled back)."""

    source: dict[str, int]
    copied: dict[str, int]


def _when(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value.astimezone(UTC) if value else None
    return datetime.fromisoformat(value).astimezone(UTC)


# -- SQLite -------------------------------------------------------------------------------


def _sqlite_select(table: str) -> str:
    if table == "lines":
        columns = ", ".join(f"l.{c}" for c in TABLES["lines"][:-1])
        return (
            f"SELECT {columns}, v.vector FROM lines l JOIN line_vectors v ON v.line_id = l.id "
            "ORDER BY l.id"
        )
    return f"SELECT {', '.join(TABLES[table])} FROM {table}"


def _from_sqlite(table: str, row: Row) -> Row:
    values = dict(zip(TABLES[table], row, strict=True))
    for name in _TIMES & values.keys():
        values[name] = _when(values[name])
    if table == "buffer_entries":
        values["matched_seqs"] = json.loads(values["matched_seqs"])
    return tuple(values.values())


def _read_sqlite(store: SqliteStore, table: str) -> Iterator[list[Row]]:
    with store._lock:
        cursor = store._db.execute(_sqlite_select(table))
        while batch := cursor.fetchmany(_BATCH):
            yield [_from_sqlite(table, row) for row in batch]


def _write_sqlite(db: sqlite3.Connection, table: str, rows: list[Row]) -> None:
    columns = TABLES[table]
    prepared = []
    for row in rows:
        values = dict(zip(columns, row, strict=True))
        for name in _TIMES & values.keys():
            values[name] = values[name].isoformat() if values[name] else None
        if table == "buffer_entries":
            values["matched_seqs"] = json.dumps(list(values["matched_seqs"]))
        prepared.append(values)
    if table == "lines":
        names = columns[:-1]
        db.executemany(
            f"INSERT INTO lines ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [tuple(v[n] for n in names) for v in prepared],
        )
        db.executemany(
            "INSERT INTO line_vectors (line_id, vector) VALUES (?, ?)",
            [(v["id"], v["vector"]) for v in prepared],
        )
        db.executemany(
            "INSERT INTO line_text (rowid, text) VALUES (?, ?)",
            [(v["id"], v["text"]) for v in prepared],
        )
        return
    marks = ", ".join("?" * len(columns))
    verb = "INSERT OR REPLACE" if table == "meta" else "INSERT"
    db.executemany(
        f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({marks})",
        [tuple(v.values()) for v in prepared],
    )


def _load_sqlite(
    store: SqliteStore, source: Store, replace: bool, counts: dict[str, int]
) -> dict[str, int]:
    with store._write() as db:
        if replace:
            for table in ("sms_messages", "sms_senders", "api_keys", "bots", "people", "meta"):
                db.execute(f"DELETE FROM {table}")  # the rest cascades
        for table in TABLES:
            for rows in read_tables(source, table):
                _write_sqlite(db, table, rows)
        given = _last_line_id(source)  # no line here gets an id the source gave out
        if given > max(_line_id_marks(db)):  # the source's newest lines were removed
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (LAST_LINE_ID, str(given)),
            )
        copied = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
        _check_counts(counts, copied)  # raising here rolls the copy back
    return copied


# -- PostgreSQL ---------------------------------------------------------------------------


def _last_line_id(store: Any) -> int:
    """The highest line id ``store`` gave out, removed lines' included: SQLite's record, or
    PostgreSQL's sequence (0: none yet)."""
    if isinstance(store, SqliteStore):
        return store.last_line_id()
    (name,) = store._query("SELECT pg_get_serial_sequence('lines', 'id')")[0]
    ((last, called),) = store._query(f"SELECT last_value, is_called FROM {name}")
    return int(last) if called else int(last) - 1


def _read_postgres(store: Any, table: str) -> Iterator[list[Row]]:
    columns = ", ".join(
        "embedding" if c == "vector" and table == "lines" else c for c in TABLES[table]
    )
    order = " ORDER BY id" if "id" in TABLES[table] else ""
    with store._pool.connection() as db, db.transaction():
        cursor = db.cursor(name=f"membot_copy_{table}", binary=True)
        cursor.execute(f"SELECT {columns} FROM {table}{order}")
        while batch := cursor.fetchmany(_BATCH):
            yield [_from_postgres(table, row) for row in batch]


def _from_postgres(table: str, row: Row) -> Row:
    values = dict(zip(TABLES[table], row, strict=True))
    for name in _TIMES & values.keys():
        values[name] = _when(values[name])
    if table == "lines":
        values["vector"] = values["vector"].to_numpy().astype(np.float32).tobytes()
    elif "vector" in values:
        values["vector"] = bytes(values["vector"])
    elif table == "line_parts":
        values["bounds"], values["vectors"] = bytes(values["bounds"]), bytes(values["vectors"])
    return tuple(values.values())


def _write_postgres(db: Any, table: str, rows: list[Row]) -> None:
    columns = list(TABLES[table])
    if table == "lines":
        # The one table that grows with the store: COPY, not an INSERT a row.
        columns = [*columns[:-1], "embedding", "words"]
        with db.cursor().copy(f"COPY lines ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                vector = np.frombuffer(row[-1], dtype=np.float32)
                copy.write_row((*row[:-1], vector, word_count(row[7])))
        return
    marks = ", ".join(["%s"] * len(columns))
    upsert = " ON CONFLICT (key) DO UPDATE SET value = excluded.value" if table == "meta" else ""
    db.cursor().executemany(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}){upsert}", rows
    )


def _load_postgres(
    store: Any, source: Store, replace: bool, counts: dict[str, int]
) -> dict[str, int]:
    with store._write() as db:
        db.execute("LOCK TABLE bots, people, api_keys, meta IN EXCLUSIVE MODE")
        if replace:
            db.execute("DELETE FROM sms_messages; DELETE FROM sms_senders; DELETE FROM api_keys;")
            db.execute("DELETE FROM bots; DELETE FROM people;")
            db.execute("DELETE FROM meta")
        for table in TABLES:
            for rows in read_tables(source, table):
                _write_postgres(db, table, rows)
        for table, columns in TABLES.items():
            if "id" in columns and table not in {"meta", "api_keys"}:
                # Ids were copied: the next one made here must come after them, and a line's
                # after every id the source gave out (its removed lines' too).
                given = int(_last_line_id(source)) if table == "lines" else 0
                db.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"GREATEST(COALESCE((SELECT MAX(id) FROM {table}), 0), {given}) + 1, false)"
                )
        from membot.store.postgres_vectors import hnsw_index_sql  # psycopg is optional

        dimension = db.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
        if dimension:  # the approximate index a store gets with its first vectors
            db.execute(hnsw_index_sql(int(dimension[0])))
        copied = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
        _check_counts(counts, copied)  # raising here rolls the copy back
    return copied


# -- both ---------------------------------------------------------------------------------


def read_tables(store: Store, table: str) -> Iterator[list[Row]]:
    """A table's rows in batches, in the plain form both stores write."""
    if isinstance(store, SqliteStore):
        return _read_sqlite(store, table)
    return _read_postgres(store, table)


def table_counts(store: Store) -> dict[str, int]:
    """Rows per copied table."""
    return {table: sum(len(rows) for rows in read_tables(store, table)) for table in TABLES}


def copy_store(source: Store, destination: Store, replace: bool = False) -> CopyReport:
    """Copy everything ``source`` holds into ``destination``, which must hold nothing
    (``replace``: whatever it holds is removed first, in the same transaction)."""
    if source is destination or source.location == destination.location:
        raise ConfigError("the source and the destination are the same store")
    counts = table_counts(source)
    held = {
        table: count
        for table, count in table_counts(destination).items()
        if count and table != "meta"
    }
    if held and not replace:
        shown = ", ".join(f"{count} {table}" for table, count in held.items())
        raise ConfigError(
            f"{destination.location} is not empty ({shown}): copy into an empty store, or "
            "pass --replace to remove what it holds first"
        )
    if isinstance(destination, SqliteStore):
        return CopyReport(counts, _load_sqlite(destination, source, replace, counts))
    return CopyReport(counts, _load_postgres(destination, source, replace, counts))


def _check_counts(source: dict[str, int], copied: dict[str, int]) -> None:
    wrong = sorted(t for t in TABLES if t != "meta" and copied[t] != source[t])
    if wrong:
        raise StoreError(f"the copy's counts differ from the source's in {wrong}: nothing copied")


def migrate_store(source: str, destination: str, replace: bool = False) -> CopyReport:
    """Copy the store at ``source`` (a path or URL) into the one at ``destination``, made if
    new: ``membot migrate``."""
    from membot.store import open_store

    source_store = open_store(source, existing=True)  # a typo made an empty one, "copied"
    try:
        destination_store = open_store(destination)
        try:
            return copy_store(source_store, destination_store, replace)
        finally:
            destination_store.close()
    finally:
        source_store.close()

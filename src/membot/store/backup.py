"""Backing up a SQLite store while it is in use, and restoring a backup (``membot backup``,
``membot restore``).

A backup is SQLite's online backup of the store, read in one read transaction: in WAL mode
writers go on meanwhile (a running ``membot serve`` is not held up) and the copy is the store
as one moment saw it, every line with its vector and lexical row. It is written beside its
destination under a temporary name and renamed only once it is whole and has passed SQLite's
integrity check, so a backup stopped halfway leaves nothing that looks like a backup.

Restoring copies a backup back through the same API into the store's own connection: one
write transaction, so a restore stopped halfway leaves the store as it was, and processes
that hold the store open see the restored one at their next read. PostgreSQL has its own
tools for both (``pg_dump``, ``pg_restore``).
"""

from __future__ import annotations

import os
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from membot.errors import ConfigError, StoreError
from membot.store import is_postgres_url, open_store, sqlite_path
from membot.store.migrations import ALL_BOTS_MOVED, LAST_LINE_ID, MIGRATIONS
from membot.store.sqlite import BUSY_TIMEOUT_SECONDS, SqliteStore
from membot.store.sqlite_driver import sqlite3

PG_DUMP_HINT = (
    "membot backup copies SQLite stores; back up a PostgreSQL store with its own tools, e.g. "
    "`pg_dump --format=custom --file membot.dump 'URL'` (while servers keep writing: "
    "pg_dump reads one snapshot) and `pg_restore --clean --dbname 'URL' membot.dump`"
)


@dataclass(frozen=True)
class BackupReport:
    """What a backup (or a restored store) holds."""

    path: str
    lines: int
    summaries: int
    size_bytes: int


def restore_target(location: str | Path) -> Path:
    """The SQLite file a restore into ``location`` would replace, to name it before asking
    (a ``postgresql://`` URL, password and all, was put in the question, and only then
    refused): ``ConfigError`` for a PostgreSQL store, which pg_dump backs up."""
    if is_postgres_url(location):
        raise ConfigError(PG_DUMP_HINT)
    return sqlite_path(str(location)).absolute()


def _sqlite_store(location: str | Path) -> SqliteStore:
    if is_postgres_url(location):
        raise ConfigError(PG_DUMP_HINT)
    store = open_store(location)
    if not isinstance(store, SqliteStore):  # pragma: no cover - open_store knows two kinds
        store.close()
        raise ConfigError(PG_DUMP_HINT)
    return store


def _counts(db: sqlite3.Connection) -> tuple[int, int]:
    lines = db.execute("SELECT COUNT(*) FROM lines").fetchone()[0]
    return lines, db.execute("SELECT COUNT(*) FROM memories").fetchone()[0]


def _check_copy(db: sqlite3.Connection, path: Path) -> None:
    """A whole, uncorrupted membot store that this membot can open."""
    try:
        problems = [row[0] for row in db.execute("PRAGMA integrity_check")]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        has_lines = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lines'"
        ).fetchone()
    except sqlite3.DatabaseError as error:
        raise StoreError(f"{path} is not a SQLite database: {error}") from error
    if problems != ["ok"]:
        raise StoreError(f"{path} fails SQLite's integrity check: {'; '.join(problems[:3])}")
    if not has_lines or version < 1:
        raise StoreError(f"{path} is not a membot store")
    if version > len(MIGRATIONS):
        raise StoreError(f"{path} was made by a newer membot (schema {version}): upgrade membot")


def backup_store(
    store: str | Path, destination: str | Path, *, replace: bool = False
) -> BackupReport:
    """Copy the SQLite store at ``store`` (a path or ``sqlite:///`` URL) to the file
    ``destination``, safely while other processes write to it. An existing ``destination``
    is refused unless ``replace``; it is swapped for the new backup only once that is whole."""
    target = Path(destination).expanduser()
    if target.exists() and not replace:
        raise ConfigError(f"{target} exists: choose another name, or pass --replace")
    if target.is_dir():
        raise ConfigError(f"{target} is a folder: give the backup file's name")
    source = _sqlite_store(store)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with closing(sqlite3.connect(partial)) as copy:
            with source._lock:
                source._db.backup(copy)  # one step: one read transaction, one moment's store
            # A backup is one self-contained file: no -wal beside it.
            copy.execute("PRAGMA journal_mode = DELETE")
            _check_copy(copy, partial)
            lines, summaries = _counts(copy)
        _durable_rename(partial, target)
    except (OSError, sqlite3.Error) as error:
        raise StoreError(f"backing up {source.path} to {target} failed: {error}") from error
    finally:
        source.close()
        partial.unlink(missing_ok=True)
    return BackupReport(str(target), lines, summaries, target.stat().st_size)


def _durable_rename(partial: Path, target: Path) -> None:
    """The copy on disk, then its name: a power cut leaves the old file or the new one."""
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, target)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def restore_store(backup: str | Path, store: str | Path) -> BackupReport:
    """Replace everything the SQLite store at ``store`` holds with the backup ``backup``
    (checked first), in one transaction. Whatever the store held is gone, lines said since
    the backup included; what was forgotten since it was taken comes back."""
    source_path = Path(backup).expanduser()
    if not source_path.is_file():
        raise ConfigError(f"no backup at {source_path}")
    with closing(sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)) as source:
        _check_copy(source, source_path)
        destination = _sqlite_store(store)
        try:
            generation = destination.generation()
            given = destination.last_line_id()
            with destination._lock, destination._writers.held(BUSY_TIMEOUT_SECONDS):
                source.backup(destination._db)
            # Processes holding the store reload what they keep in memory (vectors by
            # scope) when the generation moves: past both the store's and the backup's.
            restored = destination.generation()
            moved = str(max(generation, restored) + 1)
            # Lines said since the backup are gone: their ids are never given again.
            last = str(max(given, destination.last_line_id()))
            destination.set_meta({"generation": moved, ALL_BOTS_MOVED: moved, LAST_LINE_ID: last})
        except sqlite3.Error as error:
            raise StoreError(f"restoring {source_path} failed: {error}") from error
        finally:
            destination.close()
    reopened = _sqlite_store(store)  # a backup of an older schema is brought up to date
    try:
        with reopened._lock:
            lines, summaries = _counts(reopened._db)
        return BackupReport(str(reopened.path), lines, summaries, reopened.path.stat().st_size)
    finally:
        reopened.close()

"""Storage: the ``Store`` protocol, the embedded SQLite store, the PostgreSQL store, and
opening a store by URL."""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from membot.errors import ConfigError, NotFoundError
from membot.store.base import (
    BufferEntry,
    NewLine,
    SourceKey,
    Store,
    ThreadKey,
    VectorRows,
    VectorSnapshot,
)
from membot.store.sqlite import SqliteStore

if TYPE_CHECKING:  # psycopg is optional: imported where a postgresql:// store is opened
    from membot.store.postgres import PostgresStore

POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(location: str | Path) -> bool:
    scheme, marker, _ = str(location).strip().partition("://")
    return bool(marker) and scheme.lower() in POSTGRES_SCHEMES


def postgres_url(location: str | Path) -> str:
    """A ``postgresql://`` URL as libpq reads it: spaces around it dropped, its scheme in
    lower case (" postgresql://…" and "Postgresql://…" reached libpq as they were, which
    echoed the whole string, password and all, in its error)."""
    scheme, _, rest = str(location).strip().partition("://")
    return f"{scheme.lower()}://{rest}"


# libpq's other form, "host=… dbname=… password=…": not taken (a URL is), and never echoed.
_KEYWORD_CONNINFO = re.compile(r"^\s*(host|hostaddr|dbname|user|password|port|service)\s*=")


def open_postgres(url: str, schema: str | None = None) -> PostgresStore:
    """A :class:`~membot.store.postgres.PostgresStore` (imported here: psycopg is optional)."""
    try:
        from membot.store.postgres import PostgresStore
    except ImportError as error:
        raise ConfigError(
            f"a postgresql:// store needs psycopg, psycopg-pool and pgvector ({error.name} is "
            "missing): pip install 'membot[postgres]'"
        ) from error
    return PostgresStore(url, schema=schema)


def open_store(location: str | Path, *, existing: bool = False) -> Store:
    """The store at ``location``: a file path, ``sqlite:PATH`` or ``sqlite:///PATH``
    (SQLite, the default), or ``postgresql://…`` (PostgreSQL with pgvector). Other schemes
    are refused with the list of those known. With ``existing``, a SQLite file that is not
    there is an error, not a new store (a store to copy from, say)."""
    if not isinstance(location, str | Path):
        raise TypeError(f"a store's location is a path or URL, got {type(location).__name__}")
    text = str(location)
    if is_postgres_url(text):
        return open_postgres(postgres_url(text))
    if _KEYWORD_CONNINFO.match(text):
        raise ConfigError(
            "that looks like a PostgreSQL key=value connection string: membot takes a URL, "
            "postgresql://USER:PASSWORD@HOST/DATABASE (a socket folder: ?host=/FOLDER)"
        )
    path = sqlite_path(text)
    if existing and not path.exists():
        raise NotFoundError(f"no store at {path}")
    return SqliteStore(path)


def sqlite_path(text: str) -> Path:
    """The file a SQLite store's location names (see :func:`open_store`)."""
    if text.startswith("sqlite:") and not text.startswith("sqlite://"):
        if not text[len("sqlite:") :]:
            raise ConfigError("a SQLite store is sqlite:PATH or sqlite:///PATH, got 'sqlite:'")
        return Path(text[len("sqlite:") :]).expanduser()
    if "://" not in text:
        return Path(text).expanduser()
    url = urlparse(text)
    if url.scheme == "sqlite":
        # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy reads them.
        path = unquote(url.path[1:] if url.path.startswith("/") else url.path)
        if url.netloc or not path:
            raise ConfigError(f"a SQLite URL is sqlite:///PATH, got {text!r}")
        return Path(path).expanduser()
    raise ConfigError(
        f"membot cannot open a store at a {url.scheme}:// URL: give a file path, "
        "sqlite:///PATH or postgresql://USER@HOST/DATABASE"
    )


@contextmanager
def temporary_store(near: str | Path | None = None) -> Iterator[Store]:
    """A store of its own, removed afterwards: with a ``postgresql://`` URL, a new schema in
    that database (dropped after); otherwise a SQLite file in a temporary folder."""
    if near is not None and is_postgres_url(near):
        store = open_postgres(postgres_url(near), schema=f"membot_scratch_{uuid.uuid4().hex[:12]}")
        try:
            yield store
        finally:
            store.drop()
        return
    with tempfile.TemporaryDirectory(prefix="membot-scratch-") as folder:
        scratch = SqliteStore(Path(folder) / "scratch.db")
        try:
            yield scratch
        finally:
            scratch.close()


__all__ = [
    "BufferEntry",
    "NewLine",
    "SourceKey",
    "SqliteStore",
    "Store",
    "ThreadKey",
    "VectorRows",
    "VectorSnapshot",
    "is_postgres_url",
    "open_postgres",
    "open_store",
    "temporary_store",
]

"""Storage: the ``Store`` protocol, the embedded SQLite store, and opening a store by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from membot.errors import ConfigError
from membot.store.base import BufferEntry, NewLine, SourceKey, Store, ThreadKey, VectorRows
from membot.store.sqlite import SqliteStore


def open_store(location: str | Path) -> Store:
    """The store at ``location``: a file path or ``sqlite:///PATH`` (SQLite, the default).
    Other schemes are refused with the list of those known."""
    text = str(location)
    if "://" not in text:
        return SqliteStore(Path(text).expanduser())
    url = urlparse(text)
    if url.scheme == "sqlite":
        # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy reads them.
        path = unquote(url.path[1:] if url.path.startswith("/") else url.path)
        if url.netloc or not path:
            raise ConfigError(f"a SQLite URL is sqlite:///PATH, got {text!r}")
        return SqliteStore(Path(path).expanduser())
    raise ConfigError(
        f"membot cannot open a store at a {url.scheme}:// URL: give a file path or "
        "sqlite:///PATH (PostgreSQL is not supported by this version)"
    )


__all__ = [
    "BufferEntry",
    "NewLine",
    "SourceKey",
    "SqliteStore",
    "Store",
    "ThreadKey",
    "VectorRows",
    "open_store",
]

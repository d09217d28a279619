"""Storage: the ``Store`` protocol and the embedded SQLite store."""

from membot.store.base import BufferEntry, NewLine, Store, ThreadKey, VectorRows
from membot.store.sqlite import SqliteStore

__all__ = ["BufferEntry", "NewLine", "SqliteStore", "Store", "ThreadKey", "VectorRows"]

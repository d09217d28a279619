"""The SQLite library that opens every membot SQLite file: the one bundled by the
``sqlean.py`` package, never the one Python happens to be linked with.

Why not the standard library's ``sqlite3``: its SQLite is whatever the system ships (3.40.1 on
Debian 12), and membot needs what older SQLites lack or get wrong. FTS5's ``secure-delete``
option (3.42) removes a forgotten line's words from the full-text index as the line goes;
without it they stay in the index's segments until an ``optimize`` merges them, and the FTS5
of 3.40.1 adds levels to its index at each such ``optimize`` until, at 2,000, it calls the
index corrupt — a server forgetting a thread every few seconds got there in eight minutes
(docs/reliability.md, the soak; tests/store/test_forget_churn.py). ``sqlean.py`` is a drop-in
build of the same module with a recent SQLite (3.50.4), as wheels for Linux, macOS and
Windows; its extra SQL functions stay off unless ``SQLEAN_ENABLE`` is set.

Every module, test and benchmark that opens a membot file imports ``sqlite3`` from here: two
different SQLite libraries in one process must never open the same file, since each keeps
its own table of POSIX locks and closing a file in one would drop the other's locks.
"""

from __future__ import annotations

from sqlean import dbapi2 as sqlite3

__all__ = ["sqlite3"]

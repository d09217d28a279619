"""One turn of a thread at a time on PostgreSQL, across processes and machines.

Two turns of one thread at once (two ``membot serve`` processes behind one database, or the
command line beside a server) stored their lines in the order they came and their replies in
the order the model finished, so a reply could follow the other turn's line. A turn now
holds a transaction-level advisory lock (``pg_advisory_xact_lock``), keyed by a hash of the
store's schema and the thread's key, from storing its line to storing its reply, in a
transaction left open on a connection of a small pool of its own.

A transaction-level lock is the kind that survives PgBouncer's transaction pooling
(docs/deploy.md): the server session belongs to the client while its transaction is open,
and the lock ends with the transaction, so no unlock can reach another client's session (a
session lock's did). A process that dies mid-turn loses its connection, and PostgreSQL ends
the transaction and the lock with it.

Each turn being answered holds one connection, idle in its transaction, while the model
writes: ``MEMBOT_PG_TURN_POOL`` (default :data:`DEFAULT_TURN_POOL`) turns at once per
process; more wait for a connection. A turn that waits past ``TURN_WAIT_SECONDS``, for a
connection or for the other turn, gets a clear error.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from membot.errors import StoreError
from membot.store.sqlite_lock import ALL_OR_NONE_ROUNDS, TURN_WAIT_SECONDS, thread_digest

log = logging.getLogger(__name__)

# How long the pools go on trying one connection while the database is down, with pauses
# that double each time. psycopg's 300 s let a pause grow to minutes: after a 4-minute outage
# the first request waited 20 s past the database's return (benchmarks/pg_outage.py). Past
# this the attempt ends, and the next request begins a new one at once.
RECONNECT_SECONDS = 10.0

DEFAULT_TURN_POOL = 8
# The first of the two keys of every turn lock: membot's turns, apart from other programs'
# advisory locks on the database (the migrations' one-key lock is another space already).
TURN_LOCK_CLASS = 0x6D62


class PostgresTurnLocks:
    """Turn locks for the store at ``url`` (in ``schema``), on a pool opened at first use."""

    def __init__(
        self, url: str, kwargs: dict[str, Any], schema: str | None, size: int | None = None
    ) -> None:
        self.url, self.kwargs, self.schema = url, kwargs, schema
        self.size = size or int(os.environ.get("MEMBOT_PG_TURN_POOL", DEFAULT_TURN_POOL))
        self._pool: ConnectionPool | None = None
        self._opening = threading.Lock()

    def key(self, thread_key: tuple[str, ...]) -> int:
        """The lock's second key: 32 bits of a hash of the schema and the thread's names."""
        digest = thread_digest((self.schema or "", *thread_key))
        return int.from_bytes(digest[:4], "big", signed=True)

    @contextmanager
    def held(
        self, *thread_keys: tuple[str, ...], timeout: float = TURN_WAIT_SECONDS
    ) -> Iterator[None]:
        """Hold the locks of ``thread_keys`` (one thread's for a turn, an import batch's
        threads) in one transaction (see :func:`_lock`)."""
        deadline = time.monotonic() + timeout
        pool = self._open_pool()
        try:
            connection = pool.getconn(timeout=timeout)
        except PoolTimeout as error:
            raise StoreError(
                f"no connection for this turn within {timeout:g} s: all {self.size} of the "
                "turn locks' connections (MEMBOT_PG_TURN_POOL) were in use by turns under way, "
                f"or the database refused a new one ({error}); try again"
            ) from error
        try:
            left = max(deadline - time.monotonic(), 0.001)
            busy = f"another turn of this thread is still being answered after {timeout:g} s"
            _lock(connection, sorted({self.key(key) for key in thread_keys}), left, busy)
            yield
        finally:
            _end(connection)
            pool.putconn(connection)

    def _open_pool(self) -> ConnectionPool:
        with self._opening:
            if self._pool is None:
                # Checked as handed out, as the store's pool is: after a restart of
                # PostgreSQL, each dead connection refused a turn before it was replaced.
                self._pool = ConnectionPool(
                    self.url,
                    min_size=0,
                    max_size=self.size,
                    kwargs=self.kwargs,
                    check=ConnectionPool.check_connection,
                    reconnect_timeout=RECONNECT_SECONDS,
                    open=True,
                )
            return self._pool

    def close(self) -> None:
        with self._opening:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


# A model's reply may take 90 s with its retries: a shorter idle-in-transaction timeout ends
# a turn's lock while the model writes.
_LONGEST_REPLY_MS = 120_000


def warn_of_short_idle_timeout(connection: psycopg.Connection) -> str | None:
    """A warning (also logged) when the database ends transactions left idle sooner than a
    model's reply may take, which would let a second turn of a thread in; None otherwise."""
    row = connection.execute(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'"
    ).fetchone()
    limit = int(row[0]) if row else 0
    if not 0 < limit < _LONGEST_REPLY_MS:
        return None
    warning = (
        f"idle_in_transaction_session_timeout is {limit / 1000:g} s on this database: a turn "
        "whose model writes longer loses its thread's lock, and a second turn of the thread "
        "may come between its line and its reply; set it to 0 or over 2 minutes for membot"
    )
    log.warning(warning)
    return warning


def _lock(connection: psycopg.Connection, keys: list[int], timeout: float, busy: str) -> None:
    """Open the transaction and take the turn locks ``keys`` in it, for up to ``timeout``
    seconds in all. Several are first taken all at once or none: while one is busy none is
    held (an import waiting for one thread's reply holds up no other thread), and the busy
    one is waited for before all are tried again. After ``ALL_OR_NONE_ROUNDS`` such tries
    (a busy server, where single turns would always win) they are taken in key order, each
    waited for, so holders of several never wait on each other in a circle either way."""
    deadline = time.monotonic() + timeout
    try:
        for _ in range(ALL_OR_NONE_ROUNDS if len(keys) > 1 else 0):
            _begin(connection, deadline)
            waiting = next((key for key in keys if not _try(connection, key)), None)
            if waiting is None:
                return
            connection.execute("ROLLBACK")  # lets go of those taken
            _begin(connection, deadline)
            connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (TURN_LOCK_CLASS, waiting))
            connection.execute("ROLLBACK")
        _begin(connection, deadline)
        for key in keys:  # in order, each waited for
            connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (TURN_LOCK_CLASS, key))
    except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as error:
        raise StoreError(f"{busy}; try again") from error
    except psycopg.Error as error:
        raise StoreError(f"the store could not hold this thread's turn: {error}") from error


def _begin(connection: psycopg.Connection, deadline: float) -> None:
    """A transaction whose waits for a lock end at ``deadline``, whatever the database's or
    role's own timeouts (a short statement_timeout would cut them short)."""
    connection.execute("BEGIN")
    wait = f"{max((deadline - time.monotonic()) * 1000, 1):.0f}"
    for setting in ("lock_timeout", "statement_timeout"):
        connection.execute("SELECT set_config(%s, %s, true)", (setting, wait))


def _try(connection: psycopg.Connection, key: int) -> bool:
    row = connection.execute(
        "SELECT pg_try_advisory_xact_lock(%s, %s)", (TURN_LOCK_CLASS, key)
    ).fetchone()
    return bool(row and row[0])


def _end(connection: psycopg.Connection) -> None:
    """End the turn's transaction, and its lock; a connection that broke meanwhile (an
    operator's ``idle_in_transaction_session_timeout``) lost the lock already."""
    try:
        connection.execute("ROLLBACK")
    except psycopg.Error as error:
        log.warning("a turn lock's connection broke before the turn ended: %s", error)

"""One writer at a time across processes, for a SQLite store and its checkpoints.

SQLite already lets one transaction write at a time. This lock also keeps a checkpoint (the
write-ahead log copied into the file and emptied, which forgetting asks for) from running
while another process commits: SQLite 3.7.0 to 3.51.2 can corrupt a WAL database when a
checkpoint that follows another one overlaps a commit from another connection (the
"WAL-reset" bug, fixed in 3.51.3), and membot's SQLite is 3.50.4. Every membot write and
checkpoint takes this lock, an advisory ``flock`` on ``<store>-lock`` beside the file, so
membot's own processes never race that way; other programs writing the file do not take it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from membot.errors import StoreError


class ProcessWriteLock:
    """An exclusive ``flock`` held while a block runs; waits up to ``timeout`` seconds."""

    def __init__(self, store_path: Path) -> None:
        self.path = Path(f"{store_path}-lock")
        self._fd: int | None = None
        self._local = threading.RLock()  # one fd per store object: its threads take turns
        self._depth = 0  # held already by this thread: a nested block does not lock again

    @contextmanager
    def held(self, timeout: float) -> Iterator[None]:
        with self._local:
            if self._depth == 0:
                self._acquire(timeout)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _acquire(self, timeout: float) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        busy = (
            f"the store at {str(self.path)[:-5]} is busy: another process held it for over "
            f"{timeout:g} s; try again"
        )
        _flock(self._fd, timeout, 0.002, busy)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# How long a turn waits for another turn of its thread (a model's reply, retries included,
# is given 90 s): past it, a clear error rather than a turn stuck behind a stuck one.
TURN_WAIT_SECONDS = 180.0
# Tries at taking several turn locks all at once before taking them in order (see held).
ALL_OR_NONE_ROUNDS = 3


class TurnLocks:
    """One turn of a thread at a time, across threads and processes: ``membot serve
    --workers 2``, the command line and the library on one store. Two turns of a thread at
    once stored their lines, then their replies, so a reply could follow the other turn's
    line. A turn holds an exclusive ``flock`` on one of ``BUCKETS`` files in
    ``<store>-turns``, picked by a hash of the thread's key (its names are not written
    anywhere): each hold opens the file anew, so two holders in one process exclude each
    other as two processes do; two threads in one bucket merely take turns."""

    BUCKETS = 256

    def __init__(self, store_path: Path) -> None:
        self.folder = Path(f"{store_path}-turns")

    @contextmanager
    def held(self, *keys: tuple[str, ...], timeout: float = TURN_WAIT_SECONDS) -> Iterator[None]:
        """Hold the buckets of ``keys`` (one thread's for a turn, an import batch's threads).
        Several are first taken all at once or none: while one is busy, the others are let
        go until it is free, so an import waiting for one thread's reply holds up no other
        thread. After ``ALL_OR_NONE_ROUNDS`` such tries (a busy server, where single turns
        would always win), they are taken in bucket order, waiting for each: holders of
        several never wait on each other in a circle either way."""
        buckets = sorted({self.bucket(key) for key in keys})
        self.folder.mkdir(mode=0o700, exist_ok=True)
        busy = f"another turn of this thread is still being answered after {timeout:g} s; try again"
        deadline = time.monotonic() + timeout
        fds: list[int] = []
        try:
            for _ in range(ALL_OR_NONE_ROUNDS if len(buckets) > 1 else 0):
                waiting = self._take_all(buckets, fds)
                if waiting is None:
                    break
                fd = self._open(waiting)  # wait till it is free, then try them all again
                try:
                    _flock(fd, max(deadline - time.monotonic(), 0.0), 0.01, busy)
                finally:
                    os.close(fd)
            else:
                for bucket in buckets:  # in order, each waited for
                    fds.append(self._open(bucket))
                    _flock(fds[-1], max(deadline - time.monotonic(), 0.0), 0.01, busy)
            yield
        finally:
            for fd in fds:
                os.close(fd)  # the lock goes with the descriptor

    def _take_all(self, buckets: list[int], fds: list[int]) -> int | None:
        """Lock every bucket without waiting, their descriptors put in ``fds``; on the first
        busy one, let the others go and return it."""
        for bucket in buckets:
            fd = self._open(bucket)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                while fds:
                    os.close(fds.pop())
                return bucket
            except OSError:
                os.close(fd)
                raise
            fds.append(fd)
        return None

    def _open(self, bucket: int) -> int:
        return os.open(self.folder / f"{bucket:03d}", os.O_RDWR | os.O_CREAT, 0o600)

    def bucket(self, key: tuple[str, ...]) -> int:
        return int.from_bytes(thread_digest(key)[:4], "big") % self.BUCKETS


def thread_digest(parts: tuple[str, ...]) -> bytes:
    """A hash of a thread's names, for a turn lock's key: the names are not written."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()


def _flock(fd: int, timeout: float, pause: float, busy: str) -> None:
    """An exclusive ``flock`` on ``fd``, tried every ``pause`` seconds; ``StoreError`` saying
    ``busy`` past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreError(busy) from None
            time.sleep(pause)

"""A bot's approximate index built again in a child process, while the server answers.

After lines of a bot that shares memory were forgotten (or the bot's vectors replaced), its
usearch graph must be built again from the store: the lines gone are only marked in the old
graph, their bytes stay. That build takes seconds to a minute (45 s at a million lines on 2
cores) and holds Python's lock the whole time, so it runs here, in a process of its own at a
lower priority and on one core, while the processes serving turns go on answering from their
old graphs with the removed lines taken out
(:class:`membot.store.approximate_sqlite.UsearchNominator`). It saves the graph beside the
store, where every process loads it.

    python -m membot.store.approximate_build STORE BOT_ID

One build per bot at a time: a second child waits for the first, then finds its file
current and stops. If the bot's lines moved again while it built, its file (which may hold
lines forgotten since) is removed, and the process that started it starts another.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import time
from pathlib import Path

from membot.store.approximate_sqlite import UsearchNominator
from membot.store.sqlite import SqliteStore

EXIT_FAILED = 1


def build(store_path: Path, bot_id: int) -> int | None:
    """Build and save the bot's graph; the lines it holds, or None when nothing was saved
    (found saved and current already, or lines went while it built)."""
    store = SqliteStore(store_path)
    try:
        folder = Path(f"{store_path}.ann")
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"bot-{bot_id}.build-lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another child building it: wait for its file
            nominator = UsearchNominator(store, bot_id, add_threads=1)
            if nominator.saved_is_current():  # another process's child built it meanwhile
                return None
            index = nominator.refresh()  # loads a current file, or builds from the store
            nominator.save()  # removed again if lines went while it built: they may be in it
            return len(index) if nominator.path.exists() else None
    finally:
        store.close()


def _peak_mb() -> int:
    """This process's peak resident memory (VmHWM: ``ru_maxrss`` carries the parent's over)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m membot.store.approximate_build STORE BOT_ID", file=sys.stderr)
        return EXIT_FAILED
    with contextlib.suppress(OSError):
        os.nice(10)  # the turns being served come first
    # Stopped with the server: a clean exit, so a half-written file is removed (save()).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(EXIT_FAILED))
    started = time.perf_counter()
    try:
        lines = build(Path(argv[0]), int(argv[1]))
    except Exception as error:  # reported to the parent by the exit status
        print(f"membot: building bot {argv[1]}'s approximate index failed: {error}",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    if lines is not None:  # what an operator reads in the server's log
        print(f"membot: built the approximate index of bot {argv[1]}: {lines:,} lines in "
              f"{time.perf_counter() - started:.1f} s (peak {_peak_mb():,} MB)",
              file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""How long a PostgreSQL store takes to answer again after the database was down.

A private PostgreSQL (``pgserver``, in a temporary folder) holds a store; the database is
stopped for ``--seconds`` while a caller keeps asking the store (each call waits for the
pool's 30 s, then fails), then started again; the script prints how long after the restart
the first call is answered.

    .venv/bin/python benchmarks/pg_outage.py --seconds 240
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import tempfile
import time
from pathlib import Path

from machine import announce

from membot.errors import StoreError
from membot.store.postgres import PostgresStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0, help="how long it is down")
    args = parser.parse_args()
    announce()
    logging.disable(logging.WARNING)  # the pool logs every failed attempt
    folder = Path(tempfile.mkdtemp(prefix="membot-outage-"))
    os.environ["XDG_RUNTIME_DIR"] = str(folder)
    import pgserver  # reads XDG_RUNTIME_DIR when imported
    from pgserver.postgres_server import get_server

    data = folder / "data"
    server = get_server(data, cleanup_mode="delete")
    pg_ctl = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    # As root, pgserver runs PostgreSQL as its own user, which must also stop and start it.
    as_owner = ["runuser", "-u", "pgserver", "--"] if os.geteuid() == 0 else []

    def pg(*words: str) -> None:
        subprocess.run([*as_owner, str(pg_ctl), "-D", str(data), "-w", *words],
                       check=True, capture_output=True)  # fmt: skip

    store = PostgresStore(server.get_uri())
    store.bots()
    pg("-m", "fast", "stop")
    down = time.monotonic()
    failed = 0
    while time.monotonic() - down < args.seconds:
        try:
            store.bots()
        except StoreError:
            failed += 1
        time.sleep(1)
    pg("-o", f'-h "" -k {data}', "-l", str(data / "restart.log"), "start")
    up = time.monotonic()
    while True:
        try:
            store.bots()
            break
        except StoreError:
            failed += 1
    print(
        f"down {args.seconds:.0f} s ({failed} calls failed): the first call after the restart "
        f"was answered {time.monotonic() - up:.1f} s after it"
    )
    store.close()
    server.cleanup()


if __name__ == "__main__":
    main()

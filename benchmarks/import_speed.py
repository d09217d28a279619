"""Import speed from an empty embedding cache: the LoCoMo dev file (2,760 lines) into a fresh
store, as ``membot import`` stores it, for each embedder named.

    .venv/bin/python benchmarks/import_speed.py [--embedder minilm --embedder minilm-int8]
        [--runs 3]

Each run is a new process with a new store and a new, empty embedding cache; the models are
exported (once, into the usual cache folder) and loaded before the clock starts, and their
load time is printed apart. Printed per run: wall seconds, lines per second, and the CPU
seconds of the process (all its threads), with the load average before and after, since on a
shared machine the wall time says as much about the neighbours as about membot. The script
uses only membot's public API, so it measures an older membot too:
``PYTHONPATH=OLD_CHECKOUT/src python benchmarks/import_speed.py --embedder minilm``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot import Memory, read_file, resolve_embedder
from membot.eval import shared_data_dir

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def one_run(spec: str, lines: list, folder: Path) -> tuple[float, float, float]:
    """(load seconds, import wall seconds, import CPU seconds) into a fresh store and cache."""
    started = time.perf_counter()
    embedder = resolve_embedder(spec, cache_path=folder / "embeddings.db")
    memory = Memory(folder / "import.db", embedder=embedder)
    embedder.inner.embed(["load the model"])  # the model, not the cache: it stays empty
    memory.tokens.count("load the tokenizer")
    loaded = time.perf_counter() - started
    wall, cpu = time.perf_counter(), time.process_time()
    added = memory.add_many(lines)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert added == len(lines) == memory.count_lines(), (added, len(lines))
    memory.close()
    return loaded, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", action="append", help="minilm, minilm-int8, ...")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a run, in its own process
    args = parser.parse_args()
    lines = read_file(LOCOMO, "locomo", "membot", None).lines
    if args.one:
        with tempfile.TemporaryDirectory(prefix="membot-import-") as folder:
            print(json.dumps(one_run(args.one, lines, Path(folder))))
        return
    announce()
    print(f"{len(lines)} LoCoMo dev lines, {os.cpu_count()} cores")
    for spec in args.embedder or ["minilm", "minilm-int8"]:
        rates = []
        for run in range(1, args.runs + 1):
            load_before = os.getloadavg()[0]
            command = [sys.executable, __file__, "--one", spec]
            result = subprocess.run(command, check=True, capture_output=True, text=True)
            loaded, wall, cpu = json.loads(result.stdout.splitlines()[-1])
            rates.append(len(lines) / wall)
            print(
                f"{spec:<12} run {run}: {wall:5.1f} s, {rates[-1]:4.0f} lines/s "
                f"(CPU {cpu:5.1f} s; model load {loaded:.1f} s; load average "
                f"{load_before:.1f} -> {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        print(
            f"{spec:<12} median {statistics.median(rates):.0f} lines/s "
            f"(min {min(rates):.0f}, max {max(rates):.0f}, {len(rates)} runs)",
            flush=True,
        )


if __name__ == "__main__":
    main()

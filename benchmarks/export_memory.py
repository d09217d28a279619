"""Peak memory of importing a large ChatGPT export: a generated ``conversations.json`` of
200 MB (benchmarks/generated_exports.py) read as ``membot import`` reads it, as a stream.

    .venv/bin/python benchmarks/export_memory.py [--megabytes 200] [--embedder SPEC]

Each measurement is a new process, which prints its peak resident memory (ru_maxrss):
``baseline`` (membot imported, nothing read), ``read`` (every line of the export read, none
stored), ``import`` (every line stored in a new SQLite store, embedded by a stand-in that
returns a vector per line at once, since the bundled model would take an hour over 250,000
lines; ``--embedder minilm`` to use it anyway), and ``json.load`` (the file read whole, as a
reader that does not stream would: what the stream saves).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from generated_exports import write_export
from machine import announce

from membot import ChatExport, Memory


class StandInEmbedder:
    """A vector per text at once (from its hash): the import's own cost, without a model."""

    name = "stand-in-384"
    dimension = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        seeds = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest()) for t in texts]
        rows = np.stack([np.random.default_rng(seed).standard_normal(384) for seed in seeds])
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows.astype(np.float32)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(what: str, path: Path, folder: Path, embedder: str | None) -> dict[str, float]:
    started = time.perf_counter()
    lines = 0
    if what == "read":
        with ChatExport(path, None, bot="membot", user="ana") as export:
            lines = sum(1 for _ in export.lines())
    elif what == "import":
        memory = Memory(folder / "import.db", embedder=embedder or StandInEmbedder())
        with ChatExport(path, None, bot="membot", user="ana") as export:
            lines = memory.add_many(export.lines())
        memory.close()
    elif what == "json.load":
        lines = len(json.loads(path.read_bytes()))  # conversations, not lines
    return {"seconds": time.perf_counter() - started, "lines": lines, "peak_mb": peak_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=200)
    parser.add_argument("--embedder", help="an embedder spec instead of the stand-in")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # WHAT FILE, in a child
    args = parser.parse_args()
    if args.one:
        what, path = args.one
        with tempfile.TemporaryDirectory(prefix="membot-export-") as folder:
            print(json.dumps(measure(what, Path(path), Path(folder), args.embedder)))
        return
    announce()
    with tempfile.TemporaryDirectory(prefix="membot-export-") as folder:
        path = Path(folder) / "conversations.json"
        messages = write_export(path, megabytes=args.megabytes)
        size = path.stat().st_size / 1e6
        print(f"generated ChatGPT export: {size:.0f} MB, {messages} messages on current paths")
        for what in ("baseline", "read", "import", "json.load"):
            command = [sys.executable, __file__, "--one", what, str(path)]
            command += ["--embedder", args.embedder] if args.embedder else []
            result = subprocess.run(command, check=True, capture_output=True, text=True)
            got = json.loads(result.stdout.splitlines()[-1])
            rate = f", {got['lines'] / got['seconds']:,.0f} lines/s" if what == "import" else ""
            print(
                f"{what:<9} peak RSS {got['peak_mb']:6.0f} MB; {got['seconds']:6.1f} s, "
                f"{got['lines']:,} {'conversations' if what == 'json.load' else 'lines'}{rate}",
                flush=True,
            )


if __name__ == "__main__":
    main()

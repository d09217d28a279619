"""A ``pairs`` (or ``windows``) turn's cost for one person in a store where other people hold
many more lines: the turn's recall time and how many texts it embeds, on its first turn
(nothing held yet) and on the turns after it (a human line and the bot's reply added before
each, as a chat adds them).

A SQLite store in a temporary folder: ``--people`` other people with ``--lines`` lines each, in
threads of 50 alternating human and bot lines, and the person asked for with ``--own`` lines.
The embedder is a stand-in (a seeded random unit vector per text, 384 dimensions, no model),
so the times are recall's own work (reading lines, cutting units, searching) and the count of
texts embedded says what a real model would have been given.

    .venv/bin/python benchmarks/unit_scopes.py [--people 20] [--lines 1000] [--own 400]
        [--strategy pairs] [--turns 5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from machine import announce

from membot import LineInput, Memory, Role


class RandomEmbedder:
    """A seeded random unit vector per text; counts the texts it was given."""

    name = "random-384"
    dimension = 384

    def __init__(self) -> None:
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            row[:] = np.random.default_rng(seed).standard_normal(self.dimension)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def said(person: str, count: int) -> list[LineInput]:
    """``count`` lines of ``person``, 50 to a thread, a human line then the bot's reply."""
    roles = (Role.HUMAN, Role.BOT)
    return [LineInput(f"{person} says thing {n} about topic {n % 97}", user=person,
                      thread=f"t{n // 50}", role=roles[n % 2]) for n in range(count)]  # fmt: skip


def turn_ms(memory: Memory, embedder: RandomEmbedder, n: int) -> tuple[float, int]:
    """One turn of the person "ann": the recall's milliseconds and texts embedded."""
    line = memory.add(f"what did I say about topic {n}?", user="ann", thread="now")
    before, started = embedder.texts, time.perf_counter()
    memory.recall(line)
    elapsed = (time.perf_counter() - started) * 1000
    memory.add(f"you said thing {n}", user="ann", thread="now", role=Role.BOT)
    return elapsed, embedder.texts - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--own", type=int, default=400)
    parser.add_argument("--strategy", default="pairs", choices=("pairs", "windows"))
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    announce()
    with tempfile.TemporaryDirectory() as folder:
        embedder = RandomEmbedder()
        memory = Memory(Path(folder) / "membot.db", embedder=embedder, cache=False)
        memory.configure_bot("membot", strategy=args.strategy, threshold=0.0)
        for person in range(args.people):
            memory.add_many(said(f"person{person}", args.lines))
        memory.add_many(said("ann", args.own))
        first = turn_ms(memory, embedder, 0)
        later = [turn_ms(memory, embedder, n) for n in range(1, args.turns + 1)]
        memory.close()
    others = args.people * args.lines
    print(f"{args.strategy}, ann's {args.own} lines among {others} of {args.people} others:")
    print(f"first turn {first[0]:.1f} ms, {first[1]} texts embedded")
    print(f"later turns median {statistics.median(ms for ms, _ in later):.1f} ms, "
          f"{max(count for _, count in later)} texts embedded at most")  # fmt: skip


if __name__ == "__main__":
    main()

"""A turn's cost as the store grows: stores of 10k, 100k (and 1M) lines from 1,000 people,
where the person talking holds the lines of LoCoMo's first dev conversation.

Other people's lines are LoCoMo dev lines again, with their real MiniLM vectors (embedded
once), spread over 999 people in threads of 40; the search does the same work whatever the
words. Measured per size, on SQLite: the person's turn ``memory_total`` p50/p95 (blend, the
default; scripted LLM), the first turn after a fresh start (new process state: a new Memory
whose embedder is loaded, nothing of the store in memory), the process's peak RSS, the
store's bytes per line, and how fast the filler was written.

    .venv/bin/python benchmarks/scale.py [--sizes 10000 100000] [--turns 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from membot import Bot, Memory, ScriptedLLM
from membot.embed import default_embedder
from membot.eval import shared_data_dir
from membot.importers import read_file
from membot.model import Role
from membot.store import NewLine, ThreadKey

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
PEOPLE = 1000
THREAD_LINES = 40
BOT = "scale"
TALKER = "talker"


def corpus(memory: Memory) -> tuple[list, np.ndarray]:
    """The LoCoMo dev lines and their vectors (from the embedding cache when warm)."""
    plan = read_file(LOCOMO, "locomo", BOT, None)
    vectors = memory.embed([line.text for line in plan.lines])
    return plan.lines, vectors


def build(db: Path, size: int, lines: list, vectors: np.ndarray) -> float:
    """The talker's conversation, then filler up to ``size`` lines; lines per second."""
    memory = Memory(db)
    by = (memory.embedder.name, int(vectors.shape[1]))
    talker = [
        NewLine(
            ThreadKey(BOT, TALKER, line.thread),
            Role(line.role),
            line.text,
            vector,
            memory.tokens.count(line.text),
            line.created_at,
            line.speaker,
        )
        for line, vector in zip(lines, vectors, strict=True)
        if line.user == lines[0].user
    ]
    memory.store.add_lines(talker, by)
    started = time.perf_counter()
    written = len(talker)
    batch: list[NewLine] = []
    position = 0
    while written < size:
        index = position % len(lines)
        person = f"person-{position // THREAD_LINES % (PEOPLE - 1)}"
        thread = f"t{position // (THREAD_LINES * (PEOPLE - 1))}"
        line = lines[index]
        batch.append(
            NewLine(
                ThreadKey(BOT, person, thread),
                Role(line.role),
                line.text,
                vectors[index],
                12,
                line.created_at,
                line.speaker,
            )
        )
        position += 1
        written += 1
        if len(batch) == 5000 or written == size:
            memory.store.add_lines(batch, by)
            batch = []
    rate = (written - len(talker)) / max(time.perf_counter() - started, 1e-9)
    memory.close()
    return rate


def questions(count: int) -> list[tuple[str, str]]:
    data = json.loads(LOCOMO.read_text())
    return [(qa["question"], str(qa.get("answer", ""))) for qa in data[0]["qa"]][:count]


def measure(db: Path, turns: int) -> dict:
    memory = Memory(db, embedder=default_embedder())
    memory.warm_up()
    asked = questions(turns + 1)
    llm = ScriptedLLM([f"I think it was {answer}." for _, answer in asked])
    bot = Bot(memory, llm, name=BOT)
    timings = []
    for number, (question, _) in enumerate(asked):
        turn = bot.turn(question, user=TALKER, thread=f"asking-{number}")
        timings.append(turn.timings_ms)
    first, rest = timings[0], timings[1:]
    totals = sorted(t["memory_total"] for t in rest)
    return {
        "first_turn_ms": round(first["memory_total"], 1),
        "p50_ms": round(statistics.median(totals), 1),
        "p95_ms": round(totals[int(0.95 * (len(totals) - 1))], 1),
        "search_p50_ms": round(statistics.median(t["search"] for t in rest), 1),
        "scopes_held": len(memory.index.scopes_held()),
    }


def run(sizes: list[int], turns: int) -> list[dict]:
    reports = []
    with tempfile.TemporaryDirectory() as folder:
        lines, vectors = corpus(Memory(Path(folder) / "corpus.db"))
        for size in sizes:
            db = Path(folder) / f"scale-{size}.db"
            rate = build(db, size, lines, vectors)
            report = {"lines": size, "people": PEOPLE, "filler_lines_per_s": round(rate)}
            report["bytes_per_line"] = round(db.stat().st_size / size)
            report.update(measure(db, turns))
            report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            print(json.dumps(report), file=sys.stderr)
            reports.append(report)
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    reports = run(args.sizes, args.turns)
    if args.json:
        print(json.dumps(reports, indent=2))
        return
    print("lines      first turn  p50      p95      search p50  bytes/line  peak RSS")
    for r in reports:
        print(
            f"{r['lines']:>9,}  {r['first_turn_ms']:>7.1f} ms  {r['p50_ms']:>5.1f} ms  "
            f"{r['p95_ms']:>5.1f} ms  {r['search_p50_ms']:>6.1f} ms   {r['bytes_per_line']:>7}"
            f"     {r['peak_rss_mb']} MB"
        )


if __name__ == "__main__":
    main()

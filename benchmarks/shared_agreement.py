"""How far a large shared scope's approximate recall strays from exact recall: per LoCoMo
question, the lines a blended turn keeps when the scope is searched approximately (past
``MEMBOT_APPROXIMATE_FROM``: the index's nominees and their neighbours, BM25 of those lines)
against the lines it keeps when every line of the scope is scored exactly.

Runs on a store that ``benchmarks/scale.py`` built (its shared bot; kept under its cache
folder), each mode in a process of its own; recall only, nothing is written but the thread's
buffer:

    .venv/bin/python benchmarks/shared_agreement.py [--store sqlite] [--lines 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import scale
from machine import announce

from membot import Memory
from membot.embed import default_embedder
from membot.model import Line, Role

EXACT_FROM = 10**9  # MEMBOT_APPROXIMATE_FROM for the exact run: no scope is that large


def recalled(url: str, count: int) -> list[list[int]]:
    """The matches' line ids of each question's recall, in this process's mode."""
    memory = Memory(url, embedder=default_embedder())
    memory.configure_bot(scale.BOT, share_across_people=True)
    thread = "asking-shared-0"  # a thread scale.py's shared turns left; the feed is empty
    found = []
    for question, _ in scale.questions(count):
        line = Line(0, scale.BOT, scale.TALKER, thread, 10**6, Role.HUMAN, question,
                    datetime.now(UTC), 0)  # fmt: skip
        found.append([match.line.id for match in memory.recall(line).matches])
    memory.close()
    return found


def in_process(url: str, mode: str, count: int) -> list[list[int]]:
    environment = dict(os.environ)
    if mode == "exact":
        environment["MEMBOT_APPROXIMATE_FROM"] = str(EXACT_FROM)
    command = [sys.executable, __file__, "--recall", url, "--questions", str(count)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--lines", type=int, default=100_000, help="which scale.py store")
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--recall", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.recall:
        print(json.dumps(recalled(args.recall, args.questions)))
        return
    announce()
    url = scale.location(args.store, args.lines, scale.CACHE)
    exact = in_process(url, "exact", args.questions)
    approximate = in_process(url, "approximate", args.questions)
    shares, same_first = [], 0
    for wanted, got in zip(exact, approximate, strict=True):
        if wanted:
            shares.append(len(set(wanted) & set(got)) / len(wanted))
        same_first += bool(wanted and got and wanted[0] == got[0])
    print(
        f"{args.store}, {args.lines:,} lines, {len(exact)} questions: the approximate recall "
        f"keeps {statistics.mean(shares):.3f} of the exact recall's matches (mean over "
        f"{len(shares)} questions with any), the same best match in {same_first}; matches "
        f"a question: exact {statistics.mean(map(len, exact)):.1f}, approximate "
        f"{statistics.mean(map(len, approximate)):.1f}"
    )


if __name__ == "__main__":
    main()

"""Recall through a large shared scope, approximate against exact, measured by LoCoMo's gold
evidence: per question of LoCoMo's first dev conversation (the talker's lines in the stores
``benchmarks/scale.py`` builds), whether a blended recall's ``--matches`` matched lines hold
an evidence line of the question, once with the scope searched approximately (past
``MEMBOT_APPROXIMATE_FROM``: the index's nominees and their neighbours, BM25 of those lines)
and once with every line of the scope scored exactly, each in a process of its own.

The stores repeat the dev files' lines across people, so a line counts by its text: any
copy of an evidence line is a hit. Recall only: nothing is written but the thread's buffer.

    .venv/bin/python benchmarks/shared_recall.py [--store sqlite] [--lines 100000]
"""

from __future__ import annotations

import argparse
import json
import os
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


def gold() -> list[tuple[str, set[str]]]:
    """Each question of the first conversation with the texts of its evidence lines."""
    conversation = json.loads(scale.LOCOMO.read_text())[0]
    said = {
        turn["dia_id"]: turn["text"]
        for key, turns in conversation["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    }
    asked = []
    for qa in conversation["qa"]:
        texts = {said[ref] for ref in qa.get("evidence", []) if ref in said}
        if texts:
            asked.append((qa["question"], texts))
    return asked


def hits(url: str, matches: int) -> list[bool]:
    """Whether each question's recall, in this process's mode, matched an evidence line."""
    memory = Memory(url, embedder=default_embedder())
    settings = memory.bot_settings(scale.BOT).with_values(
        {"share_across_people": True, "max_matches": matches}
    )
    thread = "asking-shared-0"  # a thread scale.py's shared turns left; the feed is empty
    found = []
    for question, evidence in gold():
        line = Line(0, scale.BOT, scale.TALKER, thread, 10**6, Role.HUMAN, question,
                    datetime.now(UTC), 0)  # fmt: skip
        texts = {match.line.text for match in memory.recall(line, settings).matches}
        found.append(bool(texts & evidence))
    memory.close()
    return found


def in_process(url: str, mode: str, matches: int) -> list[bool]:
    environment = dict(os.environ)
    if mode == "exact":
        environment["MEMBOT_APPROXIMATE_FROM"] = str(EXACT_FROM)
    command = [sys.executable, __file__, "--hits", url, "--matches", str(matches)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--lines", type=int, default=100_000, help="which scale.py store")
    parser.add_argument("--matches", type=int, default=50)  # as in docs/deploy.md's table
    parser.add_argument("--hits", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hits:
        print(json.dumps(hits(args.hits, args.matches)))
        return
    announce()
    url = scale.location(args.store, args.lines, scale.CACHE)
    exact = in_process(url, "exact", args.matches)
    approximate = in_process(url, "approximate", args.matches)
    both = sum(a and b for a, b in zip(exact, approximate, strict=True))
    print(
        f"{args.store}, {args.lines:,} lines, {len(exact)} questions, {args.matches} matches: "
        f"evidence found exact {sum(exact) / len(exact):.3f}, approximate "
        f"{sum(approximate) / len(approximate):.3f} (both {both}, exact only "
        f"{sum(exact) - both}, approximate only {sum(approximate) - both})"
    )


if __name__ == "__main__":
    main()

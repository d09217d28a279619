"""Memory cost of one turn: median ``memory_total`` over 20 turns on a store holding the 5
LoCoMo dev conversations (2,760 lines).

``memory_total`` is everything a turn does except the LLM call: embed the new line, store it,
search and expand, assemble the prompt, and embed and store the reply. The bot shares memory
across people, so every turn searches all 2,760 lines (the widest scope). The turns ask the
LoCoMo questions in a new thread; the LLM is the scripted fake answering with the gold answer,
so replies have a realistic length. The turn embedder has no cache: every line is really
embedded, as on a live chat.

    .venv/bin/python benchmarks/turn_latency.py [--turns 20] [--strategy blend] [--json]
        [--set NAME=V]  # a strategy option, repeatable
        [--paired NAME=V]  # each question asked again with this option, repeatable
        [--two-things]  # only questions that name two things (what clause_weight costs)

``--paired``: each question is asked twice in the one process, with the bot's settings and
with these options over them, which first in turn (two threads, so neither turn's buffer
holds the other's), and the median of the per-question differences is printed: what an
option costs, without the drift of a shared machine between two runs.

``--two-things``: the questions asked are those of every conversation that ``blend`` cuts
into pieces searched each (:mod:`membot.recall.question_clauses`), the only turns whose
cost ``clause_weight`` changes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot import Bot, Memory, ScriptedLLM
from membot.config import parse_settings
from membot.embed import default_embedder
from membot.eval import shared_data_dir
from membot.memory.importers import read_file
from membot.recall.question_clauses import clauses

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def build_store(
    db: Path, strategy: str | None = None, options: dict[str, str] | None = None
) -> int:
    """Import the LoCoMo dev conversations (embeddings from the user's cache when present)."""
    memory = Memory(db)
    plan = read_file(LOCOMO, "locomo", "bench", None)
    started = time.perf_counter()
    added = memory.add_many(plan.lines)
    print(f"imported {added} lines in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    memory.configure_bot(
        "bench",
        share_across_people=True,
        **({"strategy": strategy} if strategy else {}),
        **{f"strategy.{name}": value for name, value in (options or {}).items()},
    )
    memory.close()
    return added


def questions(count: int, two_things: bool = False) -> list[tuple[str, str]]:
    """The first ``count`` questions of the first conversation, or with ``two_things``, of
    every conversation's questions those that name two things."""
    data = json.loads(LOCOMO.read_text())
    asked = (
        [qa for conversation in data for qa in conversation["qa"]] if two_things else data[0]["qa"]
    )
    pairs = [(qa["question"], str(qa.get("answer", "I don't know."))) for qa in asked]
    if two_things:
        pairs = [(question, answer) for question, answer in pairs if clauses(question)]
    return pairs[:count]


KEYS = ("embed", "store", "search", "assemble", "memory_total")


def run(
    turns: int,
    strategy: str | None = None,
    options: dict[str, str] | None = None,
    two_things: bool = False,
) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        lines = build_store(db, strategy, options)
        bot, asked = _bot(db, turns, 1, two_things)
        timings = [
            bot.turn(question, user="visitor", thread="bench").timings_ms for question, _ in asked
        ]
    median = {key: statistics.median(t[key] for t in timings) for key in KEYS}
    worst = max(t["memory_total"] for t in timings)
    return {"store_lines": lines, "turns": len(timings), "median_ms": median, "max_ms": worst}


def run_paired(
    turns: int,
    strategy: str | None,
    options: dict[str, str],
    paired: dict[str, str],
    two_things: bool = False,
) -> dict:
    """Each question asked with the bot's settings and with ``paired`` over them (the module
    docstring); medians of each side and of the differences (paired minus plain)."""
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        lines = build_store(db, strategy, options)
        bot, asked = _bot(db, turns, 2, two_things)
        changed = {f"strategy.{name}": value for name, value in paired.items()}
        timings: dict[str, list[dict]] = {"plain": [], "paired": []}
        for number, (question, _) in enumerate(asked):
            for side in ("plain", "paired")[:: 1 if number % 2 == 0 else -1]:
                settings = changed if side == "paired" else None
                turn = bot.turn(question, user="visitor", thread=side, settings=settings)
                timings[side].append(turn.timings_ms)
    median = {
        side: {key: statistics.median(t[key] for t in found) for key in KEYS}
        for side, found in timings.items()
    }
    median["difference"] = {
        key: statistics.median(
            b[key] - a[key] for a, b in zip(timings["plain"], timings["paired"], strict=True)
        )
        for key in KEYS
    }
    return {"store_lines": lines, "turns": len(asked), "paired": paired, "median_ms": median}


def _bot(db: Path, turns: int, asks: int, two_things: bool) -> tuple[Bot, list[tuple[str, str]]]:
    """The bot over the store, its embedder uncached (real embedding cost) and warm, and the
    questions it is asked (each ``asks`` times)."""
    memory = Memory(db, embedder=default_embedder())
    memory.warm_up()
    asked = questions(turns, two_things)
    llm = ScriptedLLM([f"I think it was {answer}." for _, answer in asked for _ in range(asks)])
    return Bot(memory, llm, name="bench"), asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--strategy", help="the bot's recall strategy (default: the default)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=V", help="a strategy option"
    )
    parser.add_argument(
        "--paired", action="append", default=[], metavar="NAME=V",
        help="ask each question again with this strategy option (the module docstring)",
    )  # fmt: skip
    parser.add_argument(
        "--two-things", action="store_true",
        help="only questions that name two things (the module docstring)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    announce()
    options = parse_settings(args.set)
    if args.paired:
        report = run_paired(
            args.turns, args.strategy, options, parse_settings(args.paired), args.two_things
        )
    else:
        report = run(args.turns, args.strategy, options, args.two_things)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if args.paired:
        print(f"store: {report['store_lines']} lines; turns: {report['turns']} each")
        for key in KEYS:
            plain, paired, difference = (report["median_ms"][side][key]
                                         for side in ("plain", "paired", "difference"))  # fmt: skip
            print(f"median {key:<13} {plain:7.2f} ms, paired {paired:7.2f} ms, "
                  f"difference {difference:+6.2f} ms")  # fmt: skip
        return
    print(f"store: {report['store_lines']} lines; turns: {report['turns']}")
    for key, value in report["median_ms"].items():
        print(f"median {key:<13} {value:7.2f} ms")
    print(f"max    memory_total  {report['max_ms']:7.2f} ms")


if __name__ == "__main__":
    main()

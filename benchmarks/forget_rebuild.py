"""Turns of a bot that shares memory while its approximate index is built again after a forget.

On SQLite a forget in a bot past ``MEMBOT_APPROXIMATE_FROM`` lines means that bot's usearch
graph must be built again (its removal keeps the vectors' bytes). The process keeps answering
from its old graph with the forgotten lines taken out, while a child process builds the fresh
one (:mod:`membot.store.approximate_build`). This script measures that on a copy of
``benchmarks/scale.py``'s
SQLite store of ``--size`` lines (build it first with ``scale.py --stores sqlite --sizes N``):
a process warmed up as ``membot serve`` does asks LoCoMo's questions as turns of the bot
sharing memory (scripted LLM); then one filler person (about 1,000 lines at a million) is
forgotten, and turns go on until the fresh graph is loaded, then a few more. It prints the
forget's seconds, the turns' ``memory_total`` p50 and worst before, during and after the
rebuild, the seconds until the fresh graph answered, and this process's peak memory.

    .venv/bin/python benchmarks/forget_rebuild.py [--size 1000000] [--turns 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce
from scale import BOT, CACHE, TALKER, location, peak_rss_mb, questions

from membot import Bot, Memory, ScriptedLLM
from membot.embed import default_embedder
from membot.store.approximate_sqlite import UsearchNominator

FORGOTTEN = "person-7"


def copied(size: int, cache: Path, folder: Path) -> Path:
    source = Path(location("sqlite", size, cache))
    if not source.exists():
        raise SystemExit(f"no store {source}: run benchmarks/scale.py --stores sqlite first")
    target = folder / source.name
    shutil.copyfile(source, target)
    if Path(f"{source}.ann").exists():
        shutil.copytree(f"{source}.ann", f"{target}.ann")
    return target


def summary(totals: list[float]) -> dict:
    return {
        "turns": len(totals),
        "p50_ms": round(statistics.median(totals), 1) if totals else None,
        "max_ms": round(max(totals), 1) if totals else None,
    }


def run(size: int, turns: int, cache: Path) -> dict:
    with tempfile.TemporaryDirectory(dir=cache) as folder:
        path = copied(size, cache, Path(folder))
        memory = Memory(str(path), embedder=default_embedder())
        memory.configure_bot(BOT, share_across_people=True)
        memory.warm_up(shared_memory=True)
        asked = questions(400)
        bot = Bot(memory, ScriptedLLM([f"It was {a}." for _, a in asked] * 3), name=BOT)
        count = iter(range(10**6))

        def turn() -> float:
            number = next(count)
            question = asked[number % len(asked)][0]
            done = bot.turn(question, user=TALKER, thread=f"rebuild-{number}")
            return done.timings_ms["memory_total"]

        before = [turn() for _ in range(turns)]
        scopes = memory.index.approximate._scopes
        nominator = scopes[memory.store.bot_id(BOT) or 0].nominator
        assert isinstance(nominator, UsearchNominator)
        started = time.perf_counter()
        forgotten = memory.forget(user=FORGOTTEN, bot=BOT)
        forget_s = time.perf_counter() - started
        during = []
        deadline = time.monotonic() + 1800
        while nominator.rebuild is not None and time.monotonic() < deadline:
            during.append(turn())
            if scopes.get(memory.store.bot_id(BOT) or 0) is None:  # the graph was dropped
                raise SystemExit("the approximate graph was dropped after the forget")
        rebuilt_s = time.perf_counter() - started
        after = [turn() for _ in range(turns)]
        memory.close()
    return {
        "lines": size,
        "forgotten_lines": forgotten,
        "forget_s": round(forget_s, 2),
        "before": summary(before),
        "during_rebuild": summary(during[1:]),  # the first includes the store's re-read
        "first_turn_after_forget_ms": round(during[0], 1) if during else None,
        "fresh_graph_after_s": round(rebuilt_s, 1),
        "after": summary(after),
        "peak_rss_mb": peak_rss_mb(),  # this process, which held both graphs a moment
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    announce()
    print(json.dumps(run(args.size, args.turns, args.cache), indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""What a live turn holds of LoCoMo's evidence: for each dev question that has evidence, the
share of its evidence lines inside the blocks a turn would put in the prompt (the bot's
threshold and ``max_matches``, whole blocks: :func:`membot.recall.chat.recall_for_turn`),
and how many lines those blocks hold; by category, for the default settings and for the
strategy options given.

The k-line benchmarks (``membot eval locomo``) read a ranking cut at k lines; a turn keeps a
few matches and their whole blocks. An option can move one and not the other
(docs/recall.md, "Matches from more sessions").

    PYTHONPATH=src .venv/bin/python benchmarks/turn_evidence.py [NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from membot.config import DEFAULT_BOT, BotSettings
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import CATEGORIES
from membot.index.vectors import Scope
from membot.memory.importers import load_json, read_file
from membot.recall.chat import recall_for_turn
from membot.store.base import lines_between

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("options", nargs="*", help="strategy options, NAME=VALUE")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    values = {f"strategy.{name}": float(value) for name, value in
              (option.split("=", 1) for option in args.options)}  # fmt: skip
    variants = {"default": BotSettings()}
    if values:
        variants[" ".join(args.options)] = BotSettings().with_values(values)
    by_sample = defaultdict(list)
    for line in read_file(args.data, "locomo", DEFAULT_BOT, None).lines:
        by_sample[line.thread.split("/")[0]].append(line)
    found: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in variants}
    held: dict[str, list[int]] = {name: [] for name in variants}
    for sample in load_json(args.data):
        with fresh_memory(cached_embedder(), by_sample[sample["sample_id"]]) as memory:
            scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None)
            source = memory.recall_source
            for qa in sample["qa"]:
                evidence = set(qa["evidence"])
                if not evidence:
                    continue
                vector = source.embed([qa["question"]])[0]
                for name, settings in variants.items():
                    chosen = recall_for_turn(source, settings, qa["question"], vector, scope)
                    refs = set()
                    for block in chosen.blocks:
                        lines = lines_between(
                            memory.store, block.source_thread_id, block.first_seq, block.last_seq
                        )
                        refs |= {line.ref for line in lines}
                    share = len(evidence & refs) / len(evidence)
                    found[name][CATEGORIES[qa["category"]]].append(share)
                    held[name].append(len(refs))
    for name in variants:
        every = [share for rows in found[name].values() for share in rows]
        categories = ", ".join(
            f"{category} {sum(rows) / len(rows):.3f}" for category, rows in found[name].items()
        )
        print(
            f"{name}: evidence in a turn's blocks {sum(every) / len(every):.3f} ({categories}); "
            f"lines held, mean {sum(held[name]) / len(held[name]):.1f}"
        )


if __name__ == "__main__":
    main()

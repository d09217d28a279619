"""Which LoCoMo questions gain or lose evidence in their first 10 lines when ``blend`` raises
the lines that open a session (``opener_weight``), and whether a raised opening line did it.

Each question is asked as ``membot eval locomo`` asks it, with the opening lines not raised
(``opener_weight`` 0) and with the default settings (``--set`` changes them, e.g.
``--set opener_weight=0.2``); a question whose evidence in the first 10 lines
changes is printed with the lines new there, the sessions' opening lines among them marked.
docs/recall.md, "The line that opens a thread".

    .venv/bin/python benchmarks/locomo_openers.py ../shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from membot.config import DEFAULT_EMBEDDER, parse_numbers
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import context_refs, lines_by_conversation
from membot.memory.importers import load_json
from membot.recall.ranked import settings_for_ranking

DEPTH = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=V")
    args = parser.parse_args()
    options = parse_numbers(args.set)
    before = settings_for_ranking("blend", {"opener_weight": 0})
    after = settings_for_ranking("blend", options)
    by_sample = lines_by_conversation(args.file)
    model = cached_embedder(DEFAULT_EMBEDDER)
    gained = lost = gained_by_opener = lost_to_opener = 0
    for sample in load_json(args.file):
        lines = by_sample[sample["sample_id"]]
        first: dict[str, str] = {}
        for line in lines:
            first.setdefault(line.thread, line.ref or "")
        openers = set(first.values())
        with fresh_memory(model, lines) as memory:
            for qa in sample["qa"]:
                old = context_refs(memory, before, qa["question"], DEPTH)[:DEPTH]
                new = context_refs(memory, after, qa["question"], DEPTH)[:DEPTH]
                evidence = set(qa["evidence"])
                change = len(evidence & set(new)) - len(evidence & set(old))
                if not change:
                    continue
                came = [ref for ref in new if ref not in old]
                raised = [ref for ref in came if ref in openers]
                if change > 0:
                    gained += 1
                    gained_by_opener += bool(evidence & set(raised))
                else:
                    lost += 1
                    lost_to_opener += bool(raised)
                print(f"{'gains' if change > 0 else 'loses'}: {qa['question']} | evidence "
                      f"{sorted(evidence)} | new in the first {DEPTH}: {came}, opening lines "
                      f"{raised}")  # fmt: skip
    print(f"\n{gained} questions gain evidence in the first {DEPTH} lines, {gained_by_opener} "
          f"of them through a raised opening line that is evidence; {lost} lose, {lost_to_opener} "
          f"with a raised opening line among the lines new there")  # fmt: skip


if __name__ == "__main__":
    main()

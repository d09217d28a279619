"""Recall in a live turn: what each chat strategy's keep rule brings into the prompt.

The benchmark rankings (``membot eval``) order every line; a turn keeps only matches that pass
the strategy's rule (threshold, at most ``max_matches``, expanded ±3). This measures that
rule on the LoCoMo dev file: every conversation in a fresh store (lines embedded by their own
text, as a chat stores them), every question with evidence asked through
``recall_for_turn`` with the bot's default settings, and for each strategy (and hybrid's
``lexical_margin``):

- ``evidence_recall``: share of a question's evidence turns inside the recalled blocks;
- ``any_evidence``: share of questions with at least one evidence turn recalled;
- ``lines``: mean lines recalled per question (what the prompt pays for);
- ``chitchat_fires``: share of small-talk lines ("ok", "thanks!") x conversations that
  recall anything (lower is better: those turns need no memory).

Run from the project root (about 2 minutes on 2 cores with a warm embedding cache)::

    .venv/bin/python benchmarks/chat_recall.py
    .venv/bin/python benchmarks/chat_recall.py --json reports/chat_recall.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from calibrate_threshold import CHITCHAT  # the same small talk as the threshold's

from membot.config import DEFAULT_BOT, BotSettings
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder, fresh_memory
from membot.importers import read_file
from membot.recall.chat import recall_for_turn
from membot.search import Scope

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
VARIANTS = {
    "lines": {"strategy": "lines"},
    "bm25": {"strategy": "bm25"},
    "hybrid margin 0": {"strategy": "hybrid", "strategy.lexical_margin": 0.0},
    "hybrid margin 0.05": {"strategy": "hybrid", "strategy.lexical_margin": 0.05},
    "hybrid margin 0.10 (default)": {"strategy": "hybrid"},
    "hybrid margin 0.15": {"strategy": "hybrid", "strategy.lexical_margin": 0.15},
    "hybrid lw3": {"strategy": "hybrid", "strategy.lexical_weight": 3},
    "blend": {"strategy": "blend"},
    "blend margin 0.05": {"strategy": "blend", "strategy.lexical_margin": 0.05},
    "blend margin 0.15": {"strategy": "blend", "strategy.lexical_margin": 0.15},
    "blend lw 1": {"strategy": "blend", "strategy.lexical_weight": 1.0},
    "prune": {"strategy": "prune"},
    "pairs": {"strategy": "pairs"},
    "windows": {"strategy": "windows"},
}


def measure(path: Path) -> dict[str, dict[str, float]]:
    embedder = cached_embedder()
    samples = json.loads(path.read_text(encoding="utf-8"))
    by_sample = defaultdict(list)
    for line in read_file(path, "locomo", DEFAULT_BOT, None).lines:
        by_sample[line.thread.split("/")[0]].append(line)
    totals = {name: defaultdict(float) for name in VARIANTS}
    asked = fired_on = 0
    for number, sample in enumerate(samples, start=1):
        print(f"conversation {number}/{len(samples)}", file=sys.stderr)
        with fresh_memory(embedder, by_sample[sample["sample_id"]], lambda item: item.text) as mem:
            scope = Scope(bot_id=mem.store.bot_id(DEFAULT_BOT) or 0, person_id=None)
            questions = [qa for qa in sample["qa"] if qa.get("evidence")]
            vectors = mem.embed([qa["question"] for qa in questions])
            chatter = mem.embed(list(CHITCHAT))
            for name, values in VARIANTS.items():
                settings = BotSettings().with_values(values)
                total = totals[name]
                for qa, vector in zip(questions, vectors, strict=True):
                    chosen = recall_for_turn(mem, settings, qa["question"], vector, scope)
                    refs = set()
                    for block in chosen.blocks:
                        lines = mem.store.lines_between(
                            block.source_thread_id, block.first_seq, block.last_seq
                        )
                        refs.update(line.ref for line in lines)
                    evidence = set(qa["evidence"])
                    found = len(evidence & refs)
                    total["evidence_recall"] += found / len(evidence)
                    total["any_evidence"] += found > 0
                    total["lines"] += len(refs)
                for text, vector in zip(CHITCHAT, chatter, strict=True):
                    total["chitchat_fires"] += bool(
                        recall_for_turn(mem, settings, text, vector, scope).hits
                    )
            asked += len(questions)
            fired_on += len(CHITCHAT)
    return {
        name: {
            "evidence_recall": round(t["evidence_recall"] / asked, 3),
            "any_evidence": round(t["any_evidence"] / asked, 3),
            "lines": round(t["lines"] / asked, 1),
            "chitchat_fires": round(t["chitchat_fires"] / fired_on, 3),
        }
        for name, t in totals.items()
    } | {"_questions": {"count": asked}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", type=Path, default=LOCOMO)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    results = measure(args.file)
    print(f"{'strategy':30} {'evidence':>9} {'any':>6} {'lines':>6} {'chit-chat':>10}")
    for name, row in results.items():
        if name.startswith("_"):
            continue
        print(f"{name:30} {row['evidence_recall']:9.3f} {row['any_evidence']:6.3f} "
              f"{row['lines']:6.1f} {row['chitchat_fires']:10.3f}")  # fmt: skip
    print(f"({results['_questions']['count']} questions with evidence)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

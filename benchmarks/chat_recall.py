"""Recall in a live turn: what each chat strategy's keep rule brings into the prompt.

The benchmark rankings (``membot eval``) order every line; a turn keeps only matches that pass
the strategy's rule (threshold, at most ``max_matches``, expanded ±3). This measures that
rule on a dev file: every LoCoMo conversation, or every LongMemEval question's haystack (user
turns, as the official corpus holds them), in a fresh store written as an import writes it
(``Speaker: text`` embedded where a line has a speaker), every question with evidence asked
through ``recall_for_turn`` with the bot's default settings, and for each strategy (and some of
its options):

- ``evidence_recall``: share of a question's evidence turns inside the recalled blocks;
- ``any_evidence``: share of questions with at least one evidence turn recalled;
- ``lines``: mean lines recalled per question (what the prompt pays for);
- ``chitchat_fires``: share of small-talk lines ("ok", "thanks!") x conversations that
  recall anything (lower is better: those turns need no memory).

LongMemEval questions are asked at their ``question_date`` (time words such as "a week ago"
count from it); LoCoMo gives no date for its questions, so only dates that name their year
count there.

Run from the project root (about a minute for each benchmark with a warm embedding cache, on 2
cores shared with other jobs; far longer while the cache fills)::

    .venv/bin/python benchmarks/chat_recall.py [--benchmark locomo|longmemeval]
    .venv/bin/python benchmarks/chat_recall.py --json reports/chat_recall.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from calibrate_threshold import CHITCHAT  # the same small talk as the threshold's

from membot.config import DEFAULT_BOT, BotSettings
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import lines_by_conversation
from membot.index.vectors import Scope
from membot.memory.facade import LineInput
from membot.memory.importers import parse_time, read_file
from membot.model import Role
from membot.recall.chat import recall_for_turn
from membot.store.base import lines_between

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
LONGMEMEVAL = shared_data_dir() / "longmemeval" / "longmemeval_s_dev.json"
VARIANTS: dict[str, dict[str, Any]] = {
    "lines": {"strategy": "lines"},
    "bm25": {"strategy": "bm25"},
    "hybrid margin 0": {"strategy": "hybrid", "strategy.lexical_margin": 0.0},
    "hybrid margin 0.05": {"strategy": "hybrid", "strategy.lexical_margin": 0.05},
    "hybrid margin 0.10": {"strategy": "hybrid"},
    "hybrid margin 0.15": {"strategy": "hybrid", "strategy.lexical_margin": 0.15},
    "hybrid lw3": {"strategy": "hybrid", "strategy.lexical_weight": 3},
    "blend margin 0.10 (default)": {"strategy": "blend"},
    "blend margin 0.05": {"strategy": "blend", "strategy.lexical_margin": 0.05},
    "blend margin 0.15": {"strategy": "blend", "strategy.lexical_margin": 0.15},
    "blend lw 1": {"strategy": "blend", "strategy.lexical_weight": 1.0},
    "blend no time": {"strategy": "blend", "strategy.time_weight": 0.0},
    "blend partners_only 0": {"strategy": "blend", "strategy.partners_only": 0},
    "prune": {"strategy": "prune"},
    "pairs": {"strategy": "pairs"},
    "windows": {"strategy": "windows"},
}


@dataclass
class Case:
    """One store's lines and the questions asked of it, each with its evidence refs."""

    lines: list[LineInput]
    questions: list[tuple[str, set[str]]]
    now: datetime | None = None  # when the questions are asked


def locomo_cases(path: Path) -> list[Case]:
    """Each LoCoMo conversation, its questions with evidence (``dia_id`` refs)."""
    by_sample = lines_by_conversation(path)
    return [
        Case(by_sample[sample["sample_id"]],
             [(qa["question"], set(qa["evidence"])) for qa in sample["qa"] if qa.get("evidence")])
        for sample in json.loads(path.read_text(encoding="utf-8"))
    ]  # fmt: skip


def longmemeval_cases(path: Path) -> list[Case]:
    """Each LongMemEval question's haystack, user turns only (the official corpus), with the
    user turns marked ``has_answer`` as evidence; questions without one are left out."""
    by_question = defaultdict(list)
    for line in read_file(path, "longmemeval", DEFAULT_BOT, None).lines:
        if line.role == Role.HUMAN:
            by_question[line.user].append(line)
    cases = []
    for question in json.loads(path.read_text(encoding="utf-8")):
        evidence = {
            f"{session_id}:{index}"
            for session_id, turns in zip(
                question["haystack_session_ids"], question["haystack_sessions"], strict=True
            )
            for index, turn in enumerate(turns)
            if turn["role"] == "user" and turn.get("has_answer")
        }
        if evidence and "_abs" not in question["question_id"]:
            cases.append(Case(by_question[question["question_id"]],
                              [(question["question"], evidence)],
                              parse_time(question["question_date"])))  # fmt: skip
    return cases


def measure(cases: list[Case], label: str) -> dict[str, dict[str, float]]:
    embedder = cached_embedder()
    totals: dict[str, defaultdict[str, float]] = {name: defaultdict(float) for name in VARIANTS}
    asked = fired_on = 0
    for number, case in enumerate(cases, start=1):
        print(f"{label} {number}/{len(cases)}", file=sys.stderr)
        with fresh_memory(embedder, case.lines) as mem:
            scope = Scope.of(mem.store.bot_id(DEFAULT_BOT) or 0, None)
            source = mem.recall_source
            vectors = mem.embed([text for text, _ in case.questions])
            chatter = mem.embed(list(CHITCHAT))
            for name, values in VARIANTS.items():
                settings = BotSettings().with_values(values)
                total = totals[name]
                for (text, evidence), vector in zip(case.questions, vectors, strict=True):
                    chosen = recall_for_turn(source, settings, text, vector, scope, case.now)
                    refs: set[str] = set()
                    for block in chosen.blocks:
                        lines = lines_between(
                            mem.store, block.source_thread_id, block.first_seq, block.last_seq
                        )
                        refs.update(line.ref for line in lines if line.ref is not None)
                    found = len(evidence & refs)
                    total["evidence_recall"] += found / len(evidence)
                    total["any_evidence"] += found > 0
                    total["lines"] += len(refs)
                for text, vector in zip(CHITCHAT, chatter, strict=True):
                    total["chitchat_fires"] += bool(
                        recall_for_turn(source, settings, text, vector, scope, case.now).hits
                    )
            asked += len(case.questions)
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
    parser.add_argument("--benchmark", choices=("locomo", "longmemeval"), default="locomo")
    parser.add_argument("--file", type=Path, help="default: the benchmark's dev file")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    if args.benchmark == "locomo":
        cases = locomo_cases(args.file or LOCOMO)
    else:
        cases = longmemeval_cases(args.file or LONGMEMEVAL)
    results = measure(cases, args.benchmark)
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

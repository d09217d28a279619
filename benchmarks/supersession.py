"""How often recall marks a fact as changed, and whether the marks fall where facts changed.

For each LongMemEval question, the haystack is stored as ``membot eval longmemeval`` stores
it, the question recalls with ``blend`` (its defaults) as a turn does, and the first
``--context`` lines placed in context are put to :func:`membot.recall.supersession.superseded_lines`
-- what a turn marks "earlier" and "current" in its prompt. Printed by question type: the
questions with a mark, the marks, and, where a question has two or more evidence turns
(``has_answer``), the marks that pair two evidence turns with the later one current (in
``knowledge-update`` questions, the old and the new value), the marks that call the latest
evidence turn "earlier" (the wrong way round), and the time the marking took.

Run from the project root (about two minutes on 2 cores with the embedding cache warm)::

    .venv/bin/python benchmarks/supersession.py ../shared/data/longmemeval/longmemeval_s_dev.json
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from pathlib import Path

from membot.config import DEFAULT_BOT
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.longmemeval import haystack_lines
from membot.index.vectors import Scope
from membot.memory.importers import load_json, parse_time
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.recall.supersession import superseded_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--context", type=int, default=10, help="lines in context (10)")
    args = parser.parse_args()
    model = cached_embedder()
    settings = settings_for_ranking("blend")
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    seconds: list[float] = []
    for question in load_json(args.file):
        kind = question.get("question_type", "?")
        evidence = {
            f"{session}:{index}"
            for session, turns in zip(
                question["haystack_session_ids"], question["haystack_sessions"], strict=True
            )
            for index, turn in enumerate(turns)
            if turn["role"] == "user" and turn.get("has_answer")
        }
        lines = haystack_lines(args.file, question)
        asked = parse_time(question["question_date"]) if "question_date" in question else None
        with fresh_memory(model, lines, None) as memory:
            scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None, roles=("human",))
            order = ranked_lines(memory.recall_source, settings, question["question"], scope,
                                 asked, depth=args.context)[: args.context]  # fmt: skip
            recalled = memory.store.lines(order)
            started = time.perf_counter()
            marks = superseded_lines(recalled, lambda texts: model.embed(texts))
            seconds.append(time.perf_counter() - started)
        ref_of = {line.id: line.ref for line in recalled}
        latest = max((line for line in recalled if line.ref in evidence),
                     key=lambda line: line.created_at, default=None)  # fmt: skip
        tally = counts[kind]
        tally["questions"] += 1
        tally["with a mark"] += bool(marks)
        tally["marks"] += len(marks)
        tally["2+ evidence turns"] += len(evidence) >= 2
        tally["evidence -> later evidence"] += sum(
            ref_of[earlier] in evidence and ref_of[later] in evidence
            for earlier, later in marks.items()
        )
        tally["latest evidence marked earlier"] += latest is not None and latest.id in marks
    columns = ["questions", "with a mark", "marks", "2+ evidence turns",
               "evidence -> later evidence", "latest evidence marked earlier"]  # fmt: skip
    print(f"{args.file.name}: blend's first {args.context} lines in context")
    print("| question type | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for kind in sorted(counts):
        print(f"| {kind} | " + " | ".join(str(counts[kind][name]) for name in columns) + " |")
    total = Counter[str]()
    for tally in counts.values():
        total.update(tally)
    print("| all | " + " | ".join(str(total[name]) for name in columns) + " |")
    seconds.sort()
    print(f"marking: median {1000 * seconds[len(seconds) // 2]:.1f} ms, "
          f"max {1000 * seconds[-1]:.1f} ms per question")  # fmt: skip


if __name__ == "__main__":
    main()

"""What a live turn holds of a benchmark's evidence: for each question that has evidence, the
share of its evidence lines inside the blocks a turn would put in the prompt (the bot's
threshold and ``max_matches``, whole blocks: :func:`membot.recall.chat.recall_for_turn`),
and how many lines those blocks hold; by category, for the default settings and for the
strategy options given.

LoCoMo's dev file by default. ``--longmemeval FILE`` reads LongMemEval's counted questions
instead: user turns only (as ``membot eval longmemeval`` stores them), each question asked at
its date, gold = the turns marked ``has_answer``; "all held" is the share of questions whose
every gold turn is in the turn's blocks.

The k-line benchmarks (``membot eval``) read a ranking cut at k lines; a turn keeps a few
matches and their whole blocks. An option can move one and not the other (docs/recall.md,
"Matches from more sessions").

    PYTHONPATH=src .venv/bin/python benchmarks/turn_evidence.py [NAME=VALUE ...]
    PYTHONPATH=src .venv/bin/python benchmarks/turn_evidence.py --longmemeval FILE [NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, BotSettings, parse_numbers
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import CATEGORIES, lines_by_conversation
from membot.eval.longmemeval import Corpus, haystack_lines
from membot.index.vectors import Scope
from membot.memory.facade import Memory
from membot.memory.importers import load_json, parse_time
from membot.model import LineInput
from membot.recall.chat import recall_for_turn
from membot.store.base import lines_between

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"

# One question: its text, its gold refs, its category, when it is asked.
Asked = tuple[str, set[str], str, datetime | None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("options", nargs="*", help="strategy options, NAME=VALUE")
    parser.add_argument("--data", type=Path, default=DATA, help="a LoCoMo file")
    parser.add_argument("--longmemeval", type=Path, help="a LongMemEval file instead")
    args = parser.parse_args()
    values = {
        f"strategy.{name}": value
        for name, value in parse_numbers(args.options, "an option").items()
    }
    variants = {"default": BotSettings()}
    if values:
        variants[" ".join(args.options)] = BotSettings().with_values(values)
    stores = longmemeval(args.longmemeval) if args.longmemeval else locomo(args.data)
    found: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in variants}
    held: dict[str, list[int]] = {name: [] for name in variants}
    for lines, questions, roles in stores:
        with fresh_memory(cached_embedder(), lines) as memory:
            scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None, roles=roles)
            for text, gold, category, now in questions:
                vector = memory.recall_source.embed([text])[0]
                for name, settings in variants.items():
                    refs = turn_refs(memory, settings, text, vector, scope, now)
                    found[name][category].append(len(gold & refs) / len(gold))
                    held[name].append(len(refs))
    for name in variants:
        every = [share for rows in found[name].values() for share in rows]
        categories = ", ".join(
            f"{category} {sum(rows) / len(rows):.3f}" for category, rows in found[name].items()
        )
        whole = sum(share == 1 for share in every) / len(every)
        print(
            f"{name}: evidence in a turn's blocks {sum(every) / len(every):.3f}, all held "
            f"{whole:.3f} ({categories}); lines held, mean {sum(held[name]) / len(held[name]):.1f}"
        )


def turn_refs(
    memory: Memory,
    settings: BotSettings,
    text: str,
    vector: Any,
    scope: Scope,
    now: datetime | None,
) -> set[str]:
    """The refs of every line in the blocks a turn asking ``text`` puts in its prompt."""
    chosen = recall_for_turn(memory.recall_source, settings, text, vector, scope, now)
    refs: set[str] = set()
    for block in chosen.blocks:
        lines = lines_between(memory.store, block.source_thread_id, block.first_seq, block.last_seq)
        refs |= {line.ref or "" for line in lines}
    return refs


def locomo(path: Path) -> Iterator[tuple[list[LineInput], list[Asked], Sequence[str] | None]]:
    """Each LoCoMo conversation's lines and its questions that have evidence."""
    by_sample = lines_by_conversation(path)
    for sample in load_json(path):
        questions: list[Asked] = [
            (qa["question"], set(qa["evidence"]), CATEGORIES[qa["category"]], None)
            for qa in sample["qa"]
            if qa["evidence"]
        ]
        yield by_sample[sample["sample_id"]], questions, None


def longmemeval(path: Path) -> Iterator[tuple[list[LineInput], list[Asked], Sequence[str]]]:
    """Each counted LongMemEval question with its haystack's user turns."""
    for question in load_json(path):
        corpus = Corpus.of(question)
        if not corpus.counted:
            continue
        gold = {ref for ref, doc in zip(corpus.refs, corpus.ids, strict=True) if "answer" in doc}
        now = parse_time(question["question_date"]) if "question_date" in question else None
        asked: Asked = (question["question"], gold, question.get("question_type", ""), now)
        yield haystack_lines(path, question), [asked], ("human",)


if __name__ == "__main__":
    main()

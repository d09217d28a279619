"""Dump blend's features for the benchmark questions, to fit its weights offline.

Each question is asked as a benchmark asks it (a fresh store per LoCoMo conversation or
LongMemEval haystack, blend's default settings, no threshold); the features are computed by
the turn's own function (:func:`membot.recall.blend_features.blend_features`, every feature),
and the best ``--depth`` lines by blend's hand-set score are written with their features,
their label (the line is evidence: a LoCoMo evidence dia_id, a LongMemEval user turn marked
``has_answer``) and each question's fold as the harness deals them (``membot eval --folds``).

    .venv/bin/python benchmarks/ranker_features.py \\
        --locomo ../shared/data/locomo/locomo_dev.json \\
        --longmemeval reports/longmemeval_s_dev_dev2.json --out reports/ranker_features.npz

``benchmarks/ranker_fit.py`` fits on the file (docs/recall.md, "A fitted ranker").
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from membot.config import DEFAULT_BOT
from membot.eval.folds import folds_by_group, folds_by_item
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import lines_by_conversation
from membot.eval.longmemeval import Corpus, haystack_lines
from membot.index.scope import Scope
from membot.memory.facade import Memory
from membot.memory.importers import load_json, parse_time
from membot.recall.blend_features import FEATURES, blend_features
from membot.recall.chat import options_of
from membot.recall.ranked import settings_for_ranking
from membot.recall.strategies import Question

FOLDS = 5


@dataclass
class Dump:
    """The rows of every question, and per question its benchmark, fold and gold count."""

    features: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    sessions: list[np.ndarray] = field(default_factory=list)  # a row's session, per question
    benchmark: list[str] = field(default_factory=list)
    fold: list[int] = field(default_factory=list)
    gold: list[int] = field(default_factory=list)  # evidence lines (LoCoMo), gold turns (LME)
    gold_sessions: list[int] = field(default_factory=list)

    def add(self, rows: Rows, benchmark: str, fold: int, gold: int, gold_sessions: int) -> None:
        self.features.append(rows.features)
        self.labels.append(rows.labels)
        self.sessions.append(rows.sessions)
        self.benchmark.append(benchmark)
        self.fold.append(fold)
        self.gold.append(gold)
        self.gold_sessions.append(gold_sessions)

    def save(self, path: Path) -> None:
        sizes = [len(labels) for labels in self.labels]
        np.savez_compressed(
            path,
            features=np.concatenate(self.features),
            labels=np.concatenate(self.labels),
            sessions=np.concatenate(self.sessions),
            question=np.repeat(np.arange(len(sizes)), sizes),
            benchmark=np.array(self.benchmark),
            fold=np.array(self.fold),
            gold=np.array(self.gold),
            gold_sessions=np.array(self.gold_sessions),
            names=np.array(FEATURES),
        )


@dataclass(frozen=True)
class Rows:
    features: np.ndarray
    labels: np.ndarray
    sessions: np.ndarray


def question_rows(
    memory: Memory, text: str, scope: Scope, now: Any, label_of: dict[str, int], depth: int
) -> Rows:
    """The best ``depth`` lines by blend's hand-set score with every feature; a line's label
    and session from ``label_of`` (ref -> session number, negative for a gold line)."""
    settings = settings_for_ranking("blend")
    option = options_of(settings)
    source = memory.recall_source
    question = Question(text, source.embed([text])[0], scope, now, text)
    features = blend_features(source, question, option, settings.threshold - 1.0, every=True)
    if features is None:
        return Rows(np.zeros((0, len(FEATURES))), np.zeros(0, bool), np.zeros(0, int))
    best = np.argsort(-features.fused, kind="stable")[:depth]
    lines = memory.store.lines([int(features.lines.ids[index]) for index in best])
    refs = {line.id: line.ref or "" for line in lines}
    found = [label_of.get(refs.get(int(features.lines.ids[index]), ""), 0) for index in best]
    return Rows(
        features.matrix(best).astype(np.float32),
        np.array([value < 0 for value in found]),
        np.array([abs(value) for value in found]),
    )


def dump_locomo(path: Path, dump: Dump, depth: int) -> None:
    samples = load_json(path)
    samples = samples if isinstance(samples, list) else [samples]
    fold_of = folds_by_group([sample["sample_id"] for sample in samples], FOLDS)
    lines_by_sample = lines_by_conversation(path)
    model = cached_embedder()
    for sample, fold in zip(samples, fold_of, strict=True):
        lines = lines_by_sample[sample["sample_id"]]
        with fresh_memory(model, lines, None) as memory:
            scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None)
            for qa in sample["qa"]:
                evidence = set(qa["evidence"])
                label_of = {line.ref or "": -1 if line.ref in evidence else 1 for line in lines}
                rows = question_rows(memory, qa["question"], scope, None, label_of, depth)
                dump.add(rows, f"locomo:{qa['category']}", fold, len(evidence), 0)
        print(f"LoCoMo {sample['sample_id']}: {len(sample['qa'])} questions", flush=True)


def dump_longmemeval(path: Path, dump: Dump, depth: int) -> None:
    questions = load_json(path)
    ids = [question["question_id"] for question in questions]
    fold_of = folds_by_item(ids, [q.get("question_type", "") for q in questions], FOLDS)
    model = cached_embedder()
    for number, (question, fold) in enumerate(zip(questions, fold_of, strict=True)):
        corpus = Corpus.of(question)
        if not corpus.counted:  # the official metrics average over these only
            continue
        session_number = {session: place + 1 for place, session in enumerate(corpus.sessions)}
        label_of = {
            ref: -session_number[session] if "answer" in doc_id else session_number[session]
            for ref, doc_id, session in zip(corpus.refs, corpus.ids, corpus.sessions, strict=True)
        }
        now = parse_time(question["question_date"]) if "question_date" in question else None
        with fresh_memory(model, haystack_lines(path, question), None) as memory:
            scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None, roles=("human",))
            rows = question_rows(memory, question["question"], scope, now, label_of, depth)
        kind = question.get("question_type", "")
        dump.add(rows, f"longmemeval:{kind}", fold, len(corpus.gold), len(corpus.gold_sessions))
        if number % 25 == 0:
            print(f"LongMemEval {number}/{len(questions)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--longmemeval", type=Path)
    parser.add_argument("--depth", type=int, default=200, help="lines kept per question")
    parser.add_argument("--out", type=Path, default=Path("reports/ranker_features.npz"))
    args = parser.parse_args()
    dump = Dump()
    if args.locomo:
        dump_locomo(args.locomo, dump, args.depth)
    if args.longmemeval:
        dump_longmemeval(args.longmemeval, dump, args.depth)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    dump.save(args.out)
    print(f"{len(dump.labels)} questions, {sum(map(len, dump.labels))} rows -> {args.out}")


if __name__ == "__main__":
    main()

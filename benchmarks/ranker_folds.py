"""A fitted blend against the hand-set one, held out, through the real recall path.

For each of the 5 folds (LoCoMo by conversation, LongMemEval by question, as ``membot eval
--folds 5`` deals them), blend's weights are fitted on the other folds' dumped features
(``benchmarks/ranker_fit.py``; one model over both benchmarks) and the held-out fold is
ranked by the live turn's code with that ranker (``FittedBlendStrategy``), beside the
hand-set blend on the same questions, each benchmark's store built once:

    .venv/bin/python benchmarks/ranker_folds.py reports/ranker_features.npz \\
        --locomo ../shared/data/locomo/locomo_dev.json \\
        --longmemeval reports/longmemeval_s_dev_dev2.json --products

prints per fold LoCoMo R@10 (and multi-hop, open-domain, temporal), LongMemEval session
recall_all@5 and turn recall_all@10, hand-set -> fitted, and the pooled held-out numbers.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from ranker_fit import Questions, as_ranker, fitted

from membot.eval import locomo, longmemeval
from membot.eval.folds import Grid, GridPoint, folds_by_group, folds_by_item
from membot.eval.harness import cached_embedder
from membot.memory.importers import load_json
from membot.recall.chat import strategy_options
from membot.recall.fitted_ranker import FittedRanker
from membot.recall.line_strategies import FittedBlendStrategy
from membot.recall.ranked import settings_for_ranking
from membot.recall.strategies import register_strategy

FOLDS = 5


def fold_grid(rankers: Sequence[FittedRanker]) -> Grid:
    """Point 0 the hand-set blend, point f + 1 blend's features scored by the ranker fitted
    without fold f (a strategy of its own, ``fitted-fold<f + 1>``)."""
    defaults = strategy_options()["blend"]
    points, settings = [GridPoint({}, {}, 0)], [settings_for_ranking("blend", defaults)]
    for place, ranker in enumerate(rankers):
        name = f"fitted-fold{place + 1}"
        register_strategy(FittedBlendStrategy(name, ranker), replace=True)
        points.append(GridPoint({}, {}, place + 1))
        settings.append(settings_for_ranking(name, defaults))
    return Grid("blend", tuple(points), tuple(settings))


def _category_r10(number: str, summary: dict[str, Any]) -> float:
    """A category's R@10 in a fold's summary (NaN where the fold asks none of it)."""
    return float(summary["by_category"][number]["recall_at"].get("10", np.nan))


def compare(
    fold_of: Sequence[int],
    summarise: Callable[[list[tuple[int, int]]], dict[str, Any]],
    read: dict[str, Callable[[dict[str, Any]], float]],
) -> None:
    """Each fold's numbers, hand-set -> fitted, and both pooled over every fold."""
    hand_pooled, fitted_pooled = [], []
    for fold in range(FOLDS):
        held = [index for index, place in enumerate(fold_of) if place == fold]
        hand = summarise([(0, index) for index in held])
        mine = summarise([(fold + 1, index) for index in held])
        hand_pooled += [(0, index) for index in held]
        fitted_pooled += [(fold + 1, index) for index in held]
        numbers = "  ".join(
            f"{name} {get(hand):.3f} -> {get(mine):.3f}" for name, get in read.items()
        )
        print(f"  fold {fold + 1} ({len(held)}): {numbers}")
    hand, mine = summarise(hand_pooled), summarise(fitted_pooled)
    numbers = "  ".join(f"{name} {get(hand):.3f} -> {get(mine):.3f}" for name, get in read.items())
    print(f"  pooled: {numbers}")


def run_locomo(path: Path, grid: Grid) -> None:
    samples = load_json(path)
    fold_of_sample = dict(
        zip(
            (s["sample_id"] for s in samples),
            folds_by_group([s["sample_id"] for s in samples], FOLDS),
            strict=True,
        )
    )
    lines_by_sample = locomo.lines_by_conversation(path)
    scored = locomo._score(samples, lines_by_sample, grid, cached_embedder(), None, False)
    fold_of = [fold_of_sample[sample] for sample in scored.samples]
    category = {"multi-hop": "1", "temporal": "2", "open-domain": "3"}
    read: dict[str, Callable[[dict[str, Any]], float]] = {
        "R@10": lambda summary: summary["recall_at"]["10"]
    }
    for name, number in category.items():
        read[name] = partial(_category_r10, number)
    print("LoCoMo (held-out conversations), hand-set -> fitted:")
    compare(fold_of, lambda picks: locomo._summary(scored.picked(picks)), read)


def run_longmemeval(path: Path, grid: Grid) -> None:
    questions = load_json(path)
    fold_of = folds_by_item(
        [q["question_id"] for q in questions],
        [q.get("question_type", "") for q in questions],
        FOLDS,
    )
    haystacks = [longmemeval.haystack_lines(path, question) for question in questions]
    scored = longmemeval._score(questions, haystacks, grid, cached_embedder(), None, False)
    read: dict[str, Callable[[dict[str, Any]], float]] = {
        "session recall_all@5": lambda summary: summary["session"]["recall_all@5"],
        "turn recall_all@10": lambda summary: summary["turn"]["recall_all@10"],
    }
    print("LongMemEval (held-out questions), hand-set -> fitted:")
    compare(fold_of, scored.summary, read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--longmemeval", type=Path)
    parser.add_argument("--method", choices=("softmax", "pairwise", "search"), default="softmax")
    parser.add_argument("--l2", type=float, default=0.003)
    parser.add_argument("--products", action="store_true", help="weigh products of features too")
    args = parser.parse_args()
    questions = Questions.load(args.dump, args.products)
    rankers = []
    for fold in range(FOLDS):
        others = [index for index, place in enumerate(questions.fold) if place != fold]
        rankers.append(as_ranker(fitted(questions, others, args.method, args.l2)))
        print(f"fold {fold + 1}, fitted on the others:", dict(rankers[-1].linear))
    grid = fold_grid(rankers)
    if args.locomo:
        run_locomo(args.locomo, grid)
    if args.longmemeval:
        run_longmemeval(args.longmemeval, grid)


if __name__ == "__main__":
    main()

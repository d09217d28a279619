"""Fit blend's weights on the features ``benchmarks/ranker_features.py`` dumped, with folds.

For each fold, blend's weights are fitted on the other folds' questions (one model over both
benchmarks, each question weighing the same and each benchmark half) by ``--method``:

- ``softmax`` (listwise): each question's evidence lines' share of a softmax over its dumped
  lines, L2 toward 10 x the hand-set weights at ``--l2``; with ``--products``, the product of
  each pair of features weighed too (prior 0);
- ``pairwise``: logistic over every (evidence, other line) pair, L2 toward the hand-set weights;
- ``search``: coordinate ascent on the proxy below from the hand-set weights.

Each fit is rescaled so that its dense weight is the hand-set 1 (a block's lines are ordered
against the next match as before) and scored on the held-out fold by the matches' order alone
(no blocks: a proxy of the official metrics, which ``benchmarks/ranker_folds.py`` gives
through the real recall path): LoCoMo R@10 over evidence lines, LongMemEval turn
recall_all@10 and session recall_all@5, hand-set -> fitted; then the same fitted on every
fold, in-sample, and its weights (``--out``: written as a ranker file,
:class:`membot.recall.fitted_ranker.FittedRanker`).

    .venv/bin/python benchmarks/ranker_fit.py reports/ranker_features.npz --l2 0.001,0.003

docs/recall.md ("A fitted ranker") has what each method scored.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize  # type: ignore[import-untyped]

from membot.recall.fitted_ranker import FittedRanker
from membot.recall.line_strategies import BlendStrategy

# Fitted: the features a turn already computes; feedback (a second dense scan) stays off.
FITTED = (
    "dense_weight",
    "lexical_weight",
    "time_weight",
    "speaker_weight",
    "entity_weight",
    "sentence_weight",
    "neighbour_only_weight",
    "recency_weight",
)

SOFTMAX_SCALE = 10.0  # the prior's scale: a softmax over scores 10 x the hand-set's
PAIRWISE_TOP = 200


PAIRS = tuple((first, second) for place, first in enumerate(FITTED) for second in FITTED[place:])


@dataclass(frozen=True)
class Questions:
    """The dump, split per question: its rows' features (the FITTED columns, then with
    ``products`` the product of each pair of them, :data:`PAIRS`) and labels."""

    features: list[np.ndarray]
    labels: list[np.ndarray]
    sessions: list[np.ndarray]
    benchmark: np.ndarray  # "locomo" or "longmemeval" per question
    fold: np.ndarray
    gold: np.ndarray
    gold_sessions: np.ndarray

    @classmethod
    def load(cls, path: Path, products: bool = False) -> Questions:
        data = np.load(path)
        names = list(data["names"])
        columns = data["features"][:, [names.index(name) for name in FITTED]].astype(np.float64)
        if products:
            pairs = [columns[:, FITTED.index(a)] * columns[:, FITTED.index(b)] for a, b in PAIRS]
            columns = np.concatenate([columns, np.stack(pairs, axis=1)], axis=1)
        cut = np.flatnonzero(np.diff(data["question"])) + 1
        return cls(
            np.split(columns, cut),
            np.split(data["labels"], cut),
            np.split(data["sessions"], cut),
            np.array([name.split(":")[0] for name in data["benchmark"]]),
            data["fold"],
            data["gold"],
            data["gold_sessions"],
        )

    @property
    def width(self) -> int:
        return int(self.features[0].shape[1])


def hand_set(width: int = len(FITTED)) -> np.ndarray:
    """The hand-set blend's weights (its products' 0)."""
    weights = np.zeros(width)
    weights[: len(FITTED)] = [BlendStrategy.options[name] for name in FITTED]
    return weights


def as_ranker(weights: np.ndarray) -> FittedRanker:
    """The ranker of these weights (FITTED's, then with products PAIRS')."""
    linear = {name: round(float(value), 4) for name, value in zip(FITTED, weights, strict=False)}
    products = weights[len(FITTED) :]
    pairs = tuple(
        (a, b, round(float(value), 4)) for (a, b), value in zip(PAIRS, products, strict=False)
    )
    return FittedRanker(linear, pairs)


def pairs_of(
    questions: Questions, chosen: Sequence[int], top: int
) -> tuple[np.ndarray, np.ndarray]:
    """Feature differences (evidence minus other line, of the best ``top`` by the hand-set
    order: the lines that compete for the first places) and each pair's weight."""
    differences, weights = [], []
    share = {name: 0.5 / max(1, sum(questions.benchmark[i] == name for i in chosen))
             for name in ("locomo", "longmemeval")}  # fmt: skip
    for index in chosen:
        features, labels = questions.features[index], questions.labels[index]
        good, other = features[labels], features[:top][~labels[:top]]
        if not len(good) or not len(other):
            continue
        pairs = (good[:, None, :] - other[None, :, :]).reshape(-1, features.shape[1])
        differences.append(pairs)
        weights.append(np.full(len(pairs), share[questions.benchmark[index]] / len(pairs)))
    return np.concatenate(differences), np.concatenate(weights)


def fit(questions: Questions, chosen: Sequence[int], l2: float, top: int = 200) -> np.ndarray:
    """Pairwise logistic weights, L2 toward the hand-set weights, dense weight 1."""
    differences, pair_weights = pairs_of(questions, chosen, top)
    prior = hand_set(questions.width)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = differences @ w
        value = float(pair_weights @ np.logaddexp(0.0, -margin))
        slope = -(pair_weights / (1.0 + np.exp(margin))) @ differences
        gap = w - prior
        return value + l2 * float(gap @ gap) / 2, slope + l2 * gap

    found = minimize(loss, prior, jac=True, method="L-BFGS-B").x
    return np.asarray(found / max(found[0], 1e-6))


def fit_softmax(questions: Questions, chosen: Sequence[int], l2: float, scale: float) -> np.ndarray:
    """Listwise (softmax) weights: each question's evidence lines' share of the softmax of
    the scores over its dumped lines, maximised (each question weighing the same, each
    benchmark half), L2 toward the hand-set weights times ``scale`` (the softmax's
    temperature: how far the first places weigh above the rest); dense weight 1."""
    share = {name: 0.5 / max(1, sum(questions.benchmark[i] == name for i in chosen))
             for name in ("locomo", "longmemeval")}  # fmt: skip
    kept = [i for i in chosen if questions.labels[i].any()]
    prior = hand_set(questions.width) * scale

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        value, slope = 0.0, np.zeros_like(w)
        for index in kept:
            features, labels = questions.features[index], questions.labels[index]
            exp = np.exp(features @ w - float(np.max(features @ w)))
            weight = share[questions.benchmark[index]]
            value -= weight * float(np.log(exp[labels].sum()) - np.log(exp.sum()))
            evidence = exp[labels] / exp[labels].sum()
            slope += weight * ((exp / exp.sum()) @ features - evidence @ features[labels])
        gap = w - prior
        return value + l2 * float(gap @ gap) / 2, slope + l2 * gap

    found = minimize(loss, prior, jac=True, method="L-BFGS-B").x
    return np.asarray(found / max(found[0], 1e-6))


def fitted(questions: Questions, chosen: Sequence[int], method: str, l2: float) -> np.ndarray:
    """The weights ``method`` (pairwise, softmax or search) fits on ``chosen`` questions."""
    if method == "search":
        return search(questions, chosen)
    if method == "softmax":
        return fit_softmax(questions, chosen, l2, SOFTMAX_SCALE)
    return fit(questions, chosen, l2, PAIRWISE_TOP)


def objective(questions: Questions, chosen: Sequence[int], weights: np.ndarray) -> float:
    """The mean of the three proxy numbers (each benchmark's where it has questions)."""
    numbers = [value for value in proxy(questions, chosen, weights).values() if value == value]
    return float(np.mean(numbers))


def search(questions: Questions, chosen: Sequence[int], rounds: int = 3) -> np.ndarray:
    """Coordinate ascent on :func:`objective` from the hand-set weights: each weight but the
    dense one moved by a few steps in turn, a move kept only where it gains 0.002 or more."""
    weights = hand_set(questions.width)
    best = objective(questions, chosen, weights)
    for _ in range(rounds):
        moved = False
        for place in range(1, len(weights)):
            for step in (-0.1, -0.05, 0.05, 0.1):
                trial = weights.copy()
                trial[place] = round(trial[place] + step, 3)
                value = objective(questions, chosen, trial)
                if value >= best + 0.002:
                    weights, best, moved = trial, value, True
        if not moved:
            break
    return weights


def proxy(questions: Questions, chosen: Sequence[int], weights: np.ndarray) -> dict[str, float]:
    """The match order's LoCoMo R@10, LongMemEval turn recall_all@10 and session
    recall_all@5, over ``chosen`` questions."""
    locomo, turn, session = [], [], []
    for index in chosen:
        order = np.argsort(-(questions.features[index] @ weights), kind="stable")
        labels = questions.labels[index][order]
        if questions.benchmark[index] == "locomo":
            gold = questions.gold[index]
            locomo.append(labels[:10].sum() / gold if gold else 1.0)
            continue
        turn.append(float(labels[:10].sum() == questions.gold[index]))
        sessions = questions.sessions[index][order]
        top = list(dict.fromkeys(sessions.tolist()))[:5]
        gold_sessions = set(sessions[labels].tolist())
        found = len(gold_sessions & set(top)) == questions.gold_sessions[index]
        session.append(float(found))
    return {
        "locomo_r10": float(np.mean(locomo)) if locomo else float("nan"),
        "lme_turn_all10": float(np.mean(turn)) if turn else float("nan"),
        "lme_session_all5": float(np.mean(session)) if session else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--l2", default="0.003", help="L2 strengths to try, comma-separated")
    parser.add_argument("--method", choices=("softmax", "pairwise", "search"), default="softmax")
    parser.add_argument("--products", action="store_true", help="weigh products of features too")
    parser.add_argument("--out", type=Path, help="write the ranker fitted on every fold here")
    args = parser.parse_args()
    questions = Questions.load(args.dump, args.products)
    everyone = range(len(questions.fold))
    folds = sorted(set(questions.fold.tolist()))
    for l2 in (float(value) for value in args.l2.split(",")):
        print(f"L2 {l2}: proxy numbers of each held-out fold, hand-set -> fitted")
        for fold in folds:
            held = [i for i in everyone if questions.fold[i] == fold]
            others = [i for i in everyone if questions.fold[i] != fold]
            weights = fitted(questions, others, args.method, l2)
            hand = proxy(questions, held, hand_set(questions.width))
            mine = proxy(questions, held, weights)
            numbers = "  ".join(f"{name} {hand[name]:.3f} -> {mine[name]:.3f}" for name in hand)
            print(f"  fold {fold + 1}: {numbers}")
        weights = fitted(questions, list(everyone), args.method, l2)
        ranker = as_ranker(weights)
        hand = proxy(questions, everyone, hand_set(questions.width))
        mine = proxy(questions, everyone, weights)
        numbers = "  ".join(f"{name} {hand[name]:.3f} -> {mine[name]:.3f}" for name in hand)
        print(f"  fitted on every fold, in-sample: {numbers}")
        print("  its weights:", dict(ranker.linear))
        if args.out:
            saved = {
                "fitted": f"benchmarks/ranker_fit.py --method {args.method} --l2 {l2}"
                + (" --products" if args.products else ""),
                "linear": ranker.linear,
                "pairs": [list(pair) for pair in ranker.pairs],
            }
            args.out.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

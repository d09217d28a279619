"""A fitted ranker over ``blend``'s features: the weights of each feature and of each product
of two, read from a small JSON file (``benchmarks/ranker_fit.py --out`` writes one) with json
and numpy alone.

The features are blend's own (:mod:`membot.recall.blend_features`), computed as the hand-set
blend computes them; only the last step, their sum, is replaced by the fitted score: a line's
features ``f`` score ``sum_i w_i f_i + sum_{i<=j} w_ij f_i f_j``. None fitted so far beat the
hand-set blend on every fold, so membot ships none (docs/recall.md, "A fitted ranker"); one
is tried through :class:`membot.recall.line_strategies.FittedBlendStrategy`::

    register_strategy(FittedBlendStrategy("fitted", FittedRanker.read(Path("ranker.json"))))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from membot.errors import ConfigError
from membot.recall.blend_features import FEATURES


@dataclass(frozen=True)
class FittedRanker:
    """Weights by feature (``linear``) and by pair of features (``pairs``: (first, second,
    weight)); a feature is named by the blend option that weighs it."""

    linear: Mapping[str, float]
    pairs: tuple[tuple[str, str, float], ...] = ()

    @property
    def features(self) -> frozenset[str]:
        """The features the score reads (a feature weighed 0 everywhere need not be computed)."""
        named = {name for name, weight in self.linear.items() if weight}
        named |= {
            name for first, second, weight in self.pairs if weight for name in (first, second)
        }
        return frozenset(named)

    def score(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """Each line's score from its features (``columns``, aligned arrays by name)."""
        size = len(next(iter(columns.values())))
        total = np.zeros(size, dtype=np.float64)
        for name, weight in self.linear.items():
            if weight:
                total += weight * columns[name]
        for first, second, weight in self.pairs:
            if weight:
                total += weight * (columns[first] * columns[second])
        return total

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FittedRanker:
        """The ranker a ``ranker.json`` holds; ConfigError naming what is wrong."""
        try:
            linear = {str(name): float(value) for name, value in data["linear"].items()}
            pairs = tuple((str(a), str(b), float(w)) for a, b, w in data.get("pairs", []))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ConfigError(f"not a fitted ranker: {error}") from error
        unknown = (set(linear) | {name for a, b, _ in pairs for name in (a, b)}) - set(FEATURES)
        if unknown:
            raise ConfigError(f"a fitted ranker names features blend has not: {sorted(unknown)}")
        return cls(linear, pairs)

    @classmethod
    def read(cls, path: Path) -> FittedRanker:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

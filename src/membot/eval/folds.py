"""Cross-validation for the recall harnesses: folds, grids of options, held-out numbers.

Recall fits nothing, but its settings are chosen by reading numbers, and a setting chosen on
the questions it is then reported on looks better than it will do elsewhere. With K folds the
questions are cut into K parts (LoCoMo by conversation, LongMemEval by question); each part is
held out in turn. Without a grid the held-out numbers only partition the data (their pooled
mean is the dev number); with a grid (``--choose NAME=V1,V2``), each fold takes the grid point
that scores best by the primary metric on the other folds, and is scored with it.

Every grid point ranks every question once, in the store built once for the question's
conversation or haystack: a harness computes a score row per (point, question) and this
module only reads those rows.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from membot.config import BotSettings
from membot.errors import ConfigError
from membot.recall.chat import strategy_options
from membot.recall.ranked import settings_for_ranking

# A harness's summary of some (grid point, question) rows: its report's numbers for them.
Summarise = Callable[[Sequence[tuple[int, int]]], dict[str, Any]]


@dataclass(frozen=True)
class GridPoint:
    options: dict[str, float]  # the --set options and this point's choices
    chosen: dict[str, float]  # this point's choices alone
    ranking: int  # the index of its settings in Grid.settings (equal settings rank once)


@dataclass(frozen=True)
class Grid:
    """The default (the ``--set`` options alone, ``points[0]``) and, with ``choose``, every
    combination of the chosen values (``points[1:]``), with the distinct settings they rank
    with: a point equal to another (``lexical_weight=0.5`` is blend's default) ranks once."""

    strategy: str
    points: tuple[GridPoint, ...]
    settings: tuple[BotSettings, ...]

    @property
    def chooses(self) -> bool:
        return len(self.points) > 1

    @property
    def candidates(self) -> range:
        """The points a fold chooses among: the grid, or the default when there is none."""
        return range(1, len(self.points)) if self.chooses else range(1)

    @classmethod
    def of(
        cls,
        strategy: str,
        options: Mapping[str, float] | None = None,
        choose: Mapping[str, Sequence[float]] | None = None,
    ) -> Grid:
        base = dict(options or {})
        names = list(choose or {})
        combinations = [dict(zip(names, values, strict=True))
                        for values in itertools.product(*(choose or {}).values())]  # fmt: skip
        wanted: list[tuple[dict[str, float], dict[str, float]]] = [(base, {})]
        wanted += [({**base, **each}, each) for each in combinations] if names else []
        defaults = strategy_options().get(strategy, {})
        settings: list[BotSettings] = []
        points = []
        for point_options, chosen in wanted:
            # the strategy's defaults filled in, so that a default given is the default
            full = settings_for_ranking(strategy, {**defaults, **point_options})
            if full not in settings:
                settings.append(full)
            points.append(GridPoint(point_options, chosen, settings.index(full)))
        return cls(strategy, tuple(points), tuple(settings))

    @classmethod
    def for_run(
        cls,
        strategy: str,
        options: Mapping[str, float] | None,
        choose: Mapping[str, Sequence[float]] | None,
        folds: int | None,
    ) -> Grid:
        """The grid a harness runs (:meth:`of`); ``ConfigError`` for a choice without
        ``folds`` to score it on."""
        grid = cls.of(strategy, options, choose)
        if grid.chooses and not folds:
            raise ConfigError(
                "--choose needs --folds: a choice is scored on folds it was not made on"
            )
        return grid


def parse_choices(pairs: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """``["lexical_weight=0.5,1,2"]`` -> ``{"lexical_weight": (0.5, 1.0, 2.0)}``."""
    choices: dict[str, tuple[float, ...]] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        try:
            values = tuple(float(value) for value in raw.split(","))
        except ValueError:
            values = ()
        if not sep or not name or not values:
            raise ConfigError(f"--choose wants NAME=V1,V2,... (numbers), got {pair!r}")
        if name in choices:
            raise ConfigError(f"--choose {name} is given twice: list its values once")
        choices[name] = tuple(dict.fromkeys(values))
    return choices


def folds_by_group(groups: Sequence[str], k: int) -> list[int]:
    """Each item's fold, whole groups (LoCoMo's conversations) dealt to the k folds in turn
    in the order they first come."""
    order = list(dict.fromkeys(groups))
    _check_k(k, len(order), "conversations")
    fold_of_group = {group: place % k for place, group in enumerate(order)}
    return [fold_of_group[group] for group in groups]


def folds_by_item(ids: Sequence[str], strata: Sequence[str], k: int) -> list[int]:
    """Each item's fold: the items ordered by stratum (LongMemEval's question type), then
    by a hash of their id, and dealt to the k folds in turn, so that every fold gets its share
    of each stratum and an item keeps its fold whatever file or order it comes in."""
    _check_k(k, len(ids), "questions")
    digest = [hashlib.sha256(item.encode("utf-8")).hexdigest() for item in ids]
    order = sorted(range(len(ids)), key=lambda index: (strata[index], digest[index]))
    fold_of = [0] * len(ids)
    for place, index in enumerate(order):
        fold_of[index] = place % k
    return fold_of


def _check_k(k: int, available: int, what: str) -> None:
    if available < 2:
        raise ConfigError(f"--folds needs 2 {what} or more; the file holds {available}")
    if not 2 <= k <= available:
        raise ConfigError(f"--folds {k}: give 2 to {available} (the file holds {available} {what})")


def cross_validate(
    grid: Grid,
    fold_of: Sequence[int],
    summarise: Summarise,
    primary: Callable[[Mapping[str, Any]], float],
    labels: Sequence[str],
) -> dict[str, Any]:
    """Each fold's held-out numbers with the point chosen on the other folds, their mean and
    spread, and the same numbers pooled over all questions (each scored in its own fold)."""
    k = max(fold_of) + 1
    questions = range(len(fold_of))
    folds: list[dict[str, Any]] = []
    pooled: list[tuple[int, int]] = []
    for fold in range(k):
        held = [index for index in questions if fold_of[index] == fold]
        others = [index for index in questions if fold_of[index] != fold]
        trained = {point: primary(summarise([(point, i) for i in others]))
                   for point in grid.candidates}  # fmt: skip
        best = max(grid.candidates, key=lambda point: trained[point])  # the first of a tie
        pooled += [(best, index) for index in held]
        entry: dict[str, Any] = {"fold": fold + 1, "held_out": labels[fold], "questions": len(held)}
        if grid.chooses:
            entry |= {"chosen": grid.points[best].chosen, "chosen_on_others": trained[best],
                      "default": summarise([(0, index) for index in held])}  # fmt: skip
        folds.append(entry | {"scores": summarise([(best, index) for index in held])})
    result = {"k": k, "folds": folds, **spread([entry["scores"] for entry in folds])}
    result["pooled"] = summarise(pooled)
    if grid.chooses:
        everywhere = {point: primary(summarise([(point, i) for i in questions]))
                      for point in grid.candidates}  # fmt: skip
        best = max(grid.candidates, key=lambda point: everywhere[point])
        result["default_spread"] = spread([entry["default"] for entry in folds])
        result["best_on_all"] = {"chosen": grid.points[best].chosen, "scores": summarise(
            [(best, index) for index in questions])}  # fmt: skip
        result["grid"] = [{"chosen": grid.points[point].chosen, "primary": everywhere[point]}
                          for point in grid.candidates]  # fmt: skip
    return result


def spread(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The mean, standard deviation (over folds, not of a mean), min and max of every number
    in ``summaries`` (nested alike), each over the folds that have it: a fold without a
    category's questions has no number for it."""
    leaves: dict[tuple[str, ...], list[float]] = {}
    for summary in summaries:
        for path, value in _numbers(summary):
            leaves.setdefault(path, []).append(value)
    result: dict[str, Any] = {"mean": {}, "std": {}, "min": {}, "max": {}}
    for path, values in leaves.items():
        numbers = {"mean": float(np.mean(values)), "std": float(np.std(values)),
                   "min": min(values), "max": max(values)}  # fmt: skip
        for name, value in numbers.items():
            _put(result[name], path, round(value, 4))
    return result


def _numbers(
    tree: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], float]]:
    """Every number in ``tree`` with its path of keys."""
    found = []
    for key, value in tree.items():
        if isinstance(value, Mapping):
            found += _numbers(value, (*path, key))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.append(((*path, key), float(value)))
    return found


def _put(tree: dict[str, Any], path: tuple[str, ...], value: float) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def metric_reader(name: str, known: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], float]:
    """The primary metric ``name`` (``LEVEL.KEY`` of a report, e.g. ``recall_at.10`` or
    ``turn.recall_all@10``) read off a summary; ``known`` is a summary to check it against."""
    path = tuple(name.split("."))
    found = dict(_numbers(known))
    if path not in found:
        choices = ", ".join(".".join(each) for each in found if len(each) == 2)
        raise ConfigError(f"--metric {name}: not a number of this report; one of {choices}")

    def read(summary: Mapping[str, Any]) -> float:
        value: Any = summary
        for key in path:
            value = value.get(key, {}) if isinstance(value, Mapping) else {}
        return float(value) if isinstance(value, int | float) else float("-inf")

    return read

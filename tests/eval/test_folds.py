"""Folds, grids and the choice made on the other folds, on score rows made up for the test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from membot.errors import ConfigError
from membot.eval.folds import (
    Grid,
    cross_validate,
    folds_by_group,
    folds_by_item,
    metric_reader,
    parse_choices,
    spread,
)


def test_conversations_are_dealt_whole_to_the_folds_in_turn() -> None:
    groups = ["a", "a", "b", "c", "b", "d", "e"]
    assert folds_by_group(groups, 5) == [0, 0, 1, 2, 1, 3, 4]
    assert folds_by_group(groups, 2) == [0, 0, 1, 0, 1, 1, 0]
    with pytest.raises(ConfigError, match=r"--folds 6: give 2 to 5 .*5 conversations"):
        folds_by_group(groups, 6)
    with pytest.raises(ConfigError, match="--folds 1"):
        folds_by_group(groups, 1)


def test_questions_are_dealt_by_type_and_hash_whatever_their_order() -> None:
    ids = [f"q{number}" for number in range(20)]
    types = ["temporal"] * 10 + ["update"] * 5 + ["single"] * 5
    folds = folds_by_item(ids, types, 5)
    assert sorted(folds.count(fold) for fold in range(5)) == [4] * 5
    for kind, size in (("temporal", 10), ("update", 5), ("single", 5)):
        in_kind = [fold for fold, each in zip(folds, types, strict=True) if each == kind]
        assert len(in_kind) == size and max(map(in_kind.count, set(in_kind))) <= 2
    reordered = folds_by_item(ids[::-1], types[::-1], 5)
    assert dict(zip(ids[::-1], reordered, strict=True)) == dict(zip(ids, folds, strict=True))


def test_choices_parse_and_a_default_given_ranks_once() -> None:
    assert parse_choices(["lexical_weight=0.5,1,2", "neighbour_weight=0.2"]) == {
        "lexical_weight": (0.5, 1.0, 2.0),
        "neighbour_weight": (0.2,),
    }
    for bad in ("lexical_weight", "lexical_weight=", "lexical_weight=a,1", "=1"):
        with pytest.raises(ConfigError, match="--choose wants NAME=V1,V2"):
            parse_choices([bad])
    grid = Grid.of("blend", {"time_weight": 0.0}, {"lexical_weight": (0.5, 1.0)})
    assert [point.chosen for point in grid.points] == [{}, {"lexical_weight": 0.5},
                                                       {"lexical_weight": 1.0}]  # fmt: skip
    assert grid.points[1].options == {"time_weight": 0.0, "lexical_weight": 0.5}
    # 0.5 is blend's default: the default and that point share one ranking
    assert [point.ranking for point in grid.points] == [0, 0, 1]
    assert len(grid.settings) == 2 and list(grid.candidates) == [1, 2]
    assert not Grid.of("blend").chooses and list(Grid.of("blend").candidates) == [0]
    with pytest.raises(ConfigError, match="no option 'speed'"):
        Grid.of("blend", None, {"speed": (1.0, 2.0)})


# Two grid points over six questions in three folds: point 2 is better on fold 0, point 1 on
# fold 2, they tie on fold 1. ``SCORES[point][question]``; point 0 is the default.
SCORES = {0: [0.5] * 6, 1: [0.0, 0.0, 0.2, 0.2, 1.0, 1.0], 2: [1.0, 1.0, 0.6, 0.6, 0.0, 0.0]}
FOLD_OF = [0, 0, 1, 1, 2, 2]


def summarise(picks: Sequence[tuple[int, int]]) -> dict[str, Any]:
    values = [SCORES[point][index] for point, index in picks]
    return {"questions": len(values), "recall_at": {"10": sum(values) / max(len(values), 1)}}


def test_each_fold_is_scored_with_the_point_chosen_on_the_others() -> None:
    grid = Grid.of("blend", None, {"lexical_weight": (1.0, 2.0)})
    primary = metric_reader("recall_at.10", summarise([(0, 0)]))
    result = cross_validate(grid, FOLD_OF, summarise, primary, ["a", "b", "c"])
    chosen = [fold["chosen"] for fold in result["folds"]]
    # fold 0 chooses on folds 1, 2: point 1 scores (0.2+0.2+1+1)/4 = 0.6, point 2 0.3; on
    # fold 1's others the two tie at 0.5, and the first in the grid is taken
    assert chosen == [{"lexical_weight": 1.0}, {"lexical_weight": 1.0}, {"lexical_weight": 2.0}]
    assert [fold["chosen_on_others"] for fold in result["folds"]] == [0.6, 0.5, 0.8]
    held_out = [fold["scores"]["recall_at"]["10"] for fold in result["folds"]]
    assert held_out == [0.0, 0.2, 0.0]  # choosing on the others generalises badly here
    assert [fold["default"]["recall_at"]["10"] for fold in result["folds"]] == [0.5] * 3
    assert result["mean"]["recall_at"]["10"] == 0.0667
    assert (result["min"]["recall_at"]["10"], result["max"]["recall_at"]["10"]) == (0.0, 0.2)
    assert result["pooled"]["recall_at"]["10"] == pytest.approx(0.2 / 3)
    assert result["default_spread"]["mean"]["recall_at"]["10"] == 0.5
    # in-sample, point 2 (0.533) beats point 1 (0.4): what choosing on everything would report
    assert result["best_on_all"]["chosen"] == {"lexical_weight": 2.0}
    assert [round(point["primary"], 3) for point in result["grid"]] == [0.4, 0.533]


def test_without_a_grid_the_folds_partition_the_dev_numbers() -> None:
    primary = metric_reader("recall_at.10", summarise([]))
    result = cross_validate(Grid.of("blend"), FOLD_OF, summarise, primary, ["a", "b", "c"])
    assert [fold["scores"]["recall_at"]["10"] for fold in result["folds"]] == [0.5] * 3
    assert "chosen" not in result["folds"][0] and "grid" not in result
    assert result["std"]["recall_at"]["10"] == 0.0


def test_spread_skips_a_number_a_fold_lacks() -> None:
    summaries = [{"by": {"x": 1.0, "y": 0.0}}, {"by": {"x": 0.0}}, {"by": {"x": 0.5, "y": 1.0}}]
    result = spread(summaries)
    assert result["mean"] == {"by": {"x": 0.5, "y": 0.5}}
    assert result["std"]["by"]["y"] == 0.5
    assert (result["min"]["by"]["x"], result["max"]["by"]["x"]) == (0.0, 1.0)


def test_a_metric_is_checked_against_the_reports_numbers() -> None:
    known = {"turn": {"recall_all@10": 0.0}, "session": {"recall_all@5": 0.0}}
    assert metric_reader("turn.recall_all@10", known)({"turn": {"recall_all@10": 0.7}}) == 0.7
    with pytest.raises(ConfigError, match=r"--metric turn\.recall@10.*turn\.recall_all@10"):
        metric_reader("turn.recall@10", known)

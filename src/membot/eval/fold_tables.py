"""A folded report as Markdown tables: the dev numbers beside each fold's held-out numbers,
their mean ± standard deviation and range, by category or question type, and with a grid, what
each fold chose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# (header, path of keys in a summary)
Column = tuple[str, tuple[str, ...]]

LOCOMO_COLUMNS: tuple[Column, ...] = tuple(
    (f"R@{k}", ("recall_at", str(k))) for k in (5, 10, 25, 50)
)
LONGMEMEVAL_COLUMNS: tuple[Column, ...] = tuple(
    (f"{level} {key}", (level, key))
    for level in ("session", "turn")
    for key in ("recall_all@5", "recall_all@10", "ndcg_any@10")
)
# By question type, the three the targets name (docs/benchmarks.md), to keep the table legible.
LONGMEMEVAL_TYPE_COLUMNS: tuple[Column, ...] = (
    ("session recall_all@5", ("session", "recall_all@5")),
    ("turn recall_all@10", ("turn", "recall_all@10")),
    ("turn ndcg_any@10", ("turn", "ndcg_any@10")),
)


def folded_tables(report: Mapping[str, Any]) -> str:
    """The tables of a report made with folds (``report["folds"]``)."""
    if report["benchmark"] == "locomo":
        columns = by_group = LOCOMO_COLUMNS
        count, groups = "questions", "by_category"
    else:
        columns, by_group = LONGMEMEVAL_COLUMNS, LONGMEMEVAL_TYPE_COLUMNS
        count, groups = "n", "by_question_type"
    parts = [fold_table(report, columns, count), group_table(report, by_group, count, groups)]
    if "grid" in report["folds"]:
        parts.append(choice_table(report))
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


def fold_table(report: Mapping[str, Any], columns: Sequence[Column], count: str) -> list[str]:
    folds = report["folds"]
    rows = [_row(["dev (all questions)", _whole(report[count])], report, columns)]
    for fold in folds["folds"]:
        label = f"fold {fold['fold']} held out ({fold['held_out']})"
        rows.append(_row([label, _whole(fold["scores"][count])], fold["scores"], columns))
    rows.append(_row(["held-out mean ± std", ""], folds, columns, spread=True))
    rows.append(_row(["held-out min – max", ""], folds, columns, span=True))
    if "grid" in folds:
        pooled = ["held-out, pooled", _whole(folds["pooled"][count])]
        rows.append(_row(pooled, folds["pooled"], columns))
    return _table(["", count, *(header for header, _ in columns)], rows)


def group_table(
    report: Mapping[str, Any], columns: Sequence[Column], count: str, groups: str
) -> list[str]:
    """Each category (question type) with its dev number and its held-out mean ± std beside
    it; n is the dev count, with the fold counts' range."""
    folds = report["folds"]
    headers = [groups.removeprefix("by_").replace("_", " "), f"{count} (per fold)"]
    for header, _ in columns:
        headers += [f"{header} dev", f"{header} folds"]
    rows = []
    for key, group in report[groups].items():
        if not group.get(count):
            continue
        counts = [fold["scores"][groups].get(key, {}).get(count, 0) for fold in folds["folds"]]
        cells = [group.get("name", key), f"{group[count]} ({min(counts)}–{max(counts)})"]
        for _, path in columns:
            cells.append(_number(_get(group, path)))
            cells.append(_mean_std(folds, (groups, key, *path)))
        rows.append(cells)
    return _table(headers, rows)


def choice_table(report: Mapping[str, Any]) -> list[str]:
    """What each fold chose on the others, and its held-out primary metric beside the
    default's."""
    folds = report["folds"]
    metric = tuple(folds["metric"].split("."))
    rows = []
    for fold in folds["folds"]:
        rows.append([str(fold["fold"]), _choice(fold["chosen"]),
                     _number(fold["chosen_on_others"]), _number(_get(fold["scores"], metric)),
                     _number(_get(fold["default"], metric))])  # fmt: skip
    mean = ["mean ± std", "", ""]
    for spread in (folds, folds["default_spread"]):
        mean.append(_mean_std(spread, metric))
    rows.append(mean)
    pooled = _get(folds["pooled"], metric)
    rows.append(["pooled", "", "", _number(pooled), _number(_get(report, metric))])
    best = folds["best_on_all"]
    rows.append(["best on all (in-sample)", _choice(best["chosen"]), "",
                 _number(_get(best["scores"], metric)), ""])  # fmt: skip
    name = folds["metric"]
    return _table(["fold", "chose", f"{name} on the other folds", f"{name} held out",
                   f"{name} held out, default"], rows)  # fmt: skip


def _row(
    first: list[str], summary: Mapping[str, Any], columns: Sequence[Column], *,
    spread: bool = False, span: bool = False,
) -> list[str]:  # fmt: skip
    cells = list(first)
    for _, path in columns:
        if spread:
            cells.append(_mean_std(summary, path))
        elif span:
            cells.append(f"{_number(_get(summary['min'], path))} – "
                         f"{_number(_get(summary['max'], path))}")  # fmt: skip
        else:
            cells.append(_number(_get(summary, path)))
    return cells


def _mean_std(spread: Mapping[str, Any], path: Sequence[str]) -> str:
    return f"{_number(_get(spread['mean'], path))} ± {_number(_get(spread['std'], path))}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _get(tree: Any, path: Sequence[str]) -> Any:
    for key in path:
        tree = tree.get(key) if isinstance(tree, Mapping) else None
    return tree


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "–"


def _whole(value: Any) -> str:
    return str(int(value)) if isinstance(value, int | float) else ""


def _choice(chosen: Mapping[str, float]) -> str:
    return ", ".join(f"{name}={value:g}" for name, value in chosen.items()) or "default"

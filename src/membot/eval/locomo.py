"""LoCoMo evidence recall (Maharana et al. 2024, Table 3) of a recall strategy, as a turn runs it.

Each conversation goes into a fresh store through the LoCoMo importer: one thread per session,
dated as the session, every turn a line of one bot with its speaker and ``ref`` = its dia_id.
Each question is the query line (not stored) over every line of the bot, recalled by the live
turn's code with no threshold (:mod:`membot.recall.ranked`); the first k lines in context order,
expansion included, are the context. A question scores the fraction of its
evidence dia_ids in that context (1 without evidence), averaged over all five categories.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings
from membot.embed import Embedder
from membot.eval.folds import Grid, cross_validate, folds_by_group, metric_reader
from membot.eval.harness import cached_embedder, fresh_memory, progress_bar, rounded
from membot.eval.metrics import evidence_recall, mean_by_key
from membot.index.vectors import Scope
from membot.memory.facade import Memory
from membot.memory.importers import load_json_items, read_file
from membot.model import LineInput
from membot.recall.ranked import ranked_lines

K_VALUES = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def evaluate_locomo(
    path: Path,
    strategy: str = "blend",
    embedder: Embedder | str = DEFAULT_EMBEDDER,
    show_progress: bool = True,
    options: Mapping[str, float] | None = None,
    db: str | None = None,
    folds: int | None = None,
    choose: Mapping[str, Sequence[float]] | None = None,
    metric: str = "recall_at.10",
) -> dict[str, Any]:
    """Evidence recall at k = 5, 10, 25, 50 dialog turns, overall and by category; with
    ``folds``, each fold's held-out numbers (whole conversations held out), and with
    ``choose``, the grid point each fold chose on the others by ``metric``
    (:mod:`membot.eval.folds`)."""
    started = time.perf_counter()
    grid = Grid.for_run(strategy, options, choose, folds)
    samples = load_json_items(Path(path))
    metric = f"recall_at.{metric[2:]}" if metric.upper().startswith("R@") else metric
    primary = metric_reader(metric, _summary([(1, {str(k): 0.0 for k in K_VALUES})]))  # checked now
    fold_of = folds_by_group([sample["sample_id"] for sample in samples], folds) if folds else []
    lines_by_sample = lines_by_conversation(path)
    model = cached_embedder(embedder) if isinstance(embedder, str) else embedder
    scored = _score(samples, lines_by_sample, grid, model, db, show_progress)
    report = _report(path, strategy, model.name, len(samples), scored.rows(0), scored.missing,
                     started)  # fmt: skip
    report["options"] = dict(options or {})
    if folds:
        report["folds"] = _folds(samples, scored, grid, fold_of, primary)
        report["folds"]["metric"] = metric
        report["seconds"] = round(time.perf_counter() - started, 1)
    return report


@dataclass
class Scored:
    """Each question's scores under each distinct ranking of a grid."""

    grid: Grid
    categories: list[int] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)  # each question's conversation
    by_ranking: list[list[dict[str, float]]] = field(default_factory=list)
    missing: int = 0

    def rows(self, point: int) -> list[tuple[int, dict[str, float]]]:
        return self.picked([(point, index) for index in range(len(self.categories))])

    def picked(self, picks: Sequence[tuple[int, int]]) -> list[tuple[int, dict[str, float]]]:
        return [(self.categories[index], self.by_ranking[self.grid.points[point].ranking][index])
                for point, index in picks]  # fmt: skip


def _score(
    samples: Sequence[dict[str, Any]],
    lines_by_sample: Mapping[str, list[LineInput]],
    grid: Grid,
    model: Embedder,
    db: str | None,
    show_progress: bool,
) -> Scored:
    """Each conversation stored once; every question asked under every distinct ranking."""
    scored = Scored(grid, by_ranking=[[] for _ in grid.settings])
    with progress_bar(show_progress) as progress:
        total = sum(len(sample["qa"]) for sample in samples)
        task = progress.add_task(f"LoCoMo {grid.strategy}", total=total)
        for sample in samples:
            lines = lines_by_sample[sample["sample_id"]]
            known = {line.ref for line in lines}
            with fresh_memory(model, lines, db) as memory:
                for qa in sample["qa"]:
                    for place, settings in enumerate(grid.settings):
                        scored.by_ranking[place].append(question_scores(memory, settings, qa))
                    scored.categories.append(qa["category"])
                    scored.samples.append(sample["sample_id"])
                    scored.missing += sum(entry not in known for entry in qa["evidence"])
                    progress.advance(task)
    return scored


def _folds(
    samples: Sequence[dict[str, Any]],
    scored: Scored,
    grid: Grid,
    groups: list[int],
    primary: Callable[[Mapping[str, Any]], float],
) -> dict[str, Any]:
    k = max(groups) + 1
    fold_of_sample = dict(zip((sample["sample_id"] for sample in samples), groups, strict=True))
    fold_of = [fold_of_sample[sample] for sample in scored.samples]
    labels = [
        ", ".join(name for name, place in fold_of_sample.items() if place == fold)
        for fold in range(k)
    ]

    def summarise(picks: Sequence[tuple[int, int]]) -> dict[str, Any]:
        return _summary(scored.picked(picks))

    return {"split": "by conversation", **cross_validate(grid, fold_of, summarise, primary, labels)}


def lines_by_conversation(path: str | Path) -> dict[str, list[LineInput]]:
    """The lines of a LoCoMo file as the importer writes them (a thread per session, named
    ``<sample_id>/session_<n>``), by conversation (``sample_id``)."""
    lines: dict[str, list[LineInput]] = defaultdict(list)
    for line in read_file(Path(path), "locomo", DEFAULT_BOT, None).lines:
        lines[line.thread.split("/")[0]].append(line)
    return lines


def question_scores(memory: Memory, settings: BotSettings, qa: dict[str, Any]) -> dict[str, float]:
    context = context_refs(memory, settings, qa["question"], max(K_VALUES))
    return {str(k): evidence_recall(context[:k], qa["evidence"]) for k in K_VALUES}


def context_refs(memory: Memory, settings: BotSettings, question: str, depth: int) -> list[str]:
    """The dia_ids of the first ``depth`` lines a turn asking ``question`` places in context
    (no ``now``: LoCoMo's questions are undated, so only dates naming their year count)."""
    scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None)
    line_ids = ranked_lines(memory.recall_source, settings, question, scope, depth=depth)[:depth]
    return [line.ref or "" for line in memory.store.lines(line_ids)]


def _summary(rows: Sequence[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    """The mean recall at each k of ``rows`` (category, scores), overall and by category."""
    by_category = {}
    for category, name in CATEGORIES.items():
        scores = [row for number, row in rows if number == category]
        by_category[str(category)] = {
            "name": name,
            "questions": len(scores),
            "recall_at": rounded(mean_by_key(scores)),
        }
    return {
        "questions": len(rows),
        "recall_at": rounded(mean_by_key([row for _, row in rows])),
        "by_category": by_category,
    }


def _report(
    path: Path,
    strategy: str,
    embedder: str,
    conversations: int,
    rows: list[tuple[int, dict[str, float]]],
    missing: int,
    started: float,
) -> dict[str, Any]:
    summary = _summary(rows)
    return {
        "benchmark": "locomo",
        "file": str(path),
        "strategy": strategy,
        "embedder": embedder,
        "metric": "evidence recall: share of a question's evidence dia_ids among the first k "
        "dialog turns in context (expansion included); 1 without evidence; all categories",
        "conversations": conversations,
        **summary,
        "evidence_ids_not_in_conversation": missing,
        "seconds": round(time.perf_counter() - started, 1),
    }

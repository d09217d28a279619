"""LoCoMo evidence recall (Maharana et al. 2024, Table 3) of a recall strategy, as a turn runs it.

Each conversation goes into a fresh store through the LoCoMo importer: one thread per session,
dated as the session, every turn a line of one bot with its speaker and ``ref`` = its dia_id.
Each question is the query line (not stored) over every line of the bot, recalled by the live
turn's code with no threshold (:mod:`membot.recall.ranked`); the first k lines in context order,
expansion included, are the context. A question scores the fraction of its
evidence dia_ids in that context (1 without evidence), averaged over all five categories.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings
from membot.embed import Embedder
from membot.eval.harness import cached_embedder, fresh_memory, progress_bar, rounded
from membot.eval.metrics import evidence_recall, mean_by_key
from membot.index.vectors import Scope
from membot.memory.facade import Memory
from membot.memory.importers import read_file
from membot.recall.ranked import ranked_lines, settings_for_ranking

K_VALUES = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def evaluate_locomo(
    path: Path,
    strategy: str = "blend",
    embedder: Embedder | str = DEFAULT_EMBEDDER,
    show_progress: bool = True,
    options: Mapping[str, float] | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """Evidence recall at k = 5, 10, 25, 50 dialog turns, overall and by category."""
    started = time.perf_counter()
    settings = settings_for_ranking(strategy, options)
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    samples = samples if isinstance(samples, list) else [samples]
    lines_by_sample = defaultdict(list)
    for line in read_file(Path(path), "locomo", DEFAULT_BOT, None).lines:
        lines_by_sample[line.thread.split("/")[0]].append(line)
    model = cached_embedder(embedder) if isinstance(embedder, str) else embedder
    rows: list[tuple[int, dict[str, float]]] = []
    missing = 0
    with progress_bar(show_progress) as progress:
        total = sum(len(sample["qa"]) for sample in samples)
        task = progress.add_task(f"LoCoMo {strategy}", total=total)
        for sample in samples:
            lines = lines_by_sample[sample["sample_id"]]
            known = {line.ref for line in lines}
            with fresh_memory(model, lines, db) as memory:
                for qa in sample["qa"]:
                    rows.append((qa["category"], question_scores(memory, settings, qa)))
                    missing += sum(entry not in known for entry in qa["evidence"])
                    progress.advance(task)
    report = _report(path, strategy, model.name, len(samples), rows, missing, started)
    return {**report, "options": dict(options or {})}


def question_scores(memory: Memory, settings: BotSettings, qa: dict[str, Any]) -> dict[str, float]:
    context = context_refs(memory, settings, qa["question"], max(K_VALUES))
    return {str(k): evidence_recall(context[:k], qa["evidence"]) for k in K_VALUES}


def context_refs(memory: Memory, settings: BotSettings, question: str, depth: int) -> list[str]:
    """The dia_ids of the first ``depth`` lines a turn asking ``question`` places in context
    (no ``now``: LoCoMo's questions are undated, so only dates naming their year count)."""
    scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None)
    line_ids = ranked_lines(memory.recall_source, settings, question, scope, depth=depth)[:depth]
    return [line.ref or "" for line in memory.store.lines(line_ids)]


def _report(
    path: Path,
    strategy: str,
    embedder: str,
    conversations: int,
    rows: list[tuple[int, dict[str, float]]],
    missing: int,
    started: float,
) -> dict[str, Any]:
    by_category = {}
    for category, name in CATEGORIES.items():
        scores = [row for number, row in rows if number == category]
        by_category[str(category)] = {
            "name": name,
            "questions": len(scores),
            "recall_at": rounded(mean_by_key(scores)),
        }
    return {
        "benchmark": "locomo",
        "file": str(path),
        "strategy": strategy,
        "embedder": embedder,
        "metric": "evidence recall: share of a question's evidence dia_ids among the first k "
        "dialog turns in context (expansion included); 1 without evidence; all categories",
        "conversations": conversations,
        "questions": len(rows),
        "recall_at": rounded(mean_by_key([row for _, row in rows])),
        "by_category": by_category,
        "evidence_ids_not_in_conversation": missing,
        "seconds": round(time.perf_counter() - started, 1),
    }

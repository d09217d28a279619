"""Calibrate membot's default line-recall threshold for the bundled all-MiniLM-L6-v2.

membot embeds every dialog line (unit vectors, similarity = dot product). At each turn the new
line is scored against all earlier lines; the best matches at or above a threshold (at most 3)
are expanded to +-3 neighbouring lines and put into the prompt. The original design used 0.8 with
OpenAI Ada embeddings; MiniLM cosine scores sit much lower, so this script measures where.

What it measures, on the dev splits in ``../shared/data`` (read in place, never copied):

* LoCoMo: each question with evidence is the query, the lines of its conversation are the
  history; positives are the evidence turns (``dia_id``), negatives every other turn.
* LongMemEval_S: each question is the query, the user turns of its haystack are the history;
  positives are user turns with ``has_answer``, negatives the other user turns.
* Chit-chat: generic lines ("ok", "thanks!", ...) scored against every history, to see which
  threshold keeps small talk from triggering recall.

For thresholds 0.20..0.80 it prints the hit rate (best evidence line at or above the threshold),
the hit rate of the top-3 matches alone and with +-3 expansion, false matches per turn
(non-evidence lines at or above it), the precision of the top-3 matches, how often chit-chat
fires, and a recommended default with the rule that chose it.

Run from the project root (a few minutes on 2 CPU cores)::

    .venv/bin/python benchmarks/calibrate_threshold.py
    .venv/bin/python benchmarks/calibrate_threshold.py --json reports/threshold.json
    .venv/bin/python benchmarks/calibrate_threshold.py --json -   # JSON only, on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from membot.eval import shared_data_dir

DATA = shared_data_dir()
LOCOMO_PATH = DATA / "locomo" / "locomo_dev.json"
LONGMEMEVAL_PATH = DATA / "longmemeval" / "longmemeval_s_dev.json"

THRESHOLDS = tuple(round(0.20 + 0.05 * step, 2) for step in range(13))
MAX_MATCHES = 3
EXPAND = 3
CHITCHAT = (
    "ok",
    "thanks!",
    "haha yes",
    "How are you?",
    "What do you think?",
    "lol",
    "Good morning!",
    "Sounds good.",
    "Yeah, me too.",
    "Really?",
)
# Recommendation rule. For each threshold, tradeoff = (expanded top-3 hit rate / its best value on
# the grid) - (chit-chat fire rate): the share of achievable recall kept, minus the share of small
# talk that would trigger recall. The default is the threshold with the best tradeoff averaged over
# the datasets. RECALL_KEEP gives a second, recall-only reference point for comparison.
RECALL_KEEP = 0.95
DIA_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class History:
    """The earlier lines a query is matched against."""

    name: str
    texts: list[str]
    positions: np.ndarray  # index of each line in the full dialog (all speakers and roles)


@dataclass
class Query:
    """A question with the rows of its history that hold the evidence."""

    source: str
    history: int
    text: str
    evidence: np.ndarray


def load_locomo(path: Path) -> tuple[list[History], list[Query]]:
    """Every LoCoMo conversation as one history; questions whose evidence resolves as queries."""
    histories: list[History] = []
    queries: list[Query] = []
    for conv in json.loads(path.read_text()):
        turns = _locomo_turns(conv["conversation"])
        row_of = {turn["dia_id"]: row for row, turn in enumerate(turns)}
        index = len(histories)
        texts = [turn["text"] for turn in turns]
        histories.append(History(conv["sample_id"], texts, np.arange(len(texts))))
        for qa in conv["qa"]:
            rows = sorted({row_of[e] for e in _dia_ids(qa.get("evidence", [])) if e in row_of})
            if rows:
                queries.append(Query("locomo", index, qa["question"], np.array(rows)))
    return histories, queries


def _locomo_turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns of all sessions in session order."""
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in conversation.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    return [turn for number in numbers for turn in conversation[f"session_{number}"]]


def _dia_ids(evidence: Iterable[str]) -> set[str]:
    """Evidence ids, repairing the few malformed ones ("D8:6; D9:17", "D:11:26")."""
    return {f"D{a}:{b}" for item in evidence for a, b in DIA_ID.findall(str(item))}


def load_longmemeval(path: Path) -> tuple[list[History], list[Query]]:
    """Each question's haystack (user turns only) as a history; has_answer turns as evidence."""
    histories: list[History] = []
    queries: list[Query] = []
    for item in json.loads(path.read_text()):
        texts: list[str] = []
        positions: list[int] = []
        evidence: list[int] = []
        turns = [turn for session in item["haystack_sessions"] for turn in session]
        for position, turn in enumerate(turns):
            if turn["role"] != "user":
                continue
            if turn.get("has_answer"):
                evidence.append(len(texts))
            texts.append(turn["content"])
            positions.append(position)
        histories.append(History(item["question_id"], texts, np.array(positions)))
        if evidence:
            queries.append(
                Query("longmemeval", len(histories) - 1, item["question"], np.array(evidence))
            )
    return histories, queries


def encode_all(spec: str, texts: Iterable[str]) -> tuple[dict[str, np.ndarray], str]:
    """Unit vectors for every distinct text, from membot's embedder ``spec`` and its cache."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from membot.config import cache_dir
    from membot.embed import resolve_embedder

    embedder = resolve_embedder(spec, cache_path=cache_dir() / "embeddings.db")
    unique = list(dict.fromkeys(texts))
    vectors = embedder.embed(unique)
    return dict(zip(unique, vectors.astype(np.float32), strict=True)), embedder.name


def stack(vectors: dict[str, np.ndarray], texts: list[str]) -> np.ndarray:
    return np.stack([vectors[text] for text in texts])


def question_metrics(
    scores: np.ndarray, query: Query, history: History, thresholds: np.ndarray
) -> dict[str, np.ndarray]:
    """Per-threshold outcomes for one question (each array has one value per threshold)."""
    is_evidence = np.zeros(len(scores), dtype=bool)
    is_evidence[query.evidence] = True
    top = np.argsort(-scores, kind="stable")[:MAX_MATCHES]
    selected = scores[top][None, :] >= thresholds[:, None]  # thresholds x top
    near = np.abs(history.positions[top][:, None] - history.positions[query.evidence][None, :])
    top_is_evidence = is_evidence[top][None, :] & selected
    top_near_evidence = (near <= EXPAND).any(axis=1)[None, :] & selected
    return {
        "hit": scores[is_evidence].max() >= thresholds,
        "top3_hit": top_is_evidence.any(axis=1),
        "expanded_hit": top_near_evidence.any(axis=1),
        "false_matches": (scores[~is_evidence][None, :] >= thresholds[:, None]).sum(axis=1),
        "selected": selected.sum(axis=1),
        "selected_evidence": top_is_evidence.sum(axis=1),
    }


def score_queries(
    queries: list[Query], histories: list[History], vectors: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Stacked per-question metrics, and the raw positive / negative score distributions."""
    grid = np.array(THRESHOLDS)
    matrices = [stack(vectors, history.texts) for history in histories]
    rows: list[dict[str, np.ndarray]] = []
    raw: dict[str, list[np.ndarray]] = {
        "positive": [],
        "best_positive": [],
        "negative": [],
        "max_negative": [],
        "rank1": [],
    }
    for query in queries:
        scores = matrices[query.history] @ vectors[query.text]
        rows.append(question_metrics(scores, query, histories[query.history], grid))
        negatives = np.delete(scores, query.evidence)
        raw["positive"].append(scores[query.evidence])
        raw["best_positive"].append(scores[query.evidence].max(keepdims=True))
        raw["negative"].append(negatives)
        raw["max_negative"].append(negatives.max(keepdims=True))
        raw["rank1"].append(raw["best_positive"][-1] > raw["max_negative"][-1])
    stacked = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
    return stacked, {key: np.concatenate(parts) for key, parts in raw.items()}


def summarize(stacked: dict[str, np.ndarray]) -> list[dict[str, float | None]]:
    """One row per threshold: rates over questions, pooled precision of the top-3 matches."""
    table = []
    for i, threshold in enumerate(THRESHOLDS):
        selected = int(stacked["selected"][:, i].sum())
        precision = stacked["selected_evidence"][:, i].sum() / selected if selected else None
        table.append(
            {
                "threshold": threshold,
                "hit_rate": float(stacked["hit"][:, i].mean()),
                "top3_hit_rate": float(stacked["top3_hit"][:, i].mean()),
                "expanded_hit_rate": float(stacked["expanded_hit"][:, i].mean()),
                "false_matches_per_turn": float(stacked["false_matches"][:, i].mean()),
                "fires_rate": float((stacked["selected"][:, i] > 0).mean()),
                "top3_precision": None if precision is None else float(precision),
            }
        )
    return table


def _bare(text: str) -> str:
    """Lower case without punctuation, to spot lines that merely repeat a probe ("Thanks!")."""
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).strip()


def chitchat_scores(
    histories: list[History], vectors: dict[str, np.ndarray]
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """For each generic line: its max score in every history, and its best non-repeat match."""
    probes = stack(vectors, list(CHITCHAT))
    maxima = np.zeros((len(CHITCHAT), len(histories)), dtype=np.float32)
    repeats = np.zeros(len(CHITCHAT), dtype=int)
    best: list[tuple[float, str]] = [(-1.0, "")] * len(CHITCHAT)
    for j, history in enumerate(histories):
        scores = stack(vectors, history.texts) @ probes.T  # lines x probes
        maxima[:, j] = scores.max(axis=0)
        bare = np.array([_bare(text) for text in history.texts])
        for i, line in enumerate(CHITCHAT):
            same = bare == _bare(line)
            repeats[i] += int(same.sum())
            others = np.where(same, -np.inf, scores[:, i])
            row = int(others.argmax())
            best[i] = max(best[i], (float(others[row]), history.texts[row][:60]))
    per_line = [
        {
            "line": line,
            "max_score": float(maxima[i].max()),
            "median_of_history_maxima": float(np.median(maxima[i])),
            "exact_repeats": int(repeats[i]),
            "max_non_repeat": best[i][0],
            "best_non_repeat_match": best[i][1],
        }
        for i, line in enumerate(CHITCHAT)
    ]
    return per_line, maxima


def chitchat_fire_rates(maxima: np.ndarray) -> list[float]:
    """Per threshold: share of (generic line, history) pairs where the line recalls anything."""
    return [float((maxima >= threshold).mean()) for threshold in THRESHOLDS]


def add_tradeoff(table: list[dict[str, Any]]) -> None:
    """Add each row's tradeoff: share of the best expanded recall kept minus chit-chat fires."""
    best = max(row["expanded_hit_rate"] for row in table) or 1.0
    for row in table:
        row["tradeoff"] = row["expanded_hit_rate"] / best - row["chitchat_fire_rate"]


def recommend(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The best-tradeoff threshold, and the largest keeping RECALL_KEEP of the best recall."""
    best = max(row["expanded_hit_rate"] for row in table)
    keep = [row for row in table if row["expanded_hit_rate"] >= RECALL_KEEP * best]
    chosen = max(table, key=lambda row: row["tradeoff"])
    return {
        "threshold": chosen["threshold"],
        "rule": "best tradeoff (expanded top-3 hit rate / best - chit-chat fire rate)",
        "recall_only_threshold": max(row["threshold"] for row in keep),
        "recall_only_rule": f"largest threshold with expanded top-3 hit rate >= "
        f"{RECALL_KEEP:.0%} of its best ({best:.3f})",
    }


def percentiles(values: np.ndarray) -> dict[str, float]:
    points = {"p10": 10, "p50": 50, "p90": 90, "p99": 99, "max": 100}
    return {name: float(np.percentile(values, q)) for name, q in points.items()}


def evaluate(
    name: str, queries: list[Query], histories: list[History], vectors: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Everything reported for one dataset."""
    stacked, raw = score_queries(queries, histories, vectors)
    per_line, maxima = chitchat_scores(histories, vectors)
    table = summarize(stacked)
    for row, rate in zip(table, chitchat_fire_rates(maxima), strict=True):
        row["chitchat_fire_rate"] = rate
    add_tradeoff(table)
    return {
        "dataset": name,
        "questions": len(queries),
        "histories": len(histories),
        "history_lines": int(sum(len(history.texts) for history in histories)),
        "best_evidence_ranks_first": float(raw["rank1"].mean()),
        "distributions": {key: percentiles(raw[key]) for key in raw if key != "rank1"},
        "table": table,
        "chitchat": per_line,
        "recommendation": recommend(table),
    }


COLUMNS = (
    ("threshold", "thr", "{:.2f}"),
    ("hit_rate", "hit", "{:.3f}"),
    ("top3_hit_rate", "top3hit", "{:.3f}"),
    ("expanded_hit_rate", "exp3hit", "{:.3f}"),
    ("false_matches_per_turn", "false/turn", "{:.2f}"),
    ("fires_rate", "fires", "{:.3f}"),
    ("top3_precision", "top3prec", "{:.3f}"),
    ("chitchat_fire_rate", "chat-fires", "{:.3f}"),
    ("tradeoff", "tradeoff", "{:+.3f}"),
)


def format_table(table: list[dict[str, Any]]) -> str:
    widths = [max(len(header), 7) for _, header, _ in COLUMNS]
    lines = ["  ".join(h.rjust(w) for (_, h, _), w in zip(COLUMNS, widths, strict=True))]
    for row in table:
        cells = ["-" if row[key] is None else fmt.format(row[key]) for key, _, fmt in COLUMNS]
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    """The plain-text block for one dataset."""
    out = [
        f"== {report['dataset']}: {report['questions']} questions, {report['histories']} "
        f"histories, {report['history_lines']} lines ==",
        f"best evidence line outranks every other line: {report['best_evidence_ranks_first']:.3f}",
        "score distributions (p10 / p50 / p90 / p99 / max):",
    ]
    for key, dist in report["distributions"].items():
        out.append(f"  {key:<14}" + " / ".join(f"{value:.3f}" for value in dist.values()))
    out += [
        "",
        format_table(report["table"]),
        "",
        "chit-chat: max over all histories, median of per-history maxima, exact repeats, "
        "max over non-repeats <- that line",
    ]
    for item in report["chitchat"]:
        out.append(
            f"  {item['line']!r:<21} max {item['max_score']:.3f}  median "
            f"{item['median_of_history_maxima']:.3f}  repeats {item['exact_repeats']:>3}  "
            f"other {item['max_non_repeat']:.3f} <- {item['best_non_repeat_match']!r}"
        )
    rec = report["recommendation"]
    out.append(
        f"recommended: {rec['threshold']:.2f} ({rec['rule']}); recall-only reference: "
        f"{rec['recall_only_threshold']:.2f} ({rec['recall_only_rule']})"
    )
    return "\n".join(out)


LEGEND = """\
hit        share of questions whose best evidence line scores >= thr
top3hit    share of questions with an evidence line among the top-3 matches >= thr
exp3hit    same, counting a top-3 match within +-3 dialog lines of an evidence line
false/turn mean number of non-evidence lines >= thr per question
fires      share of questions where anything at all is recalled (some line >= thr)
top3prec   pooled share of the top-3 matches >= thr that are evidence lines
chat-fires share of (chit-chat line, history) pairs where the chit-chat line recalls anything
tradeoff   exp3hit / its best value on the grid - chat-fires (higher is better)"""


def combined_recommendation(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The default: the threshold with the best tradeoff averaged over the datasets."""
    tradeoffs = np.mean([[row["tradeoff"] for row in r["table"]] for r in reports], axis=0)
    best = int(np.argmax(tradeoffs))
    return {
        "threshold": THRESHOLDS[best],
        "rule": "best tradeoff averaged over the datasets",
        "mean_tradeoff": {
            f"{t:.2f}": round(float(v), 3) for t, v in zip(THRESHOLDS, tradeoffs, strict=True)
        },
        "per_dataset": {r["dataset"]: r["recommendation"]["threshold"] for r in reports},
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO_PATH)
    parser.add_argument("--longmemeval", type=Path, default=LONGMEMEVAL_PATH)
    parser.add_argument("--embedder", default="minilm", help="membot embedder spec")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the results as JSON ('-' prints only JSON, on stdout)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    datasets = {
        "LoCoMo (dev)": load_locomo(args.locomo),
        "LongMemEval_S (dev, user turns)": load_longmemeval(args.longmemeval),
    }
    texts = [text for hs, qs in datasets.values() for h in hs for text in h.texts]
    texts += [q.text for _, qs in datasets.values() for q in qs] + list(CHITCHAT)
    vectors, model_name = encode_all(args.embedder, texts)
    reports = [evaluate(name, qs, hs, vectors) for name, (hs, qs) in datasets.items()]
    result: dict[str, Any] = {
        "model": model_name,
        "max_matches": MAX_MATCHES,
        "expand": EXPAND,
        "datasets": reports,
        "recommendation": combined_recommendation(reports),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        payload = json.dumps(result, indent=2)
        if args.json == "-":
            print(payload)
            return
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(payload + "\n")
    print(LEGEND, end="\n\n")
    print("\n\n".join(format_report(report) for report in reports))
    rec = result["recommendation"]
    curve = "  ".join(f"{t}:{v:+.3f}" for t, v in rec["mean_tradeoff"].items())
    print(f"\nmean tradeoff by threshold: {curve}")
    print(
        f"RECOMMENDED DEFAULT THRESHOLD: {rec['threshold']:.2f} ({rec['rule']}; "
        f"per dataset {rec['per_dataset']}); {len(vectors)} texts in {result['seconds']} s"
    )


if __name__ == "__main__":
    main()

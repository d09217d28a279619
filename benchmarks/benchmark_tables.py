"""Markdown tables for docs/benchmarks.md from `membot eval ... --out` reports.

    for s in lines bm25 hybrid prune pairs windows blend; do
      .venv/bin/membot eval locomo ../shared/data/locomo/locomo_dev.json --strategy $s \
          --out reports/locomo_$s.json
      .venv/bin/membot eval longmemeval ../shared/data/longmemeval/longmemeval_s_dev.json \
          --strategy $s --out reports/longmemeval_$s.json
    done
    .venv/bin/python benchmarks/benchmark_tables.py reports/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LONGMEMEVAL_KEYS = (
    ("session", "recall_any@5"),
    ("session", "recall_all@5"),
    ("session", "ndcg_any@10"),
    ("session_turn2session", "recall_all@5"),
    ("turn", "recall_all@10"),
    ("turn", "ndcg_any@10"),
    ("session_any_gold", "recall_any@5"),
)


def locomo_table(reports: list[dict]) -> str:
    rows = ["| strategy | R@5 | R@10 | R@25 | R@50 | seconds |", "|---|---|---|---|---|---|"]
    for report in reports:
        at = report["recall_at"]
        cells = " | ".join(f"{at[k]:.3f}" for k in ("5", "10", "25", "50"))
        rows.append(f"| {report['strategy']} | {cells} | {report.get('seconds', '')} |")
    return "\n".join(rows)


def longmemeval_table(reports: list[dict]) -> str:
    header = " | ".join(f"{level} {metric}" for level, metric in LONGMEMEVAL_KEYS)
    rows = [f"| strategy | {header} | seconds |", "|---" * (len(LONGMEMEVAL_KEYS) + 2) + "|"]
    for name, source in [(r["strategy"], r) for r in reports] + [
        ("bm25_baseline", {**reports[0]["bm25_baseline"], "seconds": ""})
    ]:
        cells = " | ".join(f"{source[level][metric]:.3f}" for level, metric in LONGMEMEVAL_KEYS)
        rows.append(f"| {name} | {cells} | {source.get('seconds', '')} |")
    return "\n".join(rows)


def main() -> None:
    reports = [json.loads(Path(path).read_text()) for path in sys.argv[1:]]
    locomo = [r for r in reports if r["benchmark"] == "locomo"]
    longmemeval = [r for r in reports if r["benchmark"] == "longmemeval"]
    if locomo:
        print(f"LoCoMo ({locomo[0]['questions']} questions)\n\n{locomo_table(locomo)}\n")
    if longmemeval:
        first = longmemeval[0]
        print(f"LongMemEval_S (n = {first['n']}; session_any_gold over "
              f"{first['n_session_any_gold']})\n\n{longmemeval_table(longmemeval)}")  # fmt: skip


if __name__ == "__main__":
    main()

"""How much the PostgreSQL store's approximate (HNSW) search misses against exact search.

Every line of the LoCoMo and LongMemEval dev files goes into one bot that shares memory
across people (about 33,000 lines, embedded with the bundled MiniLM through the embedding
cache), stored in PostgreSQL, where the store builds its HNSW index as lines arrive. Every
question of both files is then searched in that bot's scope twice: exactly (one matrix
product over every vector) and through the index at several ``ef_search`` values. It prints
recall@10 (the share of the exact ten found by the index, averaged over questions) and the
index search's median and 95th-percentile time.

Run from the project root; with no ``--db`` it starts a throwaway PostgreSQL with pgvector
(``pgserver``, a dev dependency)::

    .venv/bin/python benchmarks/hnsw_recall.py [--db postgresql://…] [--ef 40 100 200]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from membot import Memory, read_file
from membot.eval.harness import cached_embedder
from membot.store import open_postgres

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FILES = (
    ("locomo", DATA / "locomo" / "locomo_dev.json"),
    ("longmemeval", DATA / "longmemeval" / "longmemeval_s_dev.json"),
)
BOT, K = "shared", 10


def questions() -> list[str]:
    locomo = json.loads(FILES[0][1].read_text(encoding="utf-8"))
    asked = [qa["question"] for sample in locomo for qa in sample["qa"]]
    longmemeval = json.loads(FILES[1][1].read_text(encoding="utf-8"))
    return asked + [item["question"] for item in longmemeval]


def throwaway_postgres() -> str:
    import pgserver
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="membot-hnsw-"))
    os.environ["XDG_RUNTIME_DIR"] = str(folder)
    url = pgserver.get_server(folder / "data", cleanup_mode="delete").get_uri()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", help="a PostgreSQL URL (default: a throwaway server)")
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    args = parser.parse_args()
    url = args.db or throwaway_postgres()
    store = open_postgres(url, schema=f"membot_hnsw_{os.getpid()}")
    embedder = cached_embedder("minilm")
    memory = Memory(store, embedder=embedder)
    try:
        started = time.perf_counter()
        for fmt, path in FILES:
            memory.add_many(read_file(path, fmt, BOT, None).lines)
        print(f"{memory.count_lines()} lines stored in {time.perf_counter() - started:.0f} s")
        bot_id = store.bot_id(BOT) or 0
        rows = store.scope_vector_snapshot(bot_id, None, None, 0).rows
        queries = embedder.embed(questions())
        exact = np.argsort(-(queries @ rows.vectors.T), axis=1)[:, :K]
        print(f"{len(queries)} questions, k = {K}, exact search over the bot's {len(rows.ids)}")
        for ef in args.ef:
            found, seconds = [], []
            for query, best in zip(queries, exact, strict=True):
                start = time.perf_counter()
                hits = store.approximate_search(query, bot_id, None, K, ef_search=ef)
                seconds.append(time.perf_counter() - start)
                wanted = set(rows.ids[best].tolist())
                found.append(len(wanted & {line_id for line_id, _ in hits}) / K)
            p50, p95 = np.percentile(np.asarray(seconds) * 1000, [50, 95])
            print(
                f"ef_search {ef:>4}: recall@{K} {np.mean(found):.4f}  "
                f"p50 {p50:.1f} ms  p95 {p95:.1f} ms"
            )
    finally:
        memory.close()
        store.drop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()

"""How much approximate search misses against exact search, on each store.

Every line of the LoCoMo and LongMemEval dev files goes into one bot that shares memory across
people (about 33,000 lines, embedded with the bundled MiniLM through the embedding cache). Every
question of each file is then searched in that bot's scope exactly (one matrix product over
every vector, each line's cosine raised toward its best part's as every search scores it) and
approximately: through the path recall takes for a shared scope past
``MEMBOT_APPROXIMATE_FROM`` lines (``membot.index.approximate``: the index nominates 200 lines,
which with their neighbours are scored exactly; forced on here whatever the scope's size), on SQLite
(usearch, int8) and PostgreSQL (pgvector HNSW). It prints recall@10 (the share of the exact ten
found, averaged over questions) per file and store, with the search's median and 95th-percentile
time; on PostgreSQL also the index alone (``approximate_search``, k = 10) at several
``ef_search`` values, against exact search over the lines' own vectors (the index holds no
parts).

Run from the project root; with no ``--db`` it starts a throwaway PostgreSQL with pgvector
(``pgserver``, a dev dependency)::

    .venv/bin/python benchmarks/hnsw_recall.py [--stores sqlite postgresql] [--db postgresql://…]
        [--ef 40 100 200]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from machine import announce

from membot import Memory, read_file
from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder
from membot.index.approximate import ApproximateScopes
from membot.index.scope import PART_WEIGHT, with_parts
from membot.index.vectors import Scope
from membot.store import SqliteStore, open_postgres

DATA = shared_data_dir()  # MEMBOT_DATA, or ../shared/data
FILES = {
    "locomo": DATA / "locomo" / "locomo_dev.json",
    "longmemeval": DATA / "longmemeval" / "longmemeval_s_dev.json",
}
BOT, K = "shared", 10


def questions() -> dict[str, list[str]]:
    locomo = json.loads(FILES["locomo"].read_text(encoding="utf-8"))
    longmemeval = json.loads(FILES["longmemeval"].read_text(encoding="utf-8"))
    return {
        "locomo": [qa["question"] for sample in locomo for qa in sample["qa"]],
        "longmemeval": [item["question"] for item in longmemeval],
    }


def throwaway_postgres() -> str:
    import psycopg
    from pgserver.postgres_server import get_server

    folder = Path(tempfile.mkdtemp(prefix="membot-hnsw-"))
    os.environ["XDG_RUNTIME_DIR"] = str(folder)
    url = get_server(folder / "data", cleanup_mode="delete").get_uri()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


Search = Callable[[np.ndarray], list[tuple[int, float]]]


def _alone(store: Any, bot_id: int, ef_search: int, query: np.ndarray) -> list[tuple[int, float]]:
    """The PostgreSQL index alone, searched at ``ef_search``."""
    return store.approximate_search(query, bot_id, None, K, ef_search=ef_search)


def _parts(store: Any, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every part vector of the lines ``ids`` (their sentences, a long line's windows) with
    the position in ``ids`` of the line each belongs to."""
    position = {line_id: row for row, line_id in enumerate(ids.tolist())}
    owners: list[int] = []
    vectors: list[np.ndarray] = []
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000].tolist()
        for line_id, parts in store.line_parts(chunk).items():
            owners += [position[line_id]] * len(parts.vectors)
            vectors.append(np.asarray(parts.vectors, dtype=np.float32))
    width = 0 if not vectors else vectors[0].shape[1]
    stacked = np.concatenate(vectors) if vectors else np.zeros((0, width), np.float32)
    return np.asarray(owners, dtype=np.int64), stacked


def recall(search: Search, queries: np.ndarray, exact: np.ndarray, ids: np.ndarray) -> str:
    """recall@K of ``search`` against the exact top K (rows of positions into ``ids``)."""
    found, seconds = [], []
    for query, best in zip(queries, exact, strict=True):
        start = time.perf_counter()
        hits = search(query)[:K]
        seconds.append(time.perf_counter() - start)
        found.append(len(set(ids[best].tolist()) & {line_id for line_id, _ in hits}) / K)
    p50, p95 = np.percentile(np.asarray(seconds) * 1000, [50, 95])
    return f"recall@{K} {np.mean(found):.4f}  p50 {p50:.1f} ms  p95 {p95:.1f} ms"


def measure(kind: str, store, embedder, asked: dict[str, np.ndarray], ef: list[int]) -> None:
    memory = Memory(store, embedder=embedder)
    started = time.perf_counter()
    for fmt, path in FILES.items():
        memory.add_many(read_file(path, fmt, BOT, None).lines)
    print(f"{kind}: {memory.count_lines()} lines stored in {time.perf_counter() - started:.0f} s")
    bot_id = store.bot_id(BOT) or 0
    scope = Scope.of(bot_id, None)
    rows = store.scope_vector_snapshot(bot_id, None, None, 0).rows
    approximate = ApproximateScopes(store, from_lines=0).scope_for(scope, None)
    assert approximate is not None
    started = time.perf_counter()
    approximate.search(next(iter(asked.values()))[0], scope, K, None)  # builds a usearch index
    print(f"{kind}: index ready in {time.perf_counter() - started:.1f} s")
    owners, part_vectors = _parts(store, rows.ids)
    for name, queries in asked.items():
        line_scores = queries @ rows.vectors.T
        # exact search as a smaller scope runs it: each line raised toward its best part
        best = np.full(line_scores.shape, -np.inf, dtype=np.float32)
        for row, part_scores in enumerate(queries @ part_vectors.T):
            np.maximum.at(best[row], owners, part_scores)
        exact = np.argsort(-with_parts(line_scores, best, PART_WEIGHT), axis=1)[:, :K]
        print(f"{kind}, {name} ({len(queries)} questions): membot.index.approximate  ", end="")
        print(recall(lambda q: approximate.search(q, scope, K, None), queries, exact, rows.ids))
        # the index alone holds the lines' own vectors: measured against those alone
        exact_lines = np.argsort(-line_scores, axis=1)[:, :K]
        for each in ef if kind == "postgresql" else []:
            index_alone = recall(
                partial(_alone, store, bot_id, each),
                queries,
                exact_lines,
                rows.ids,
            )
            print(f"{kind}, {name}: the index alone, ef_search {each:>4}: {index_alone}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--db", help="a PostgreSQL URL (default: a throwaway server)")
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    args = parser.parse_args()
    announce()
    embedder = cached_embedder("minilm")
    asked = {name: embedder.embed(texts) for name, texts in questions().items()}
    for kind in args.stores:
        if kind == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                sqlite = SqliteStore(Path(folder) / "recall.db")
                try:
                    measure(kind, sqlite, embedder, asked, args.ef)
                finally:
                    sqlite.close()
            continue
        store = open_postgres(args.db or throwaway_postgres(), schema=f"membot_hnsw_{os.getpid()}")
        try:
            measure(kind, store, embedder, asked, args.ef)
        finally:
            store.drop()
            store.close()


if __name__ == "__main__":
    main()

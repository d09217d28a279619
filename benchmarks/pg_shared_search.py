"""Where a large shared scope's search goes on PostgreSQL: per LoCoMo question, the time of
the approximate index's nominees, of reading them back with their neighbours, of the
full-text (BM25) query over those lines (what a blended turn asks), and, for comparison, of
the same query over every line of the bot holding a word; then ``EXPLAIN (ANALYZE, BUFFERS)``
of the blend's query for the first one.

Runs on a PostgreSQL store that ``benchmarks/scale.py`` built (kept under its cache folder):

    .venv/bin/python benchmarks/pg_shared_search.py [--lines 100000] [--questions 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psycopg
import scale
from machine import announce

from membot.embed import default_embedder
from membot.index import approximate as ann
from membot.recall.bm25 import query_terms
from membot.store import open_store
from membot.store.approximate_postgres import PgvectorNominator
from membot.store.postgres import PostgresStore
from membot.store.postgres_lexical import bm25_query
from membot.store.sql_store import LexicalQuery

ROLES = ("human", "bot")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="which scale.py store")
    parser.add_argument("--questions", type=int, default=8)
    args = parser.parse_args()
    announce()
    url = scale.location("postgresql", args.lines, scale.CACHE)
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    embedder = default_embedder()
    bot = store.bot_id(scale.BOT)
    if bot is None:
        sys.exit(f"no store of {args.lines:,} lines: run benchmarks/scale.py first")
    nominator = PgvectorNominator(store, bot)
    asked = [question for question, _ in scale.questions(args.questions)]
    first: tuple[list[str], list[int]] | None = None
    for question in asked:
        vector = embedder.embed([question])[0]
        words = list(query_terms(question))
        started = time.perf_counter()
        nominees = nominator.nominate(vector, ann.CANDIDATES)
        nominated = time.perf_counter()
        rows = store.vector_rows_around(nominees)
        around = time.perf_counter()
        among = rows.ids.tolist()
        scored = store.lexical_search(words, bot, None, None, ROLES, limit=len(among),
                                      max_postings=ann.LEXICAL_POSTINGS, among=among)  # fmt: skip
        done = time.perf_counter()
        found = store.lexical_search(
            words, bot, None, None, ROLES, limit=1000, max_postings=ann.LEXICAL_POSTINGS
        )
        everywhere = time.perf_counter()
        print(
            f"nominate {1000 * (nominated - started):6.1f} ms  "
            f"around {1000 * (around - nominated):5.1f} ms ({len(rows.ids)} lines)  "
            f"lexical {1000 * (done - around):5.1f} ms ({len(scored)} lines)  "
            f"[every line: {1000 * (everywhere - done):6.1f} ms, {len(found)} lines]  {question}"
        )
        first = first or (words, among)
    store.close()
    assert first is not None
    words, among = first
    sql, params = bm25_query(
        LexicalQuery(words, bot, None, None, ROLES, len(among), ann.LEXICAL_POSTINGS, among)
    )
    with psycopg.connect(url) as db:
        print(f"\nEXPLAIN (ANALYZE, BUFFERS) of the lexical query for: {asked[0]}")
        for (line,) in db.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall():
            print(line)


if __name__ == "__main__":
    main()

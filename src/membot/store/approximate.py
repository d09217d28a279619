"""The approximate index a store keeps of a bot's lines, for the scope of a bot that shares
memory once it is large (the search that reads the nominees back and scores them exactly is
:mod:`membot.index.approximate`).

- PostgreSQL: pgvector's HNSW index, which the store keeps up to date as lines are written
  (:mod:`membot.store.approximate_postgres`).
- SQLite: a usearch HNSW index of int8 vectors saved beside the store file, built from the
  store and brought up to date from it (:mod:`membot.store.approximate_sqlite`).

:func:`approximate_nominator` gives a store's; :func:`drop_saved_indexes` removes what a store
saved of lines that were forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from membot.store.base import VectorRows

# Nodes a search visits: twice the 200 candidates a search asks for, so the nominees are the
# near ones the graph finds rather than the last it reached (benchmarks/hnsw_recall.py
# measures the recall).
SEARCH_DEPTH = 400


@runtime_checkable
class NearLines(Protocol):
    """What approximate search reads from any store."""

    def scope_line_count(self, bot_id: int) -> int: ...
    def vector_rows_around(self, line_ids: list[int]) -> VectorRows: ...
    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_id: int | None,
        thread_id: int | None,
        roles: Sequence[str],
        limit: int,
        max_postings: int | None = None,
        among: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]: ...


@runtime_checkable
class IndexedStore(NearLines, Protocol):
    """A store that keeps an approximate index itself (PostgreSQL with pgvector)."""

    def count_lines(self) -> int: ...
    def approximate_search(
        self, query: np.ndarray, bot_id: int, person_id: int | None, k: int, ef_search: int
    ) -> list[tuple[int, float]]: ...


@runtime_checkable
class PagedStore(NearLines, Protocol):
    """A store file whose vectors an index beside it is built from (SQLite)."""

    path: Path

    def bot_generation(self, bot_id: int) -> int: ...
    def bot_line_ids(self, bot_id: int) -> np.ndarray: ...
    def get_meta(self, key: str) -> str | None: ...
    def vector_page(self, bot_id: int, after_id: int, limit: int) -> VectorRows: ...


class Nominator(Protocol):
    """A store's approximate index of one bot's lines."""

    def nominate(self, query: np.ndarray, count: int) -> list[int]:
        """The ids of about ``count`` lines of the bot nearest ``query``."""
        ...

    def take_out_removed(self) -> None:
        """After lines of the bot were removed: see that no search nominates them."""
        ...


def approximate_nominator(store: object, bot_id: int) -> Nominator | None:
    """The approximate index the store keeps of the bot's lines; None for a store that
    keeps none (search such a scope exactly)."""
    if isinstance(store, IndexedStore):
        from membot.store.approximate_postgres import PgvectorNominator

        return PgvectorNominator(store, bot_id)
    if isinstance(store, PagedStore):
        from membot.store.approximate_sqlite import UsearchNominator

        return UsearchNominator(store, bot_id)
    return None


def drop_saved_indexes(store: object) -> None:
    """Remove the approximate indexes a store saved of lines since forgotten (a SQLite
    store's files beside it; PostgreSQL's index lives in its tables, rewritten with them)."""
    if isinstance(store, PagedStore):
        from membot.store.approximate_sqlite import drop_saved_files

        drop_saved_files(store)

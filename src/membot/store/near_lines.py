"""What approximate search reads from a store, and what a store's approximate index of one
bot's lines answers (:mod:`membot.store.approximate`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from membot.store.base import LineParts, VectorRows

# Nodes a search visits: twice the 200 candidates a search asks for, so the nominees are the
# near ones the graph finds rather than the last it reached (benchmarks/hnsw_recall.py
# measures the recall).
SEARCH_DEPTH = 400


@runtime_checkable
class NearLines(Protocol):
    """What approximate search reads from any store."""

    def scope_line_count(self, bot_id: int) -> int: ...
    def vector_rows_around(self, line_ids: list[int]) -> VectorRows: ...
    def line_parts(self, line_ids: Sequence[int]) -> dict[int, LineParts]: ...
    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_ids: Sequence[int] | None,
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

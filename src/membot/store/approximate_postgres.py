"""Approximate search on PostgreSQL: nominees from pgvector's HNSW index, which the store
keeps up to date as lines are written (see :mod:`membot.store.approximate`)."""

from __future__ import annotations

import numpy as np

from membot.store.near_lines import SEARCH_DEPTH, IndexedStore


class PgvectorNominator:
    """Nominees from pgvector's HNSW index over every line of the store, filtered by bot.
    Before pgvector 0.8 the filter applies to the ``ef_search`` lines the index visited, so
    a bot holding a share of the store visits that many more (up to pgvector's 1,000)."""

    def __init__(self, store: IndexedStore, bot_id: int) -> None:
        self.store, self.bot_id = store, bot_id
        share = store.scope_line_count(bot_id) / max(store.count_lines(), 1)
        self.depth = int(SEARCH_DEPTH / max(share, 1e-3))

    def nominate(self, query: np.ndarray, count: int) -> list[int]:
        found = self.store.approximate_search(query, self.bot_id, None, count, self.depth)
        return [line_id for line_id, _ in found]

    def take_out_removed(self) -> None:
        """Nothing to do: the store's index loses a line with its row."""

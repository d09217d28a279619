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

from membot.store.approximate_postgres import PgvectorNominator
from membot.store.approximate_sqlite import UsearchNominator, drop_saved_files
from membot.store.near_lines import IndexedStore, NearLines, Nominator, PagedStore

__all__ = ["NearLines", "Nominator", "approximate_nominator", "drop_saved_indexes"]


def approximate_nominator(store: object, bot_id: int) -> Nominator | None:
    """The approximate index the store keeps of the bot's lines; None for a store that
    keeps none (search such a scope exactly)."""
    if isinstance(store, IndexedStore):
        return PgvectorNominator(store, bot_id)
    if isinstance(store, PagedStore):
        return UsearchNominator(store, bot_id)
    return None


def drop_saved_indexes(store: object) -> None:
    """Remove the approximate indexes a store saved of lines since forgotten (a SQLite
    store's files beside it; PostgreSQL's index lives in its tables, rewritten with them)."""
    if isinstance(store, PagedStore):
        drop_saved_files(store)

"""Exact vector search over every stored line: one matrix product, no Python loop over lines.

:class:`VectorIndex` keeps the store's vectors in a float32 matrix in memory. It appends lines
written since its last look (cheap: one query for ``id > last id``) and reloads everything
when the store says lines were removed or re-embedded (its ``generation`` changed).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import ThreadpoolController

from membot.recall.lines import Hit
from membot.store.base import ROLE_CODES, Store, VectorRows

_COLUMNS = ("ids", "bot_ids", "person_ids", "thread_ids", "seqs", "roles", "created")


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def similarities(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` (float32) on one BLAS thread: a product of a few thousand rows is
    too small to share out, and BLAS's own threads made it many times slower whenever
    another process kept a core busy (docs/performance.md)."""
    with _blas().limit(limits=1, user_api="blas"):
        return matrix @ np.asarray(query, dtype=np.float32)


@dataclass(frozen=True)
class Scope:
    """Which lines a search may return.

    ``person_id`` None means every person of the bot (only for bots that share memory).
    ``thread_id`` limits the search to one thread. Lines of ``window_thread_id`` with
    ``seq >= window_from_seq`` are skipped: they are in the prompt's recent window already.
    """

    bot_id: int
    person_id: int | None
    thread_id: int | None = None
    window_thread_id: int | None = None
    window_from_seq: int | None = None
    roles: tuple[str, ...] = ("human", "bot")


@dataclass(frozen=True)
class InScope:
    """The lines of one scope as parallel arrays, with their cosine to one query."""

    ids: np.ndarray
    thread_ids: np.ndarray
    seqs: np.ndarray
    scores: np.ndarray
    created: np.ndarray  # seconds since 1970, UTC

    @classmethod
    def empty(cls) -> InScope:
        nothing = np.zeros(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, np.zeros(0, dtype=np.float32),
                   np.zeros(0, dtype=np.float64))  # fmt: skip

    def neighbour_scores(self) -> np.ndarray:
        """Each line's previous plus next line's score in its thread; a neighbour outside
        the scope (or the thread) counts the line's own score."""
        keys = self.thread_ids.astype(np.int64) * 2**32 + self.seqs.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        total = np.zeros_like(self.scores)
        for step in (-1, 1):
            wanted = keys + step
            at = np.clip(np.searchsorted(sorted_keys, wanted), 0, max(len(keys) - 1, 0))
            found = sorted_keys[at] == wanted if len(keys) else np.zeros(0, dtype=bool)
            total += np.where(found, self.scores[order[at]], self.scores)
        return total


class VectorIndex:
    """An in-memory float32 matrix of the store's vectors with their owners, grown in place."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._generation: int | None = None
        self._size = 0
        self._columns: dict[str, np.ndarray] = {}
        self._vectors = np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return self._size

    def refresh(self) -> None:
        last_id = int(self._columns["ids"][self._size - 1]) if self._size else 0
        generation, rows = self.store.vector_snapshot(self._generation, last_id)
        if generation != self._generation:  # lines were removed or re-embedded: start over
            self._size = 0
            self._columns = {}
            self._generation = generation
        self._append(rows)

    def _append(self, rows: VectorRows) -> None:
        count = len(rows.ids)
        if count == 0:
            return
        needed = self._size + count
        if (
            not self._columns
            or needed > len(self._columns["ids"])
            or (self._vectors.shape[1] != rows.vectors.shape[1])
        ):
            self._grow(max(needed, 2 * self._size, 1024), rows.vectors.shape[1])
        end = self._size + count
        for name in _COLUMNS:
            self._columns[name][self._size : end] = getattr(rows, name)
        self._vectors[self._size : end] = rows.vectors
        self._size = end

    def _grow(self, capacity: int, dimension: int) -> None:
        old_columns, old_vectors, size = self._columns, self._vectors, self._size
        template = VectorRows.empty(dimension)
        self._columns = {
            name: np.zeros(capacity, dtype=getattr(template, name).dtype) for name in _COLUMNS
        }
        self._vectors = np.zeros((capacity, dimension), dtype=np.float32)
        if size and old_vectors.shape[1] == dimension:
            for name, column in old_columns.items():
                self._columns[name][:size] = column[:size]
            self._vectors[:size] = old_vectors[:size]
        else:
            self._size = 0

    def _mask(self, scope: Scope) -> np.ndarray:
        size = self._size
        column = {name: values[:size] for name, values in self._columns.items()}
        mask = column["bot_ids"] == scope.bot_id
        if scope.person_id is not None:
            mask &= column["person_ids"] == scope.person_id
        if scope.thread_id is not None:
            mask &= column["thread_ids"] == scope.thread_id
        if scope.window_thread_id is not None and scope.window_from_seq is not None:
            in_window = (column["thread_ids"] == scope.window_thread_id) & (
                column["seqs"] >= scope.window_from_seq
            )
            mask &= ~in_window
        allowed = [ROLE_CODES[role] for role in scope.roles]
        mask &= np.isin(column["roles"], allowed)
        return mask

    def search(
        self, query: np.ndarray, scope: Scope, k: int, min_score: float | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best (line id, score) pairs in scope, best first."""
        self.refresh()
        if self._size == 0 or k <= 0:
            return []
        scores = similarities(self._vectors[: self._size], query)
        scores = np.where(self._mask(scope), scores, -np.inf)
        if min_score is not None:
            scores = np.where(scores >= min_score, scores, -np.inf)
        k = min(k, self._size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        ids = self._columns["ids"]
        return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    def scored_in_scope(self, query: np.ndarray, scope: Scope) -> InScope:
        """Every line in scope with its cosine to ``query``, in index (id) order."""
        self.refresh()
        if self._size == 0:
            return InScope.empty()
        mask = self._mask(scope)
        scores = similarities(self._vectors[: self._size], query)[mask]
        column = {
            name: self._columns[name][: self._size][mask]
            for name in ("ids", "thread_ids", "seqs", "created")
        }
        return InScope(
            column["ids"], column["thread_ids"], column["seqs"], scores, column["created"]
        )

    def dates(self) -> dict[int, float]:
        """When each indexed line was said (seconds since 1970, UTC), by line id."""
        self.refresh()
        if self._size == 0:
            return {}
        ids, created = (self._columns[name][: self._size].tolist() for name in ("ids", "created"))
        return dict(zip(ids, created, strict=True))

    def locate(self, scored: Iterable[tuple[int, float]]) -> list[Hit]:
        """Hits for (line id, score) pairs, with their thread and seq; unknown ids dropped."""
        hits = []
        for line_id, score in scored:
            position = self.position_of(line_id)
            if position is not None:
                hits.append(Hit(line_id, position[0], position[1], score))
        return hits

    def position_of(self, line_id: int) -> tuple[int, int] | None:
        """(thread id, seq) of an indexed line."""
        ids = self._columns.get("ids")
        if ids is None:
            return None
        index = int(np.searchsorted(ids[: self._size], line_id))
        if index < self._size and ids[index] == line_id:
            return int(self._columns["thread_ids"][index]), int(self._columns["seqs"][index])
        return None


def best_scored(
    ids: np.ndarray, vectors: np.ndarray, query: np.ndarray, k: int, min_score: float
) -> list[tuple[int, float]]:
    """The ``k`` best (id, cosine) of a small matrix (summaries, expertise chunks) that
    reach ``min_score``, best first; an id with several rows scores its best row."""
    if k <= 0 or len(ids) == 0:
        return []
    scores = similarities(vectors, query)
    best: dict[int, float] = {}  # an id with several vectors scores its best
    for index in np.argsort(-scores, kind="stable"):
        if scores[index] < min_score or len(best) == k:
            break
        best.setdefault(int(ids[index]), float(scores[index]))
    return list(best.items())

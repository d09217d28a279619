"""Approximate search for the scope of a bot that shares memory, once that scope is large.

Below ``MEMBOT_APPROXIMATE_FROM`` lines (50,000 by default) a shared scope is searched exactly
like any other (:class:`membot.index.vectors.VectorIndex`). From there on, holding its vectors in
memory would cost 1.5 kB a line (1.5 GB at a million) and a turn one matrix product over all of
them, so an approximate nearest-neighbour index only *nominates* the ``CANDIDATES`` lines
nearest the query; those lines, with the lines right before and after each, are read back from
the store and scored exactly. Every score a strategy sees is a true cosine; only which lines it
looks at is approximate (recall@10 against exact search: ``benchmarks/hnsw_recall.py``).

The graph holds the lines' own vectors only; a line's parts (its sentences, the windows of a
long line) are read from the store for the lines read back and score them as in a smaller
scope. A fact that only a part of a line matches is found there when the line is nominated
(or is a nominee's neighbour), or by the store's full-text search; the parts are not
nominees themselves, which keeps the graph one node a line.

The nominees come from the store's own approximate index (:mod:`membot.store.approximate`):
pgvector's HNSW index on PostgreSQL, a usearch graph saved beside a SQLite store.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from collections.abc import Sequence

import numpy as np

from membot.index.scope import PART_WEIGHT, InScope, Scope, similarities
from membot.recall.lines import Hit
from membot.store.approximate import NearLines, Nominator, approximate_nominator
from membot.store.base import ROLE_CODES, VectorRows

log = logging.getLogger(__name__)

DEFAULT_APPROXIMATE_FROM = 50_000  # lines in a shared scope; MEMBOT_APPROXIMATE_FROM changes it
CANDIDATES = 200  # lines the index nominates per search, before their neighbours join them
# The lexical side of a large scope asks the store's full-text search for its rarest words
# only, as many as hold this many lines between them (a common word in a store of a million
# lines costs seconds to score; docs/performance.md measures the turn with this bound).
LEXICAL_POSTINGS = 10_000


def approximate_from() -> int:
    configured = os.environ.get("MEMBOT_APPROXIMATE_FROM", "")
    return int(configured) if configured.isdigit() else DEFAULT_APPROXIMATE_FROM


class ApproximateScopes:
    """The approximate search of each large shared scope a process has searched."""

    def __init__(self, store: object, from_lines: int | None = None) -> None:
        self.store = store
        self.from_lines = approximate_from() if from_lines is None else from_lines
        self._scopes: dict[int, ApproximateScope] = {}

    def take_out_removed(self) -> None:
        """Have each graph held of a bot whose lines were removed take them out now (a fresh
        graph is built beside it); the others only add the lines written since."""
        for bot_id, scope in list(self._scopes.items()):
            try:
                scope.nominator.take_out_removed()
            except Exception:  # a graph that could not take them out is not kept
                log.exception("dropping bot %s's approximate graph", bot_id)
                del self._scopes[bot_id]

    def scope_for(self, scope: Scope, held_lines: int | None) -> ApproximateScope | None:
        """The approximate search for ``scope`` when it is a shared scope of at least
        ``from_lines`` lines, else None (search it exactly). ``held_lines``: how many lines
        the exact index holds for it, None when it holds none (the store counts them then).
        A scope once found large stays approximate in this process."""
        if scope.person_ids is not None or scope.thread_id is not None:
            return None
        found = self._scopes.get(scope.bot_id)
        if found is not None or not isinstance(self.store, NearLines):
            return found
        lines = self.store.scope_line_count(scope.bot_id) if held_lines is None else held_lines
        if lines < self.from_lines:
            return None
        nominator = approximate_nominator(self.store, scope.bot_id)
        if nominator is None:
            return None
        found = self._scopes[scope.bot_id] = ApproximateScope(self.store, nominator)
        return found


class ApproximateScope:
    """A large shared scope's search: the nominees and their neighbours, scored exactly."""

    def __init__(self, store: NearLines, nominator: Nominator) -> None:
        self.store = store
        self.nominator = nominator

    def scored(self, query: np.ndarray, scope: Scope) -> InScope:
        """The nominated lines in scope and their neighbours in scope, with their cosine to
        ``query``, in id order (what :meth:`VectorIndex.scored_in_scope` gives for every
        line of a smaller scope)."""
        nominees = self.nominator.nominate(query, CANDIDATES)
        rows = self.store.vector_rows_around(nominees)
        if not len(rows.ids):
            return InScope.empty()
        keep = in_scope(rows, scope)
        scores = similarities(rows.vectors[keep], query)
        ids = rows.ids[keep]
        return InScope(ids, rows.thread_ids[keep], rows.seqs[keep], scores, rows.created[keep],
                       self._best_parts(ids, query))  # fmt: skip

    def _best_parts(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Each line's best part cosine with ``query`` (-inf: a line without parts)."""
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        parts = self.store.line_parts(ids.tolist())
        for row, line_id in enumerate(ids.tolist()):
            if line_id in parts:
                best[row] = float(similarities(parts[line_id].vectors, query).max())
        return best

    def vectors(self, line_ids: np.ndarray) -> np.ndarray:
        """The stored vectors of ``line_ids``, in that order; zeros for a line not stored."""
        rows = self.store.vector_rows_around([int(line_id) for line_id in line_ids])
        width = rows.vectors.shape[1] if rows.vectors.ndim == 2 else 0
        found = np.zeros((len(line_ids), width), dtype=np.float32)
        at = {line_id: row for row, line_id in enumerate(rows.ids.tolist())}
        for index, line_id in enumerate(line_ids.tolist()):
            if line_id in at:
                found[index] = rows.vectors[at[line_id]]
        return found

    def search(
        self, query: np.ndarray, scope: Scope, k: int, min_score: float | None
    ) -> list[tuple[int, float]]:
        """The ``k`` best (line id, cosine) among the lines :meth:`scored` reads, best first."""
        return [(hit.line_id, hit.score) for hit in self.hits(query, scope, k, min_score)]

    def hits(self, query: np.ndarray, scope: Scope, k: int, min_score: float | None) -> list[Hit]:
        """As :meth:`search`, with each line's thread and seq."""
        lines = self.scored(query, scope).with_parts(PART_WEIGHT)
        order = np.argsort(-lines.scores, kind="stable")[: max(k, 0)]
        floor = -np.inf if min_score is None else min_score
        columns = (lines.ids, lines.thread_ids, lines.seqs)
        ids, threads, seqs = (column.tolist() for column in columns)
        return [
            Hit(ids[i], threads[i], seqs[i], float(lines.scores[i]))
            for i in order
            if lines.scores[i] >= floor
        ]

    def lexical(self, words: Sequence[str], scope: Scope, k: int) -> list[Hit]:
        """The ``k`` lines in scope with the store's best full-text (BM25) scores for the
        rarest of ``words`` (``LEXICAL_POSTINGS``), best first, with their thread and seq."""
        found = self.store.lexical_search(
            list(words), scope.bot_id, scope.person_ids, scope.thread_id, scope.roles, limit=k,
            max_postings=LEXICAL_POSTINGS,
        )  # fmt: skip
        if not found:
            return []
        rows = self.store.vector_rows_around([line_id for line_id, _ in found])
        keep = in_scope(rows, scope)
        columns = (rows.ids[keep], rows.thread_ids[keep], rows.seqs[keep])
        where = {line_id: (thread, seq) for line_id, thread, seq in zip(*columns, strict=True)}
        return [
            Hit(i, int(where[i][0]), int(where[i][1]), score) for i, score in found if i in where
        ]

    def lexical_scores(
        self, words: Sequence[str], scope: Scope, among: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, BM25) of the lines ``among`` (in scope: lines :meth:`scored` read)
        holding the rarest of ``words`` (``LEXICAL_POSTINGS``), best first: the store scores
        those lines only, by id, where :meth:`lexical` reads every line holding a word."""
        found = self.store.lexical_search(
            list(words), scope.bot_id, scope.person_ids, scope.thread_id, scope.roles,
            limit=len(among), max_postings=LEXICAL_POSTINGS, among=among.tolist(),
        )  # fmt: skip
        ids = np.asarray([line_id for line_id, _ in found], dtype=np.int64)
        return ids, np.asarray([score for _, score in found], dtype=np.float64)


def in_scope(rows: VectorRows, scope: Scope) -> np.ndarray:
    """Which rows ``scope`` lets a search return (its bot, person, thread, roles; not the
    feed)."""
    keep: np.ndarray = rows.bot_ids == scope.bot_id
    if scope.person_ids is not None:
        keep &= np.isin(rows.person_ids, scope.person_ids)
    if scope.thread_id is not None:
        keep &= rows.thread_ids == scope.thread_id
    if scope.window_thread_id is not None and scope.window_from_seq is not None:
        in_feed = rows.thread_ids == scope.window_thread_id
        keep &= ~(in_feed & (rows.seqs >= scope.window_from_seq))
    keep &= np.isin(rows.roles, [ROLE_CODES[role] for role in scope.roles])
    return keep


# Names this module held before the store kept its approximate index (0.1's membot.ann).
_MOVED_TO_STORE = {
    "PgvectorNominator": "membot.store.approximate_postgres",
    "UsearchNominator": "membot.store.approximate_sqlite",
    "drop_saved_indexes": "membot.store.approximate",
    "IndexedStore": "membot.store.near_lines",
    "PagedStore": "membot.store.near_lines",
    "SEARCH_DEPTH": "membot.store.near_lines",
}


def __getattr__(name: str) -> object:
    if name not in _MOVED_TO_STORE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _MOVED_TO_STORE[name]
    warnings.warn(f"{__name__}.{name} moved to {module}: import it from there",
                  DeprecationWarning, stacklevel=2)  # fmt: skip
    return getattr(importlib.import_module(module), name)

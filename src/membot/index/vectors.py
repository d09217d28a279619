"""Search by scope: exact vector search (one matrix product over the scope's lines, no Python
loop) and BM25 over the same lines.

:class:`VectorIndex` keeps each searched scope's vectors in a float32 matrix in memory, and its
words in a :class:`~membot.recall.bm25.ScopeTerms`. It appends lines written since its last
look (cheap: one indexed query from the cursor the store gave at the previous look) and reloads
a scope when the store says lines were removed or re-embedded (its ``generation`` changed).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import numpy as np

from membot.index.approximate import ApproximateScope, ApproximateScopes
from membot.index.scope import PART_WEIGHT, InScope, Scope, similarities, with_parts
from membot.recall.bm25 import ScopeTerms
from membot.recall.lines import Hit
from membot.store.base import ROLE_CODES, PartVectors, Store, VectorRows, VectorSnapshot

__all__ = ["InScope", "Scope", "VectorIndex", "best_scored", "drop_least_recent", "similarities"]

_COLUMNS = ("ids", "bot_ids", "person_ids", "thread_ids", "seqs", "roles", "created")


class _Parts:
    """A scope's part vectors (``membot.memory.line_parts``), grown in place, kept in line id
    order, with the row of each part's line in the scope's matrix (worked out again when
    the lines were reordered)."""

    def __init__(self) -> None:
        self.count = 0
        self.line_ids = np.zeros(0, dtype=np.int64)
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self._rows: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def nbytes(self) -> int:
        return self.line_ids.nbytes + self.vectors.nbytes

    def append(self, parts: PartVectors) -> None:
        count = len(parts.line_ids)
        if not count:
            return
        needed = self.count + count
        if needed > len(self.line_ids) or self.vectors.shape[1] != parts.vectors.shape[1]:
            self._grow(max(needed, 2 * self.count, 64), parts.vectors.shape[1])
        end = self.count + count
        out_of_order = self.count and parts.line_ids[0] < self.line_ids[self.count - 1]
        self.line_ids[self.count : end] = parts.line_ids
        self.vectors[self.count : end] = parts.vectors
        self.count = end
        if out_of_order:  # a line committed after a later id (PostgreSQL)
            order = np.argsort(self.line_ids[:end], kind="stable")
            self.line_ids[:end] = self.line_ids[:end][order]
            self.vectors[:end] = self.vectors[:end][order]
        self._rows = None

    def _grow(self, capacity: int, dimension: int) -> None:
        line_ids, vectors = (
            np.zeros(capacity, dtype=np.int64),
            np.zeros((capacity, dimension), dtype=np.float32),
        )
        if self.count and self.vectors.shape[1] == dimension:
            line_ids[: self.count] = self.line_ids[: self.count]
            vectors[: self.count] = self.vectors[: self.count]
        else:
            self.count = 0
        self.line_ids, self.vectors = line_ids, vectors

    def moved(self) -> None:
        """The scope's lines were reordered: their rows are worked out again when next asked."""
        self._rows = None

    def best(self, query: np.ndarray, held_ids: np.ndarray) -> np.ndarray:
        """Each held line's best part cosine with ``query``, -inf for a line without parts."""
        best = np.full(len(held_ids), -np.inf, dtype=np.float32)
        if not self.count or not len(held_ids):
            return best
        if self._rows is None:
            rows = np.searchsorted(held_ids, self.line_ids[: self.count])
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            self._rows = (rows, starts)
        rows, starts = self._rows
        scores = similarities(self.vectors[: self.count], query)
        best[rows[starts]] = np.maximum.reduceat(scores, starts)
        return best


class _Matrix:
    """One scope's lines: vectors and columns (owners, thread, seq, role, date) in arrays grown
    in place, kept in id order, with the store generation they were read at and the store's
    cursor; the lines' words (read from the texts the scope's snapshots carry); and their
    parts' vectors."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.cursor = 0
        self.size = 0
        self.columns: dict[str, np.ndarray] = {}
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        self.terms = ScopeTerms()
        self.parts = _Parts()

    @property
    def nbytes(self) -> int:
        columns = sum(column.nbytes for column in self.columns.values())
        return self.vectors.nbytes + columns + self.terms.nbytes + self.parts.nbytes

    def take(self, snapshot: VectorSnapshot) -> None:
        """Rows read at a generation: appended (those held already skipped), or the whole
        matrix when it moved (lines were removed or re-embedded)."""
        if snapshot.generation != self.generation:
            self.size, self.columns, self.generation = 0, {}, snapshot.generation
            self.terms = ScopeTerms()
            self.parts = _Parts()
        self.cursor = snapshot.cursor
        rows = self._unseen(snapshot.rows)
        first_new = int(rows.ids.min()) if len(rows.ids) else None
        last_held = int(self.columns["ids"][self.size - 1]) if self.size else None
        self._append(rows)
        if snapshot.rows.parts is not None:
            self.parts.append(snapshot.rows.parts.of_lines(rows.ids))
        if first_new is not None and last_held is not None and first_new < last_held:
            self._sort()
        if len(rows.ids):  # the parts' rows are worked out again only when lines came
            self.parts.moved()

    def dense(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every held line's cosine with ``query`` and its best part's (-inf: none)."""
        scores = similarities(self.vectors[: self.size], query)
        return scores, self.parts.best(query, self.columns["ids"][: self.size])

    def _unseen(self, rows: VectorRows) -> VectorRows:
        """``rows`` without the ids held (a store may send a line again, see
        VectorSnapshot)."""
        if not self.size or not len(rows.ids):
            return rows
        held = self.columns["ids"][: self.size]
        at = np.clip(np.searchsorted(held, rows.ids), 0, self.size - 1)
        new = held[at] != rows.ids
        if new.all():
            return rows
        return VectorRows(
            ids=rows.ids[new],
            bot_ids=rows.bot_ids[new],
            person_ids=rows.person_ids[new],
            thread_ids=rows.thread_ids[new],
            seqs=rows.seqs[new],
            roles=rows.roles[new],
            vectors=rows.vectors[new],
            created=rows.created[new],
            texts=tuple(text for text, keep in zip(rows.texts, new, strict=False) if keep),
        )

    def _sort(self) -> None:
        """Back into id order after a line committed later than a line with a larger id
        (PostgreSQL): ``_unseen`` and ``lexical_rows`` search the ids by bisection."""
        order = np.argsort(self.columns["ids"][: self.size], kind="stable")
        for column in self.columns.values():
            column[: self.size] = column[: self.size][order]
        self.vectors[: self.size] = self.vectors[: self.size][order]

    def _append(self, rows: VectorRows) -> None:
        count = len(rows.ids)
        if count == 0:
            return
        needed = self.size + count
        if (
            not self.columns
            or needed > len(self.columns["ids"])
            or (self.vectors.shape[1] != rows.vectors.shape[1])
        ):
            self._grow(max(needed, 2 * self.size, 64), rows.vectors.shape[1])
        end = self.size + count
        for name in _COLUMNS:
            self.columns[name][self.size : end] = getattr(rows, name)
        self.vectors[self.size : end] = rows.vectors
        self.size = end
        if rows.texts:
            self.terms.add(rows.ids.tolist(), rows.texts)

    def _grow(self, capacity: int, dimension: int) -> None:
        old_columns, old_vectors, size = self.columns, self.vectors, self.size
        template = VectorRows.empty(dimension)
        self.columns = {
            name: np.zeros(capacity, dtype=getattr(template, name).dtype) for name in _COLUMNS
        }
        self.vectors = np.zeros((capacity, dimension), dtype=np.float32)
        if size and old_vectors.shape[1] == dimension:
            for name, column in old_columns.items():
                self.columns[name][:size] = column[:size]
            self.vectors[:size] = old_vectors[:size]
        else:
            self.size = 0
            self.terms = ScopeTerms()

    def mask(self, scope: Scope) -> np.ndarray:
        size = self.size
        column = {name: values[:size] for name, values in self.columns.items()}
        mask: np.ndarray = column["bot_ids"] == scope.bot_id
        if scope.person_ids is not None:
            mask &= np.isin(column["person_ids"], scope.person_ids)
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

    def search(self, query: np.ndarray, scope: Scope, k: int, min_score: float | None) -> list[Hit]:
        if self.size == 0 or k <= 0:
            return []
        scores = with_parts(*self.dense(query), PART_WEIGHT)
        scores = np.where(self.mask(scope), scores, -np.inf)
        if min_score is not None:
            scores = np.where(scores >= min_score, scores, -np.inf)
        k = min(k, self.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return self._hits(top[np.isfinite(scores[top])], scores)

    def vectors_of(self, line_ids: np.ndarray) -> np.ndarray:
        """The vectors of ``line_ids``, in that order; zeros for a line not held."""
        held = self.columns["ids"][: self.size] if self.size else np.zeros(0, dtype=np.int64)
        found = np.zeros((len(line_ids), self.vectors.shape[1]), dtype=np.float32)
        if not len(held) or not len(line_ids):
            return found
        rows = np.clip(np.searchsorted(held, line_ids), 0, self.size - 1)
        there = held[rows] == line_ids
        found[there] = self.vectors[rows[there]]
        return found

    def _hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        if not len(rows):
            return []
        columns = (self.columns[name][rows].tolist() for name in ("ids", "thread_ids", "seqs"))
        return [Hit(*hit) for hit in zip(*columns, scores[rows].tolist(), strict=True)]

    def lexical_rows(self, words: list[str], scope: Scope) -> tuple[np.ndarray, np.ndarray]:
        """The rows in scope holding any of ``words``, best BM25 first (ties by id), and every
        row's BM25 (0 where it holds none)."""
        scores = np.zeros(self.size)
        if self.size == 0:
            return np.zeros(0, dtype=np.int64), scores
        ids, bm25 = self.terms.bm25(words)
        held = self.columns["ids"][: self.size]
        rows = np.clip(np.searchsorted(held, ids), 0, self.size - 1)
        rows = rows[(held[rows] == ids) & self.mask(scope)[rows]]
        scores[rows] = bm25[np.searchsorted(ids, held[rows])]
        return rows[np.lexsort((held[rows], -scores[rows]))], scores

    def lexical(self, words: list[str], scope: Scope, k: int) -> list[Hit]:
        """The ``k`` lines in scope with the best BM25 for ``words``, best first."""
        rows, scores = self.lexical_rows(words, scope)
        return self._hits(rows[: max(k, 0)], scores)

    def lexical_scores(self, words: list[str], scope: Scope) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, BM25) of the lines in scope holding any of ``words``, best first."""
        rows, scores = self.lexical_rows(words, scope)
        return self.columns["ids"][rows] if self.size else rows, scores[rows]

    def scored(self, query: np.ndarray, scope: Scope) -> InScope:
        if self.size == 0:
            return InScope.empty()
        mask = self.mask(scope)
        scores, best_parts = self.dense(query)
        column = {
            name: self.columns[name][: self.size][mask]
            for name in ("ids", "thread_ids", "seqs", "created")
        }
        return InScope(column["ids"], column["thread_ids"], column["seqs"], scores[mask],
                       column["created"], best_parts[mask])  # fmt: skip


# Vectors of the scopes searched last, kept in memory up to this many bytes (least recently
# used scopes dropped first): about 600,000 MiniLM lines. MEMBOT_INDEX_MB changes it.
DEFAULT_INDEX_BYTES = 1024 * 1024 * 1024


class HoldsBytes(Protocol):
    """What :func:`drop_least_recent` weighs: a scope's matrix, a strategy's units."""

    @property
    def nbytes(self) -> int: ...


Held = TypeVar("Held", bound=HoldsBytes)


def drop_least_recent(held: OrderedDict[Any, Held], budget_bytes: int) -> None:
    """Drop the least recently used of ``held`` (oldest first; each with ``nbytes``) while
    together they take more than ``budget_bytes``; the most recent one always stays."""
    used = sum(each.nbytes for each in held.values())
    while used > budget_bytes and len(held) > 1:
        _, dropped = held.popitem(last=False)
        used -= dropped.nbytes


class VectorIndex:
    """Exact search by scope: a search reads only the vectors of its scope — a person's lines
    with one bot, or a bot's lines for a bot that shares memory — loaded from the store when
    first asked for, kept in memory (least recently used scopes dropped past
    ``budget_bytes``), and brought up to date with the lines written since (one indexed
    query). A turn's search costs what its scope holds, not what the store holds."""

    def __init__(self, store: Store, budget_bytes: int | None = None) -> None:
        self.store = store
        if budget_bytes is None:
            configured = os.environ.get("MEMBOT_INDEX_MB", "")
            budget_bytes = (
                int(configured) * 1024 * 1024 if configured.isdigit() else DEFAULT_INDEX_BYTES
            )
        self.budget_bytes = budget_bytes
        self._scopes: OrderedDict[tuple[int, tuple[int, ...] | None], _Matrix] = OrderedDict()
        # The held scopes are read and refreshed by one thread at a time.
        self._lock = threading.RLock()
        # Within :meth:`looking_once`, the scopes brought up to date already.
        self._looked: set[tuple[int, tuple[int, ...] | None]] | None = None
        self.approximate = ApproximateScopes(store)

    @contextmanager
    def looking_once(self) -> Iterator[None]:
        """Searches that ask the store for a scope's new lines once: the first brings the
        scope up to date, the others search it as it was then (one turn's searches see the
        same lines, and cost one trip to the store). No other thread searches meanwhile."""
        with self._lock:
            outermost = self._looked is None
            if outermost:
                self._looked = set()
            try:
                yield
            finally:
                if outermost:
                    self._looked = None

    def _scope(self, scope: Scope) -> _Matrix:
        """The scope's matrix, up to date (as it was first read within
        :meth:`looking_once`); the least recently used others dropped past the budget."""
        key = (scope.bot_id, scope.person_ids)
        if self._looked is not None and key in self._looked and key in self._scopes:
            self._scopes.move_to_end(key)
            return self._scopes[key]
        matrix = self._scopes.pop(key, None) or _Matrix()
        matrix.take(
            self.store.scope_vector_snapshot(
                scope.bot_id, scope.person_ids, matrix.generation, matrix.cursor
            )
        )
        # Lines were removed (forgotten) or re-embedded since the others were read: drop
        # them now rather than at their next search, so no forgotten vector stays in memory.
        for other in [
            k for k, held in self._scopes.items() if held.generation != matrix.generation
        ]:
            del self._scopes[other]
        self._scopes[key] = matrix
        drop_least_recent(self._scopes, self.budget_bytes)
        if self._looked is not None:
            self._looked.add(key)
        return matrix

    def _approximate(self, scope: Scope) -> ApproximateScope | None:
        """The approximate search of a large shared scope (membot.index.approximate), its matrix
        dropped;
        None for any other scope."""
        held = self._scopes.get((scope.bot_id, scope.person_ids))
        found = self.approximate.scope_for(scope, held.size if held else None)
        if found is not None and held is not None:
            del self._scopes[(scope.bot_id, scope.person_ids)]
        return found

    def scopes_held(self) -> list[tuple[int, tuple[int, ...] | None]]:
        """The (bot id, person ids or None) of the scopes in memory, least recent first."""
        with self._lock:
            return list(self._scopes)

    def reset(self) -> None:
        """After lines were removed from the store: drop every scope held (read again, without
        them, at its next search), and have each approximate graph take the removed lines
        out now (a fresh graph is built beside it)."""
        with self._lock:
            self._scopes = OrderedDict()
            self.approximate.take_out_removed()

    def search(
        self, query: np.ndarray, scope: Scope, k: int, min_score: float | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best (line id, score) pairs in scope, best first."""
        return [(hit.line_id, hit.score) for hit in self.hits(query, scope, k, min_score)]

    def hits(
        self, query: np.ndarray, scope: Scope, k: int, min_score: float | None = None
    ) -> list[Hit]:
        """The ``k`` lines in scope nearest ``query`` (cosine at least ``min_score``), with
        their thread and seq, best first."""
        with self._lock:
            if approximate := self._approximate(scope):
                return approximate.hits(query, scope, k, min_score)
            return self._scope(scope).search(query, scope, k, min_score)

    def lexical(self, words: list[str], scope: Scope, k: int) -> list[Hit]:
        """The ``k`` lines in scope with the best BM25 for ``words`` (any line holding one of
        them), best first; a hit's score is its BM25. IDF and mean length are the scope's
        (a person's lines with the bot, or a shared bot's lines); for a large shared scope,
        the store's own full-text search answers (its statistics are the store's)."""
        with self._lock:
            if approximate := self._approximate(scope):
                return approximate.lexical(words, scope, k)
            return self._scope(scope).lexical(words, scope, k)

    def lexical_scores(
        self,
        words: list[str],
        scope: Scope,
        *,
        just_read: bool = False,
        among: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, BM25) of every line in scope holding any of ``words``, best first. A
        large shared scope's words are not held in memory: there the store scores the lines
        ``among`` (the ones :meth:`scored_in_scope` gave, which are all a blend ranks), and
        ``among`` is required. With ``just_read``, the scope as the search just before read
        it: no second trip to the store in one turn."""
        with self._lock:
            if approximate := self._approximate(scope):
                if among is None:
                    raise ValueError("a large shared scope's BM25 is read for given lines (among)")
                return approximate.lexical_scores(words, scope, among)
            held = self._scopes.get((scope.bot_id, scope.person_ids)) if just_read else None
            return (held or self._scope(scope)).lexical_scores(words, scope)

    def vectors(self, line_ids: Sequence[int], scope: Scope) -> np.ndarray:
        """The vectors of ``line_ids`` (lines of ``scope``), in that order: rows of the matrix
        held, or, for a large shared scope, read from the store; zeros for a line not there."""
        ids = np.asarray(line_ids, dtype=np.int64)
        with self._lock:
            if approximate := self._approximate(scope):
                return approximate.vectors(ids)
            return self._scope(scope).vectors_of(ids)

    def scored_in_scope(self, query: np.ndarray, scope: Scope) -> InScope:
        """Every line in scope with its cosine to ``query``, in index (id) order; for a large
        shared scope, the lines its approximate index nominates and their neighbours."""
        with self._lock:
            if approximate := self._approximate(scope):
                return approximate.scored(query, scope)
            return self._scope(scope).scored(query, scope)


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

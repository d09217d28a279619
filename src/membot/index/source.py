"""The recall source every turn, preview and benchmark reads: a store's lines through the
in-memory index of each scope, and the strategies' units kept per scope.

:class:`IndexedLines` is what :class:`membot.recall.source.RecallSource` describes; a
``Memory`` holds one for its store. What it keeps in memory (vectors and words by scope,
units and their vectors) is read again from the store after :meth:`IndexedLines.reset`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from membot.index.vectors import InScope, Scope, VectorIndex
from membot.model import Line
from membot.recall.lines import Hit
from membot.recall.pairs import Unit, UnitCache, Units
from membot.store.base import Store


class IndexedLines:
    """A store's lines as recall reads them (:class:`~membot.recall.source.RecallSource`).

    ``embed`` makes the vectors of the units' texts and of a question (the Memory's, which
    refuses an embedder other than the store's); ``embed_transient`` those of texts never
    stored, without keeping them in the embedder's cache (``embed`` where not given).
    :meth:`reading` holds one recall's reads together: a server's threads may share one
    source."""

    def __init__(
        self,
        store: Store,
        embed: Callable[[Sequence[str]], np.ndarray],
        index: VectorIndex | None = None,
        embed_transient: Callable[[Sequence[str]], np.ndarray] | None = None,
    ) -> None:
        self.store = store
        self._embed = embed
        self._embed_transient = embed_transient or embed
        self.index = index if index is not None else VectorIndex(store)
        self._units: dict[tuple[str, int, int], UnitCache] = {}
        # Recall reads and refreshes the caches (the index, the units): one thread at a time.
        self._lock = threading.RLock()
        # Within :meth:`reading`, the speakers read so far by line id (features ask twice).
        self._speakers: dict[int, str | None] | None = None

    @contextmanager
    def reading(self) -> Iterator[IndexedLines]:
        """One recall's reads, no other thread's between them; each scope's new lines are
        asked of the store once (:meth:`VectorIndex.looking_once`), and each line's speaker
        once."""
        with self._lock, self.index.looking_once():
            outermost = self._speakers is None
            if outermost:
                self._speakers = {}
            try:
                yield self
            finally:
                if outermost:
                    self._speakers = None

    def reset(self) -> None:
        """Drop what is held of the store (vectors, words and units by scope; an approximate
        graph takes its removed lines out): read again, without what the store no longer
        holds, when next asked."""
        with self._lock:
            self.index.reset()
            self._units = {}

    # -- RecallSource -----------------------------------------------------------------------

    def nearest(
        self, vector: np.ndarray, scope: Scope, k: int, min_score: float | None = None
    ) -> list[Hit]:
        with self._lock:
            return self.index.hits(vector, scope, k, min_score)

    def scored(self, vector: np.ndarray, scope: Scope) -> InScope:
        with self._lock:
            return self.index.scored_in_scope(vector, scope)

    def lexical(self, words: list[str], scope: Scope, k: int) -> list[Hit]:
        with self._lock:
            return self.index.lexical(words, scope, k)

    def lexical_scores(
        self,
        words: list[str],
        scope: Scope,
        *,
        just_read: bool = False,
        among: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            return self.index.lexical_scores(words, scope, just_read=just_read, among=among)

    def vectors(self, line_ids: Sequence[int], scope: Scope) -> np.ndarray:
        with self._lock:
            return self.index.vectors(line_ids, scope)

    def lines_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[Line]]:
        return self.store.lines_in_ranges(list(ranges))

    def speakers(self, line_ids: Sequence[int]) -> dict[int, str | None]:
        wanted = [int(line_id) for line_id in line_ids]
        known = self._speakers
        if known is None:
            return self.store.speakers(wanted)
        missing = [line_id for line_id in wanted if line_id not in known]
        if missing:
            known.update(self.store.speakers(missing))
        return {line_id: known[line_id] for line_id in wanted if line_id in known}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_transient(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_transient(list(texts))

    def units(
        self, kind: Units, scope: Scope, defer: tuple[int, int] | None = None
    ) -> tuple[list[Unit], np.ndarray]:
        with self._lock:
            cache = self._units.setdefault(kind.key, UnitCache(kind))
            return cache.embedded_units(
                self.store, self.embed, scope.bot_id, scope.person_ids, defer
            )

    # -- what is held -----------------------------------------------------------------------

    def held_texts(self) -> list[str]:
        """Every text held in memory: the units' lines and texts (the index holds vectors and
        words' counts only)."""
        with self._lock:
            caches = list(self._units.values())
        return [text for cache in caches for text in cache.held_texts()]

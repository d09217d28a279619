"""What a recall strategy reads: :class:`RecallSource`, the narrow view of the stored lines
a strategy gets instead of the whole :class:`~membot.memory.facade.Memory`.

A live turn, a preview and the benchmarks hand the strategies the same source
(:class:`membot.index.source.IndexedLines`, one per Memory); a test may hand them any object
with these methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from membot.index.scope import InScope, Scope
    from membot.model import Line
    from membot.recall.lines import Hit
    from membot.recall.pairs import Unit, Units


class RecallSource(Protocol):
    """The lines of one store, as recall searches them: by vector and by words within a
    scope, by thread and seq, and as the units of the ``pairs`` and ``windows`` strategies."""

    def nearest(
        self, vector: np.ndarray, scope: Scope, k: int, min_score: float | None = None
    ) -> list[Hit]:
        """The ``k`` lines in scope nearest ``vector`` (cosine at least ``min_score``), best
        first."""
        ...

    def scored(self, vector: np.ndarray, scope: Scope) -> InScope:
        """The lines in scope with their cosine to ``vector``, in id order (for a large
        shared scope, those its approximate index nominates and their neighbours)."""
        ...

    def lexical(self, words: list[str], scope: Scope, k: int) -> list[Hit]:
        """The ``k`` lines in scope with the best BM25 for ``words``, best first; a hit's
        score is its BM25."""
        ...

    def lexical_scores(
        self,
        words: list[str],
        scope: Scope,
        *,
        just_read: bool = False,
        among: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, BM25) of the lines in scope holding any of ``words``, best first;
        ``among``: of these lines only (required for a large shared scope); ``just_read``:
        the scope as :meth:`scored` just read it."""
        ...

    def vectors(self, line_ids: Sequence[int], scope: Scope) -> np.ndarray:
        """The stored vectors of ``line_ids`` (lines of ``scope``), in that order (a row of
        zeros for a line not there)."""
        ...

    def lines_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[Line]]:
        """For each (thread id, first seq, last seq), that thread's lines in the range."""
        ...

    def speakers(self, line_ids: Sequence[int]) -> dict[int, str | None]:
        """The speaker of each of ``line_ids`` still stored, by id (None where the line has
        none): what a feature reads of a line when it reads nothing else."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` from the store's embedder (the units' texts, a question)."""
        ...

    def embed_transient(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`embed`, for texts that are never stored (a question's other forms): not
        kept in the embedder's cache, where forgetting the line asked could not find them."""
        ...

    def units(
        self, kind: Units, scope: Scope, defer: tuple[int, int] | None = None
    ) -> tuple[list[Unit], np.ndarray]:
        """The units of ``kind`` cut from the scope's lines, and their vectors, kept between
        calls; the units holding a line of ``defer`` (thread id, first seq) on are not
        embedded yet (their rows zeros)."""
        ...

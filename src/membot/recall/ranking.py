"""Ranked recall: every line in scope, in the order a strategy would place it in context.

A :class:`Ranking` answers a query line with line ids in priority order, expansion included and
each line once, so a benchmark can cut the list at k lines. ``lines`` is the core's recall
without its threshold, match limit and buffer: a dense match over the lines in scope, each
match followed by its neighbours in its own thread (nearest first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from membot.recall.lines import Hit, expand_neighbors
from membot.search import Scope

if TYPE_CHECKING:
    import numpy as np

    from membot.memory import LineInput, Memory

EVERY_LINE = 2**31  # a search depth that reaches every line in scope


class Ranking(Protocol):
    """A recall strategy seen as a ranking of the store's lines for one query."""

    name: str

    def index_text(self, item: LineInput) -> str:
        """The text whose vector a line is searched by (its own text, unless the strategy
        embeds more of it, e.g. who said it)."""
        ...

    def rank(
        self,
        memory: Memory,
        query: str,
        scope: Scope,
        depth: int | None = None,
        now: datetime | None = None,
    ) -> list[int]:
        """Line ids in context order. Expansion runs until ``depth`` lines are placed (None:
        for every match); the other lines in scope follow in match order. ``now`` is when the
        query is asked (None: unknown), for strategies that read the time a query points to."""
        ...


def dense_hits(
    memory: Memory, query: str, scope: Scope, vector: np.ndarray | None = None
) -> list[Hit]:
    """Every line in scope, most similar to ``query`` (whose ``vector`` a caller that has it
    may pass) first, located in its thread."""
    vector = memory.embed([query])[0] if vector is None else vector
    return located(memory, memory.index.search(vector, scope, EVERY_LINE))


def located(memory: Memory, scored: Iterable[tuple[int, float]]) -> list[Hit]:
    """Hits for (line id, score) pairs, with their thread and seq from the vector index."""
    memory.index.refresh()
    return memory.index.locate(scored)


def expand_in_order(
    memory: Memory, hits: Sequence[Hit], before: int, after: int, depth: int | None
) -> list[int]:
    """Each hit, then its neighbours nearest first; duplicates keep their first place.

    Past ``depth`` placed lines the remaining hits follow unexpanded: they are beyond any
    context the caller will read, and every line in scope is a hit anyway.
    """
    placed: dict[int, None] = {}
    for hit in hits:
        if depth is not None and len(placed) >= depth:
            break
        block = expand_neighbors(hit, before, after)
        lines = memory.store.lines_between(block.source_thread_id, block.first_seq, block.last_seq)
        for line in sorted(lines, key=lambda line: (abs(line.seq - hit.seq), line.seq)):
            placed.setdefault(line.id)
    for hit in hits:
        placed.setdefault(hit.line_id)
    return list(placed)


class LinesRanking:
    """Dense match over the lines in scope, each match expanded ±``before``/``after`` lines."""

    name = "lines"

    def __init__(self, before: int = 1, after: int = 1) -> None:
        self.before = before
        self.after = after

    def index_text(self, item: LineInput) -> str:
        return item.text

    def hits(self, memory: Memory, query: str, scope: Scope) -> list[Hit]:
        return dense_hits(memory, query, scope)

    def rank(
        self,
        memory: Memory,
        query: str,
        scope: Scope,
        depth: int | None = None,
        now: datetime | None = None,
    ) -> list[int]:
        hits = self.hits(memory, query, scope)
        return expand_in_order(memory, hits, self.before, self.after, depth)

"""Hybrid ranking: the dense and BM25 rankings fused by reciprocal rank, then expanded.

A line's fused score is ``dense_weight / (rrf_k + dense rank) + lexical_weight / (rrf_k +
BM25 rank)`` (ranks from 1; a line BM25 does not find gets no lexical term). Rank fusion needs
no calibration between cosine and BM25 scores, which live on unrelated scales. Each hit's
neighbours, up to ``before``/``after`` lines away in its thread, are scored ``decay ** distance``
times the hit's score and take their place among the hits by that score.

Measured with `membot eval` on the dev files (LoCoMo evidence recall at 10 / 25 turns):

- a line with a speaker is embedded as ``Speaker: text``, so a question naming a person meets
  what that person said (.58 / .74 -> .64 / .77); the stored text and its lexical row stay the
  line's own text;
- BM25 weighs double: on LoCoMo BM25 alone beats MiniLM alone (.64 / .77 -> .66 / .79);
- neighbours compete by decayed score instead of following their hit at once, ±2 at 0.95
  (.66 / .79 -> .68 / .81; LongMemEval turn ndcg_any@10 .63 -> .72).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from membot.recall.bm25 import bm25_hits
from membot.recall.lines import Hit
from membot.recall.ranking import dense_hits
from membot.search import Scope

if TYPE_CHECKING:
    from membot.memory import LineInput, Memory


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Hit]], weights: Sequence[float], rrf_k: float = 60.0
) -> list[Hit]:
    """Hits of every ranking, by their summed weighted reciprocal ranks, best first."""
    fused: dict[int, float] = {}
    first_seen: dict[int, Hit] = {}
    for hits, weight in zip(rankings, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            fused[hit.line_id] = fused.get(hit.line_id, 0.0) + weight / (rrf_k + rank)
            first_seen.setdefault(hit.line_id, hit)
    order = sorted(fused, key=lambda line_id: -fused[line_id])
    return [Hit(i, first_seen[i].thread_id, first_seen[i].seq, fused[i]) for i in order]


def expand_by_score(
    hits: Sequence[Hit],
    before: int,
    after: int,
    decay: float,
    placed_with: Callable[[int, int], bool] | None = None,
) -> list[int]:
    """Line ids by score, a hit's neighbours scored ``decay ** distance`` times its score, so
    they compete with the other hits instead of taking the places right after theirs.
    Neighbours are looked up among the hits: lines outside the scope are not placed. With
    ``placed_with(hit id, neighbour id)``, only the neighbours it accepts are."""
    at = {(hit.thread_id, hit.seq): hit.line_id for hit in hits}
    best: dict[int, float] = {}
    for hit in hits:
        best[hit.line_id] = max(best.get(hit.line_id, hit.score), hit.score)
        for offset in [*range(-before, 0), *range(1, after + 1)]:
            neighbour = at.get((hit.thread_id, hit.seq + offset))
            if neighbour is None or (placed_with and not placed_with(hit.line_id, neighbour)):
                continue
            score = hit.score * decay ** abs(offset)
            if score > best.get(neighbour, float("-inf")):
                best[neighbour] = score
    return sorted(best, key=lambda line_id: -best[line_id])


class HybridRanking:
    """Dense and BM25 fused by reciprocal rank; neighbours placed by their decayed score."""

    name = "hybrid"

    def __init__(
        self,
        before: int = 2,
        after: int = 2,
        dense_weight: float = 1.0,
        lexical_weight: float = 2.0,
        rrf_k: float = 60.0,
        neighbour_decay: float = 0.95,
    ) -> None:
        self.before = before
        self.after = after
        self.weights = (dense_weight, lexical_weight)
        self.rrf_k = rrf_k
        self.neighbour_decay = neighbour_decay

    def index_text(self, item: LineInput) -> str:
        return f"{item.speaker}: {item.text}" if item.speaker else item.text

    def rank(
        self,
        memory: Memory,
        query: str,
        scope: Scope,
        depth: int | None = None,
        now: datetime | None = None,
    ) -> list[int]:
        rankings = [dense_hits(memory, query, scope), bm25_hits(memory, query, scope)]
        fused = reciprocal_rank_fusion(rankings, self.weights, self.rrf_k)
        return expand_by_score(fused, self.before, self.after, self.neighbour_decay)

"""A second round of recall that starts from what the first found: questions that join facts.

"Where did Caroline move from?" finds "since I moved from my home country"; the line that
answers, "a gift from my grandma in my home country, Sweden", shares little with the question
and much with the first line. Two designs, both options of ``blend``, bounded in cost (the
``feedback_seeds`` best lines of the first round seed one extra search per design, never
more) and without an LLM:

- **entities** (``entity_weight``, 0.2 by default): the names and numbers the seeds hold
  (:mod:`membot.recall.values`; "Sweden", "2022") that are not the question's words nor the
  seeds' speakers, at most :data:`MAX_ENTITY_TERMS`, are a second BM25 query over the scope;
  its score, divided by its best, is added. One extra BM25 read, and one read of the seeds'
  lines.
- **feedback** (pseudo-relevance feedback, ``feedback_weight``, off): the seeds' own stored
  vectors, averaged, are a second query; each line's cosine with it, min-max normalised, is
  added. One extra dense scan of the scope.

Which paid, by how much per question category, and how the defaults were chosen on folds:
docs/recall.md ("Questions that join facts").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from membot.recall.bm25 import STOPWORDS, query_terms
from membot.recall.values import named_words

if TYPE_CHECKING:
    from membot.index.scope import InScope, Scope
    from membot.model import Line
    from membot.recall.source import RecallSource

# The most words an entity query holds: enough for the names and numbers of a few lines, few
# enough that BM25 still rewards a line for holding one of them.
MAX_ENTITY_TERMS = 12


def seed_indices(fused: np.ndarray, candidates: np.ndarray, seeds: int) -> np.ndarray:
    """Indices (into the scope's arrays) of the ``seeds`` best-scoring ``candidates``."""
    if seeds <= 0 or not len(candidates):
        return np.zeros(0, dtype=np.int64)
    best = candidates[np.argsort(-fused[candidates], kind="stable")[:seeds]]
    return np.asarray(best, dtype=np.int64)


def feedback_scores(
    source: RecallSource, lines: InScope, seeds: np.ndarray, scope: Scope
) -> np.ndarray:
    """Each line's cosine with the mean of the seeds' vectors, min-max normalised to [0, 1],
    aligned with ``lines.ids`` (0 for a line the second scan did not reach)."""
    scores = np.zeros(len(lines.ids), dtype=np.float32)
    if not len(seeds):
        return scores
    seed_vectors = source.vectors([int(lines.ids[i]) for i in seeds], scope)
    centre = seed_vectors.mean(axis=0)
    norm = float(np.linalg.norm(centre))
    if norm == 0:
        return scores
    second = source.scored((centre / norm).astype(np.float32), scope)
    return _aligned(lines.ids, second.ids, _normalised(second.scores))


def entity_scores(
    source: RecallSource, lines: InScope, seeds: np.ndarray, scope: Scope, question: str
) -> np.ndarray:
    """BM25 of the seeds' entity words (:func:`entity_terms`) over the lines, min-max
    normalised to [0, 1], aligned with ``lines.ids`` (0 for a line holding none of them)."""
    scores = np.zeros(len(lines.ids), dtype=np.float32)
    if not len(seeds):
        return scores
    ranges = [(int(lines.thread_ids[i]), int(lines.seqs[i]), int(lines.seqs[i])) for i in seeds]
    seed_lines = [line for found in source.lines_in_ranges(ranges) for line in found]
    terms = entity_terms(seed_lines, question)
    if not terms:
        return scores
    ids, bm25 = source.lexical_scores(terms, scope, just_read=True, among=lines.ids)
    if not len(ids):
        return scores
    top = float(np.max(bm25))
    return _aligned(lines.ids, ids, bm25 / top if top > 0 else bm25)


def entity_terms(lines: Sequence[Line], question: str) -> list[str]:
    """The words of ``lines`` that name something -- a capitalised word not opening a
    sentence ("Sweden", "Air Fryer"), a number or date ("2022", "7/5") -- that are not the
    question's own words nor a line's speaker, in the order met, at most
    :data:`MAX_ENTITY_TERMS`."""
    asked = set(query_terms(question))
    speakers = {word for line in lines for word in query_terms(line.speaker or "")}
    found: dict[str, None] = {}
    for line in lines:
        for word in named_words(line.text):
            for term in query_terms(word):
                if term not in asked and term not in speakers and term not in STOPWORDS:
                    found.setdefault(term)
    return list(found)[:MAX_ENTITY_TERMS]


def _aligned(ids: np.ndarray, found_ids: np.ndarray, found: np.ndarray) -> np.ndarray:
    """``found`` (scores of ``found_ids``, in [0, 1]) placed at ``ids`` (sorted); 0 where a
    line was not found."""
    scores = np.zeros(len(ids), dtype=np.float32)
    if not len(ids) or not len(found_ids):
        return scores
    normalised = np.asarray(found, dtype=np.float32)
    at = np.clip(np.searchsorted(ids, found_ids), 0, len(ids) - 1)
    present = ids[at] == found_ids
    scores[at[present]] = normalised[present]
    return scores


def _normalised(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float32)
    spread = float(values.max() - values.min()) if values.size else 0.0
    return (values - values.min()) / spread if spread > 0 else np.ones_like(values)

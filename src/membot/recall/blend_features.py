"""What ``blend`` scores a line by: its features, each in [0, 1], and their weighted sum.

One function (:func:`blend_features`) computes them for a live turn, for a benchmark and for
``benchmarks/ranker_features.py``, which dumps them to fit the weights (docs/recall.md, "A
fitted ranker"): what a ranker is fitted on is what a turn computes.

The features, by the option that weighs each (:data:`FEATURES`):

- ``dense_weight``: the line's cosine (raised toward its best part's, ``part_weight``) plus
  ``neighbour_weight`` times its previous and next lines', min-max normalised over the scope;
- ``lexical_weight``: stopword-free BM25, min-max normalised;
- ``time_weight``: 1 for a line said within the time the question points to ("last week");
- ``speaker_weight``: 1 for one of the best :data:`SPEAKER_DEPTH` lines said by a speaker
  the question names;
- ``entity_weight`` and ``feedback_weight``: the second round
  (:mod:`membot.recall.second_round`), seeded by the best lines so far;
- ``sentence_weight``: the best of the line's own and its parts' cosines, min-max normalised;
- ``neighbour_only_weight``: the neighbours' cosines alone, min-max normalised;
- ``recency_weight``: when the line was said, min-max normalised (the latest 1);
- ``opener_weight``: for the line that opens one of the ``opener_threads`` best threads, its
  thread's best score so far (the sum of every feature above), min-max normalised over the
  threads; 0 for other lines (:mod:`membot.recall.openers`).

Before any of them, ``statement_weight`` (0: off) mixes into each line's cosine (and its
parts') its cosine with the question in the form of its answer
(:mod:`membot.recall.question_forms`; ``statement_max``: never lowered), and
``unnamed_weight`` (0: off) its cosine with the question without the speakers it names
(:mod:`membot.recall.named_speakers`).

``sentence_weight``, ``neighbour_only_weight`` and ``recency_weight`` are 0 in the hand-set
``blend``; each feature is computed only where weighed (or asked for, ``every``). Speakers,
the second round and the opening lines read the best lines of the sum so far, so they are
computed in this order, each after the sum of those before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from membot.recall.bm25 import STOPWORDS, query_terms
from membot.recall.named_speakers import named_in, with_names_left_out
from membot.recall.openers import opener_scores
from membot.recall.question_clauses import with_clauses
from membot.recall.question_forms import with_statement
from membot.recall.second_round import entity_scores, feedback_scores, seed_indices
from membot.recall.timeframe import window_of

if TYPE_CHECKING:
    from membot.index.scope import InScope, Scope
    from membot.recall.source import RecallSource
    from membot.recall.strategies import Question

# blend raises a line said by a speaker the new line names by ``speaker_weight`` (chosen with
# --folds: docs/recall.md, "Lines said by the person asked about"). It reads the speakers of
# this many of the best candidates only, from the store in one query (the index holds none).
SPEAKER_DEPTH = 50

# Each feature by the option that weighs it, in the order they are added to the sum.
FEATURES = (
    "dense_weight",
    "lexical_weight",
    "time_weight",
    "speaker_weight",
    "feedback_weight",
    "entity_weight",
    "sentence_weight",
    "neighbour_only_weight",
    "recency_weight",
    "opener_weight",
)


class FeatureScore(Protocol):
    """A score of blend's features other than their hand-set sum (a fitted ranker,
    :class:`membot.recall.fitted_ranker.FittedRanker`)."""

    @property
    def features(self) -> frozenset[str]:
        """The features it reads, by the option that weighs each."""
        ...

    def score(self, columns: Mapping[str, np.ndarray]) -> np.ndarray: ...


# What ``every`` computes: each feature but feedback, which costs a second dense scan.
EVERY = frozenset(FEATURES) - {"feedback_weight"}


@dataclass(frozen=True)
class BlendFeatures:
    """The lines of the scope (``lines``, their cosine raised toward their parts' in
    ``lines.scores``), each feature by the option that weighs it (0 where not computed),
    their weighted sum (``fused``), the lines dated where the question points (``dated``),
    BM25's best ``lexical_top`` ids, and the lines at or above the lower bar
    (``candidates``: only they can be kept)."""

    lines: InScope
    columns: dict[str, np.ndarray]
    fused: np.ndarray
    dated: np.ndarray
    lexical_top: set[int]
    candidates: np.ndarray

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """The features of the lines at ``rows``, one column per :data:`FEATURES`."""
        return np.stack([self.columns[name][rows] for name in FEATURES], axis=1)


def blend_features(
    source: RecallSource,
    question: Question,
    option: Mapping[str, float],
    low_bar: float,
    every: bool = False,
    ranker: FeatureScore | None = None,
) -> BlendFeatures | None:
    """The features of every line in the question's scope and their sum weighted by
    ``option``, or with ``ranker``, its score of them (``every``: each feature of
    :data:`EVERY` computed, also those weighed 0); None for an empty scope."""
    raw = source.scored(question.vector, question.scope)
    if option["statement_weight"]:
        highest = bool(option["statement_max"])
        raw = with_statement(source, question, raw, option["statement_weight"], highest)
    if option["unnamed_weight"]:
        raw = with_names_left_out(source, question, raw, option["unnamed_weight"])
    if option["clause_weight"]:
        raw = with_clauses(source, question, raw, option["clause_weight"])
    lines = raw.with_parts(option["part_weight"])
    if not len(lines.ids):
        return None
    wanted = EVERY if every else ranker.features if ranker else frozenset()
    zeros = np.zeros(len(lines.ids), dtype=np.float64)
    columns = dict.fromkeys(FEATURES, zeros)
    neighbours = lines.neighbour_scores()
    columns["dense_weight"] = min_max(lines.scores + option["neighbour_weight"] * neighbours)
    columns["lexical_weight"], lexical_order = _bm25_scores(
        source, question.text, question.scope, lines.ids
    )
    # A line said when the question points to ("last week", "in March") counts as evidence too.
    dated = np.zeros(len(lines.ids), dtype=bool)
    window = (
        window_of(question.line, question.now) if _wanted("time_weight", option, wanted) else None
    )
    if window is not None:
        start, end = (moment.timestamp() for moment in window)
        dated = (lines.created >= start) & (lines.created < end)
        columns["time_weight"] = dated.astype(np.float64)
    fused = option["dense_weight"] * columns["dense_weight"]
    fused = fused + option["lexical_weight"] * columns["lexical_weight"]
    if window is not None and option["time_weight"]:
        fused = fused + option["time_weight"] * columns["time_weight"]
    candidates = np.flatnonzero(lines.scores >= low_bar)
    if _wanted("speaker_weight", option, wanted):
        columns["speaker_weight"] = _said_by_named(source, lines, fused, candidates, question.line)
        fused = fused + option["speaker_weight"] * columns["speaker_weight"]
    second_round = _wanted("feedback_weight", option, wanted) or _wanted(
        "entity_weight", option, wanted
    )
    seeds = seed_indices(fused, candidates, int(option["feedback_seeds"]) if second_round else 0)
    if _wanted("feedback_weight", option, wanted):
        columns["feedback_weight"] = feedback_scores(source, lines, seeds, question.scope)
    if _wanted("entity_weight", option, wanted):
        columns["entity_weight"] = entity_scores(
            source, lines, seeds, question.scope, question.text
        )
    if option["feedback_weight"] or option["entity_weight"]:
        fused = fused + (
            option["feedback_weight"] * columns["feedback_weight"]
            + option["entity_weight"] * columns["entity_weight"]
        )
    fused = _added_features(fused, columns, raw, neighbours, option, wanted)
    if _wanted("opener_weight", option, wanted):
        threads = int(option["opener_threads"])
        columns["opener_weight"] = opener_scores(lines, fused, threads)
        if option["opener_weight"]:
            fused = fused + option["opener_weight"] * columns["opener_weight"]
    if ranker is not None:
        fused = ranker.score(columns)
    lexical_top = set(lexical_order[: int(option["lexical_top"])])
    return BlendFeatures(lines, columns, fused, dated, lexical_top, candidates)


def _added_features(
    fused: np.ndarray,
    columns: dict[str, np.ndarray],
    raw: InScope,
    neighbours: np.ndarray,
    option: Mapping[str, float],
    wanted: frozenset[str],
) -> np.ndarray:
    """``fused`` with the features the hand-set blend weighs 0 (the module docstring) added."""
    if _wanted("sentence_weight", option, wanted):
        parts = raw.best_parts if raw.best_parts is not None else raw.scores
        columns["sentence_weight"] = min_max(np.maximum(raw.scores, parts))
    if _wanted("neighbour_only_weight", option, wanted):
        columns["neighbour_only_weight"] = min_max(neighbours)
    if _wanted("recency_weight", option, wanted):
        columns["recency_weight"] = min_max(raw.created)
    for name in ("sentence_weight", "neighbour_only_weight", "recency_weight"):
        if option[name]:
            fused = fused + option[name] * columns[name]
    return fused


def _wanted(name: str, option: Mapping[str, float], wanted: frozenset[str]) -> bool:
    """Whether feature ``name`` is computed: weighed by the options, or asked for."""
    return bool(option[name]) or name in wanted


def min_max(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` scaled to [0, 1] (all 1 when they are equal)."""
    scores = np.asarray(values, dtype=float)
    spread = float(scores.max() - scores.min()) if scores.size else 0.0
    return (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)


def _said_by_named(
    source: RecallSource, lines: InScope, fused: np.ndarray, candidates: np.ndarray, said: str
) -> np.ndarray:
    """1 for each of the best ``SPEAKER_DEPTH`` candidates said by a speaker the new line
    (``said``) names (:func:`~membot.recall.named_speakers.named_in`); 0 for every other line:
    "What has Melanie painted?" is answered by Melanie's lines more than by the replies that
    name her."""
    named = np.zeros(len(lines.ids), dtype=np.float64)
    best = candidates[np.argsort(-fused[candidates], kind="stable")[:SPEAKER_DEPTH]]
    speakers = source.speakers(lines.ids[best].tolist())
    asked = set(named_in(said, {speaker for speaker in speakers.values() if speaker}))
    for index in best:
        speaker = speakers.get(int(lines.ids[index])) or ""
        named[index] = speaker.strip() in asked
    return named


def _bm25_scores(
    source: RecallSource, query: str, scope: Scope, ids: np.ndarray
) -> tuple[np.ndarray, list[int]]:
    """BM25 of the query's words that are not stopwords, min-max normalised, for the lines
    ``ids`` (a scope's, sorted; 0 where a line has none of the words), and the ids BM25
    ranks, best first. Lines outside ``ids`` (the feed among them) drop out."""
    scores = np.zeros(len(ids), dtype=np.float32)
    terms = query_terms(query, STOPWORDS)
    if not terms or not len(ids):
        return scores, []
    # The lines' cosines were read a moment ago: their words are the same lines'.
    ranked, bm25 = source.lexical_scores(terms, scope, just_read=True, among=ids)
    at = np.clip(np.searchsorted(ids, ranked), 0, len(ids) - 1)
    in_scope = ids[at] == ranked
    if in_scope.any():
        scores[at[in_scope]] = min_max(bm25[in_scope].astype(np.float32))
    return scores, ranked[in_scope].tolist()

"""The strategies that rank lines: ``lines``, ``hybrid``, ``blend``, ``bm25`` and ``prune``
(what each keeps: :mod:`membot.recall.chat`). Each match brings the block of lines around it
(``expand_before``/``expand_after``, ``partners_only``), but ``prune``'s, which brings its turn
partner only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from membot.config import BotSettings
from membot.index.scope import PART_WEIGHT, Scope
from membot.model import Line
from membot.recall.blend_features import blend_features
from membot.recall.bm25 import query_terms
from membot.recall.diversity import DIVERSITY, block_decay, spread_for, spread_out
from membot.recall.fitted_ranker import FittedRanker
from membot.recall.lines import Hit, expand_neighbors
from membot.recall.named_speakers import NAMES_LEFT_OUT
from membot.recall.question_clauses import CLAUSES
from membot.recall.strategies import Choice, Question, option_values
from membot.store.base import BufferEntry

if TYPE_CHECKING:
    from membot.recall.source import RecallSource

EVERY_LINE = 2**31  # a search depth that reaches every line in scope

# How a match's block is drawn (see the module docstring); shared by the strategies that expand.
EXPANSION: dict[str, float] = {"neighbour_decay": 0.85, "partners_only": 1}
KEEP = {"lexical_top": 3, "lexical_margin": 0.1}
# blend's second round (membot.recall.second_round; chosen with --folds, docs/recall.md):
# the seeds' names and numbers at 0.2; their vectors (pseudo-relevance feedback) off.
SECOND_ROUND = {"entity_weight": 0.2, "feedback_weight": 0.0, "feedback_seeds": 10}
WHOLE_NUMBERS = frozenset({"lexical_top", "feedback_seeds", "opener_threads", "near_lines"})
SWITCHES = frozenset({"partners_only", "many_only", "statement_max"})  # 1 (on) or 0 (off)
LEXICAL_DEPTH = 50  # BM25 candidates read per turn by hybrid and bm25
# blend raises a line said by a speaker the new line names (chosen with --folds: docs/recall.md,
# "Lines said by the person asked about"; membot.recall.blend_features).
SPEAKER_WEIGHT = 0.1
# Features the hand-set blend weighs 0 (membot.recall.blend_features): a fitted ranker may not.
UNWEIGHED = {"sentence_weight": 0.0, "neighbour_only_weight": 0.0, "recency_weight": 0.0}
# A question's cosines mixed with its statement form's (membot.recall.question_forms): off.
STATEMENT = {"statement_weight": 0.0, "statement_max": 1}
# blend's matches from more threads (membot.recall.diversity): measured with --folds and left
# off (docs/recall.md, "Matches from more sessions").
SPREAD = DIVERSITY


class ExpandingStrategy:
    """A strategy whose matches each bring the lines around them (``expand_before``,
    ``expand_after``; ``partners_only``): subclasses give the matches and their order."""

    name = ""
    options: Mapping[str, float] = MappingProxyType({})

    @property
    def whole_numbers(self) -> frozenset[str]:
        return WHOLE_NUMBERS & set(self.options)

    @property
    def switches(self) -> frozenset[str]:
        return SWITCHES & set(self.options)

    def ordered(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[tuple[Hit, float]]:
        """The kept matches, best first, each with the score it is ordered by."""
        raise NotImplementedError

    def block_decay(self, option: Mapping[str, float], question: Question) -> float:
        """How a match's block lines are ordered after it (``neighbour_decay``)."""
        return option["neighbour_decay"]

    def choose(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[Choice]:
        ordered = self.ordered(source, settings, question)
        option = option_values(self, settings)
        partners_only, decay = bool(option["partners_only"]), self.block_decay(option, question)
        hits = [hit for hit, _ in ordered]
        blocks = _blocks(source, hits, settings, question.scope, partners_only)
        return [
            Choice(hit, block, order, decay)
            for (hit, order), block in zip(ordered, blocks, strict=True)
        ]


class LinesStrategy(ExpandingStrategy):
    """``lines`` (uncany-membot): the lines whose cosine reaches ``threshold``, best first."""

    name = "lines"
    options = MappingProxyType(EXPANSION)

    def ordered(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[tuple[Hit, float]]:
        found = source.nearest(
            question.vector, question.scope, settings.max_matches, settings.threshold
        )
        return [(hit, hit.score) for hit in found]


class PruneStrategy:
    """``prune`` (context pruning): the ``lines`` matches, each with its turn partner only."""

    name = "prune"
    options: Mapping[str, float] = MappingProxyType({})
    whole_numbers = switches = frozenset[str]()

    def choose(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[Choice]:
        found = source.nearest(
            question.vector, question.scope, settings.max_matches, settings.threshold
        )
        return [Choice(hit, _with_partner(source, hit), hit.score, 1.0) for hit in found]


class LexicalStrategy(ExpandingStrategy):
    """``hybrid`` (``fused``: dense and BM25 ranks fused by reciprocal rank) and ``bm25``
    (BM25's order); kept by cosine, or among BM25's first at the lower bar."""

    def __init__(self, name: str, *, fused: bool) -> None:
        self.name, self.fused = name, fused
        fusion = {"dense_weight": 1.0, "lexical_weight": 2.0, "rrf_k": 60.0} if fused else {}
        self.options = MappingProxyType({**fusion, **KEEP, **EXPANSION})

    def ordered(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[tuple[Hit, float]]:
        return _lexical(source, settings, question, option_values(self, settings), self.fused)


class BlendStrategy(ExpandingStrategy):
    """``blend`` (the default): cosine (raised toward the line's best part's,
    ``part_weight``) with its neighbours', stopword-free BM25, the time the question
    points to and the speakers it names, normalised and added."""

    name = "blend"
    options = MappingProxyType(
        {
            "dense_weight": 1.0,
            "lexical_weight": 0.5,
            "neighbour_weight": 0.25,
            "time_weight": 0.25,
            "speaker_weight": SPEAKER_WEIGHT,
            **SECOND_ROUND,
            **UNWEIGHED,
            "opener_weight": 0.1,  # a matching thread's opening line raised (recall/openers.py)
            "opener_threads": 5,  # ... of this many threads, the best (a whole number)
            "part_weight": PART_WEIGHT,
            **STATEMENT,
            **CLAUSES,  # a question's pieces searched each (recall/question_clauses.py)
            **NAMES_LEFT_OUT,  # searched without the speakers it names (recall/named_speakers.py)
            **KEEP,
            **EXPANSION,
            **SPREAD,
        }
    )

    def ordered(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[tuple[Hit, float]]:
        return _blended(source, settings, question, option_values(self, settings))

    def block_decay(self, option: Mapping[str, float], question: Question) -> float:
        return block_decay(option, question.line)


class FittedBlendStrategy(BlendStrategy):
    """blend's features, computed as blend computes them (its options), scored by a fitted
    ranker (:mod:`membot.recall.fitted_ranker`) instead of blend's hand-set sum. Not
    registered by membot: none fitted so far beat the hand-set blend (docs/recall.md)."""

    def __init__(self, name: str, ranker: FittedRanker) -> None:
        self.name, self.ranker = name, ranker

    def ordered(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[tuple[Hit, float]]:
        option = option_values(self, settings)
        return _blended(source, settings, question, option, self.ranker)


def _blocks(
    source: RecallSource,
    hits: list[Hit],
    settings: BotSettings,
    scope: Scope,
    partners_only: bool,
) -> list[BufferEntry]:
    """The lines ``expand_before``/``expand_after`` around each hit; with ``partners_only``,
    only as far as the farthest line said by another party on each side (of the roles recall
    reads: a tool result is nobody's partner). The lines are read in one query."""
    blocks = [expand_neighbors(hit, settings.expand_before, settings.expand_after) for hit in hits]
    if not partners_only:
        return blocks
    wider = [i for i, block in enumerate(blocks) if block.first_seq != block.last_seq]
    ranges = [(hits[i].thread_id, blocks[i].first_seq, blocks[i].last_seq) for i in wider]
    for i, lines in zip(wider, source.lines_in_ranges(ranges), strict=True):
        blocks[i] = _to_partners(hits[i], lines, scope)
    return blocks


def _to_partners(hit: Hit, lines: list[Line], scope: Scope) -> BufferEntry:
    """A hit's block cut to the farthest line of another party on each side."""
    said_by = {line.seq: _party(line) for line in lines if str(line.role) in scope.roles}
    own = said_by.get(hit.seq)
    others = [seq for seq, party in said_by.items() if party != own]
    first = min([seq for seq in others if seq < hit.seq], default=hit.seq)
    last = max([seq for seq in others if seq > hit.seq], default=hit.seq)
    return BufferEntry(hit.thread_id, first, last, hit.score, (hit.seq,))


def _party(line: Line) -> tuple[str, str | None]:
    return str(line.role), line.speaker


def _with_partner(source: RecallSource, hit: Hit) -> BufferEntry:
    """The hit and its turn partner: the bot line right after a human line, or the human
    line right before a bot line."""
    (around,) = source.lines_in_ranges([(hit.thread_id, hit.seq - 1, hit.seq + 1)])
    lines = {line.seq: line for line in around}
    first = last = hit.seq
    line = lines.get(hit.seq)
    role = str(line.role) if line is not None else ""
    after, before = lines.get(hit.seq + 1), lines.get(hit.seq - 1)
    if role == "human" and after is not None and str(after.role) == "bot":
        last = hit.seq + 1
    elif role == "bot" and before is not None and str(before.role) == "human":
        first = hit.seq - 1
    return BufferEntry(hit.thread_id, first, last, hit.score, (hit.seq,))


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


def _lexical(
    source: RecallSource,
    settings: BotSettings,
    question: Question,
    option: Mapping[str, float],
    fused: bool,
) -> list[tuple[Hit, float]]:
    query, vector, scope = question.text, question.vector, question.scope
    low_bar = settings.threshold - option["lexical_margin"]
    # Only lines at or above the lower bar can be kept: the others need no score.
    near = source.nearest(vector, scope, EVERY_LINE, min_score=low_bar)
    cosine = {hit.line_id: hit.score for hit in near}
    # A turn keeps a few matches: BM25's first 50 are enough; a ranking reads them all.
    depth = max(LEXICAL_DEPTH, settings.max_matches)
    lexical = source.lexical(query_terms(query), scope, depth)
    lexical_top = {hit.line_id for hit in lexical[: int(option["lexical_top"])]}
    if fused:
        dense = [hit for hit in near if hit.score >= settings.threshold]
        weights = (option["dense_weight"], option["lexical_weight"])
        order = reciprocal_rank_fusion([dense, lexical], weights, option["rrf_k"])
    else:
        order = lexical
    kept = []
    for hit in order:
        score = cosine.get(hit.line_id, -1.0)
        if score >= settings.threshold or (hit.line_id in lexical_top and score >= low_bar):
            kept.append((Hit(hit.line_id, hit.thread_id, hit.seq, score), hit.score))
            if len(kept) == settings.max_matches:
                break
    return kept


def _blended(
    source: RecallSource,
    settings: BotSettings,
    question: Question,
    option: Mapping[str, float],
    ranker: FittedRanker | None = None,
) -> list[tuple[Hit, float]]:
    low_bar = settings.threshold - option["lexical_margin"]
    features = blend_features(source, question, option, low_bar, ranker=ranker)
    if features is None:
        return []
    lines, fused, cosine = features.lines, features.fused, features.lines.scores
    kept = []
    # Kept: a line whose cosine reaches the threshold, or one of BM25's best or said when the
    # question points to at the lower bar (only those at or above it are candidates).
    for index in features.candidates[np.argsort(-fused[features.candidates], kind="stable")]:
        line_id, score = int(lines.ids[index]), float(cosine[index])
        if score >= settings.threshold or line_id in features.lexical_top or features.dated[index]:
            hit = Hit(line_id, int(lines.thread_ids[index]), int(lines.seqs[index]), score)
            kept.append((hit, float(fused[index])))
            if len(kept) == settings.max_matches:
                break
    return spread_out(kept, spread_for(option, question.line))

"""Recall, the one implementation: a bot's strategy picks which earlier lines come back.

A live turn (:meth:`membot.Memory.recall`) and the benchmarks (:mod:`membot.recall.ranked`)
both call :func:`chosen_for_turn`: each strategy orders the lines in scope and keeps those its
keep-or-drop rule lets through (``threshold``, ``lexical_top``/``lexical_margin``, at most
``max_matches``); each kept match brings in a block of the lines around it. A turn merges the
blocks into its relevance buffer; a benchmark asks with ``threshold`` -1 (every line kept) and
reads the blocks' lines in the order :func:`membot.recall.ranked.context_order` gives them.

- ``lines`` (uncany-membot): lines whose cosine with the match string reaches ``threshold``,
  best first.
- ``hybrid``: dense and BM25 ranks fused by reciprocal rank. Kept: a line whose cosine
  reaches ``threshold``, or a line among BM25's first ``lexical_top`` whose cosine reaches
  ``threshold - lexical_margin`` -- sharing rare words with the question is evidence too, so
  the bar is lower for it. Options: ``dense_weight``, ``lexical_weight``, ``rrf_k``,
  ``lexical_top``, ``lexical_margin``.
- ``blend`` (the default): a line's cosine plus ``neighbour_weight`` times its previous and
  next lines' cosines, and BM25 over the query's words that are not stopwords, each min-max
  normalised and added (``dense_weight``, ``lexical_weight``). Kept like hybrid's lines (its
  own cosine against ``threshold``, or among BM25's first ``lexical_top`` within
  ``lexical_margin``), in blended order. When the line names a time
  (``membot.recall.timeframe``: "a week ago", "last Friday", "in March 2023"), lines said
  within it are raised by ``time_weight`` and kept at the lower bar too.
- ``bm25``: BM25's order; kept like hybrid's lexical lines.
- ``prune`` (context pruning): the ``lines`` matches, each with its turn partner only (the bot's
  reply to a human line, or the human line a bot line answered).
- ``pairs`` and ``windows``: the unit (exchange, or window of ``window_size`` lines overlapping
  by ``window_overlap``) whose vector reaches ``threshold`` comes back whole.

Expansion (``lines``, ``hybrid``, ``blend``, ``bm25``): a match brings the lines up to
``expand_before``/``expand_after`` away in its thread; with ``partners_only`` (the default) the
block reaches only as far as the farthest line said by the other party (another role or
speaker) -- the exchange around the match, not the same person's neighbouring lines, which
must earn their place by their own score. ``neighbour_decay`` orders a block's lines after
their match for a context cut at k lines (the benchmarks): a line d away counts
``neighbour_decay ** d`` of its match's score.

A match's reported score is its cosine with the match string in every strategy (for units,
the unit's), so traces compare across strategies; the order a strategy gives it (its fused
score) travels beside it as :attr:`Choice.order`. Lines are embedded as ``Speaker: text``
where they have a speaker (:func:`membot.memory.facade.embedding_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from membot.config import BotSettings
from membot.errors import ConfigError
from membot.index.vectors import Scope, similarities
from membot.model import Line
from membot.recall.bm25 import STOPWORDS, query_terms
from membot.recall.lines import Hit, expand_neighbors, merge_blocks
from membot.recall.pairs import PairUnits, Unit, Units
from membot.recall.timeframe import window_of
from membot.recall.windows import WindowUnits
from membot.store.base import BufferEntry, lines_between

if TYPE_CHECKING:
    from membot.memory.facade import Memory

CHAT_STRATEGIES = ("lines", "hybrid", "blend", "bm25", "prune", "pairs", "windows")
EVERY_LINE = 2**31  # a search depth that reaches every line in scope

# How a match's block is drawn (see the module docstring); shared by the strategies that expand.
EXPANSION: dict[str, float] = {"neighbour_decay": 0.85, "partners_only": 1}
KEEP = {"lexical_top": 3, "lexical_margin": 0.1}
# The one table of options: each strategy's numbers (a bot's ``strategy.NAME`` settings, and
# ``membot eval --set NAME=VALUE``), with defaults.
OPTIONS: dict[str, dict[str, float]] = {
    "lines": {**EXPANSION},
    "hybrid": {"dense_weight": 1.0, "lexical_weight": 2.0, "rrf_k": 60.0, **KEEP, **EXPANSION},
    "blend": {
        "dense_weight": 1.0,
        "lexical_weight": 0.5,
        "neighbour_weight": 0.25,
        "time_weight": 0.25,
        **KEEP,
        **EXPANSION,
    },
    "bm25": {**KEEP, **EXPANSION},
    "prune": {},
    "pairs": {},
    "windows": {},
}
WHOLE_NUMBERS = frozenset({"lexical_top"})
SWITCHES = frozenset({"partners_only"})  # 1 (on) or 0 (off)
LEXICAL_DEPTH = 50  # BM25 candidates read per turn by hybrid and bm25


@dataclass(frozen=True)
class Choice:
    """A kept match, the block of lines it brings in, and its place in the strategy's order
    (``order``: the score the strategy sorted by; ``hit.score`` is the cosine)."""

    hit: Hit
    block: BufferEntry
    order: float
    decay: float  # a block line d away from the match is ordered at decay ** d of it


@dataclass(frozen=True)
class ChatRecall:
    """The matches a strategy kept (best first) and the blocks they bring in."""

    hits: tuple[Hit, ...]
    blocks: tuple[BufferEntry, ...]


def check_strategy(settings: BotSettings) -> None:
    """ConfigError unless the strategy exists and every option is one it reads, of its kind."""
    if settings.strategy not in OPTIONS:
        raise ConfigError(
            f"unknown strategy {settings.strategy!r}: use one of {', '.join(CHAT_STRATEGIES)}"
        )
    known = OPTIONS[settings.strategy]
    for name, value in settings.strategy_options:
        if name not in known:
            listed = ", ".join(f"strategy.{each}" for each in known) or "none"
            raise ConfigError(
                f"strategy {settings.strategy} has no option {name!r} (it reads: {listed})"
            )
        if name in SWITCHES and value not in (0, 1):
            raise ConfigError(f"strategy.{name} is 1 (on) or 0 (off), not {value}")
        if name in WHOLE_NUMBERS and not float(value).is_integer():
            raise ConfigError(f"strategy.{name} is a whole number, not {value}")


def options_of(settings: BotSettings) -> dict[str, float]:
    """The strategy's options: its defaults, overridden by the bot's settings."""
    return {
        name: settings.option(name, value) for name, value in OPTIONS[settings.strategy].items()
    }


def recall_for_turn(
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None = None,
    said: str | None = None,
) -> ChatRecall:
    """The matches and merged blocks ``settings.strategy`` recalls for one turn asked at
    ``now`` (see :func:`chosen_for_turn`)."""
    choices = chosen_for_turn(memory, settings, query, vector, scope, now, said)
    blocks = merge_blocks([choice.block for choice in choices])
    return ChatRecall(tuple(choice.hit for choice in choices), tuple(blocks))


def chosen_for_turn(
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None = None,
    said: str | None = None,
) -> list[Choice]:
    """The matches ``settings.strategy`` keeps for one turn, best first, each with its block:
    ``blend`` reads time words such as "last week" in ``said`` (the new line itself; default
    ``query``, the match string) from ``now``."""
    check_strategy(settings)
    if settings.max_matches == 0:
        return []
    name = settings.strategy
    if name in ("pairs", "windows"):
        return _units(memory, settings, vector, scope)
    if name == "blend":
        ordered = _blended(memory, settings, query, vector, scope, now, said or query)
    elif name in ("hybrid", "bm25"):
        ordered = _lexical(memory, settings, query, vector, scope, fused=name == "hybrid")
    else:
        found = memory.index.hits(vector, scope, settings.max_matches, settings.threshold)
        ordered = [(hit, hit.score) for hit in found]
    if name == "prune":
        return [Choice(hit, _with_partner(memory, hit), order, 1.0) for hit, order in ordered]
    option = options_of(settings)
    partners_only, decay = bool(option["partners_only"]), option["neighbour_decay"]
    blocks = _blocks(memory, [hit for hit, _ in ordered], settings, scope, partners_only)
    return [
        Choice(hit, block, order, decay)
        for (hit, order), block in zip(ordered, blocks, strict=True)
    ]


def _blocks(
    memory: Memory, hits: list[Hit], settings: BotSettings, scope: Scope, partners_only: bool
) -> list[BufferEntry]:
    """The lines ``expand_before``/``expand_after`` around each hit; with ``partners_only``,
    only as far as the farthest line said by another party on each side (of the roles recall
    reads: a tool result is nobody's partner). The lines are read in one query."""
    blocks = [expand_neighbors(hit, settings.expand_before, settings.expand_after) for hit in hits]
    if not partners_only:
        return blocks
    wider = [i for i, block in enumerate(blocks) if block.first_seq != block.last_seq]
    ranges = [(hits[i].thread_id, blocks[i].first_seq, blocks[i].last_seq) for i in wider]
    for i, lines in zip(wider, memory.store.lines_in_ranges(ranges), strict=True):
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


def _with_partner(memory: Memory, hit: Hit) -> BufferEntry:
    """The hit and its turn partner: the bot line right after a human line, or the human
    line right before a bot line."""
    around = lines_between(memory.store, hit.thread_id, hit.seq - 1, hit.seq + 1)
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


def min_max(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` scaled to [0, 1] (all 1 when they are equal)."""
    scores = np.asarray(values, dtype=float)
    spread = float(scores.max() - scores.min()) if scores.size else 0.0
    return (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)


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
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    fused: bool,
) -> list[tuple[Hit, float]]:
    option = options_of(settings)
    low_bar = settings.threshold - option["lexical_margin"]
    # Only lines at or above the lower bar can be kept: the others need no score.
    near = memory.index.hits(vector, scope, EVERY_LINE, min_score=low_bar)
    cosine = {hit.line_id: hit.score for hit in near}
    # A turn keeps a few matches: BM25's first 50 are enough; a ranking reads them all.
    depth = max(LEXICAL_DEPTH, settings.max_matches)
    lexical = memory.index.lexical(query_terms(query), scope, depth)
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
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None,
    said: str,
) -> list[tuple[Hit, float]]:
    option = options_of(settings)
    lines = memory.index.scored_in_scope(vector, scope)
    if not len(lines.ids):
        return []
    cosine = lines.scores
    dense = cosine + option["neighbour_weight"] * lines.neighbour_scores()
    words, lexical_order = _bm25_scores(memory, query, scope, lines.ids)
    lexical_top = set(lexical_order[: int(option["lexical_top"])])
    fused = option["dense_weight"] * min_max(dense) + option["lexical_weight"] * words
    # A line said when the question points to ("last week", "in March") counts as evidence
    # too: it is raised, and kept at the lower bar like BM25's best lines.
    dated = np.zeros(len(lines.ids), dtype=bool)
    window = window_of(said, now) if option["time_weight"] else None
    if window is not None:
        start, end = (moment.timestamp() for moment in window)
        dated = (lines.created >= start) & (lines.created < end)
        fused = fused + option["time_weight"] * dated
    low_bar = settings.threshold - option["lexical_margin"]
    # Only lines at or above the lower bar can be kept: the others need no ordering.
    candidates = np.flatnonzero(cosine >= low_bar)
    kept = []
    for index in candidates[np.argsort(-fused[candidates], kind="stable")]:
        line_id, score = int(lines.ids[index]), float(cosine[index])
        if score >= settings.threshold or line_id in lexical_top or dated[index]:
            hit = Hit(line_id, int(lines.thread_ids[index]), int(lines.seqs[index]), score)
            kept.append((hit, float(fused[index])))
            if len(kept) == settings.max_matches:
                break
    return kept


def _bm25_scores(
    memory: Memory, query: str, scope: Scope, ids: np.ndarray
) -> tuple[np.ndarray, list[int]]:
    """BM25 of the query's words that are not stopwords, min-max normalised, for the lines
    ``ids`` (a scope's, sorted; 0 where a line has none of the words), and the ids BM25
    ranks, best first. Lines outside ``ids`` (the feed among them) drop out."""
    scores = np.zeros(len(ids), dtype=np.float32)
    terms = query_terms(query, STOPWORDS)
    if not terms or not len(ids):
        return scores, []
    # The lines' cosines were read a moment ago: their words are the same lines'.
    ranked, bm25 = memory.index.lexical_scores(terms, scope, just_read=True, among=ids)
    at = np.clip(np.searchsorted(ids, ranked), 0, len(ids) - 1)
    in_scope = ids[at] == ranked
    if in_scope.any():
        scores[at[in_scope]] = min_max(bm25[in_scope].astype(np.float32))
    return scores, ranked[in_scope].tolist()


def _units(memory: Memory, settings: BotSettings, vector: np.ndarray, scope: Scope) -> list[Choice]:
    size = max(settings.window_size, 1)
    if settings.strategy == "pairs":
        kind: Units = PairUnits()
    else:
        kind = WindowUnits(size, min(settings.window_overlap, size - 1))
    feed = None
    if scope.window_thread_id is not None and scope.window_from_seq is not None:
        feed = (scope.window_thread_id, scope.window_from_seq)
    units, vectors = _unit_cache(memory, kind, scope, feed)
    if not units or len(vectors) != len(units):  # none, or every unit is in the feed
        return []
    lines_in_scope = memory.index.scored_in_scope(vector, scope)
    in_scope = dict(zip(lines_in_scope.ids.tolist(), lines_in_scope.scores.tolist(), strict=True))
    scores = similarities(vectors, vector)
    choices: list[Choice] = []
    for index in np.argsort(-scores, kind="stable"):
        score = float(scores[index])
        if score < settings.threshold or len(choices) == settings.max_matches:
            break
        unit = units[index]
        # A unit holding feed lines matches partly by the current conversation: skip it.
        if any(_in_feed(line.thread_id, line.seq, scope) for line in unit):
            continue
        lines = [line for line in unit if line.id in in_scope]
        if not lines:
            continue
        best = max(lines, key=lambda line: in_scope[line.id])
        seqs = tuple(line.seq for line in lines)
        block = BufferEntry(best.thread_id, min(seqs), max(seqs), score, seqs)
        # A unit comes back whole: its lines are ordered with it, not after it.
        choices.append(Choice(Hit(best.id, best.thread_id, best.seq, score), block, score, 1.0))
    return choices


def _in_feed(thread_id: int, seq: int, scope: Scope) -> bool:
    return (
        scope.window_thread_id is not None
        and scope.window_from_seq is not None
        and thread_id == scope.window_thread_id
        and seq >= scope.window_from_seq
    )


_UNITS: dict[tuple[str, int, int], Units] = {}


def unit_kinds(windows: set[tuple[int, int]]) -> list[Units]:
    """The pairs units, windows of each (size, overlap) in ``windows``, and every kind this
    process has cut units of."""
    kinds: list[Units] = [PairUnits(), *_UNITS.values()]
    for size, overlap in windows:
        size = max(size, 1)
        kinds.append(WindowUnits(size, min(overlap, size - 1)))
    return kinds


def forget_cached_units(memory: Memory) -> None:
    """Drop every kind's lines, units and vectors kept for ``memory``."""
    for kind in _UNITS.values():
        kind.forget(memory)


def _unit_cache(
    memory: Memory, kind: Units, scope: Scope, defer: tuple[int, int] | None
) -> tuple[list[Unit], np.ndarray]:
    """The units of the scope's lines (a person's with the bot, or a shared bot's) and their
    vectors, from one units object per kind, so they are reused across turns; the units
    ``defer`` names (the feed's: thread id, first seq) are not embedded yet."""
    key = (kind.name, getattr(kind, "size", 0), getattr(kind, "overlap", 0))
    kept = _UNITS.setdefault(key, kind)
    return kept.embedded_units(memory, scope.bot_id, scope.person_id, defer)

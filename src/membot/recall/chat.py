"""Recall in a live turn: a bot's strategy picks which earlier lines come back.

The benchmark rankings (:mod:`membot.recall.strategies`) order every line in scope; a turn
needs a keep-or-drop rule too, so that an unrelated question brings nothing back. Here each
strategy chooses its matches (at most ``max_matches``) and the block each match brings in;
the blocks then enter the thread's relevance buffer like the core's.

- ``lines`` (uncany-membot): lines whose cosine with the match string reaches ``threshold``,
  best first, each expanded ±``expand_before``/``expand_after``.
- ``hybrid`` (the default): dense and BM25 ranks fused by reciprocal rank, as in the
  benchmark ranking. Kept: a line whose cosine reaches ``threshold``, or a line among BM25's
  first ``lexical_top`` whose cosine reaches ``threshold - lexical_margin`` — sharing rare
  words with the question is evidence too, so the bar is lower for it. Expanded like
  ``lines``. Options: ``dense_weight``, ``lexical_weight``, ``rrf_k``, ``lexical_top``,
  ``lexical_margin``.
- ``blend``: the benchmark ranking of that name, scored over the lines in scope: a line's
  cosine plus ``neighbour_weight`` times its previous and next lines' cosines, and BM25 over
  the query's words that are not stopwords, each min-max normalised and added
  (``dense_weight``, ``lexical_weight``). Kept like hybrid's lines (its own cosine against
  ``threshold``, or among BM25's first ``lexical_top`` within ``lexical_margin``), in blended
  order. When the line names a time (``membot.recall.timeframe``: "a week ago", "last
  Friday", "in March 2023"), lines said within it are raised by ``time_weight`` and kept
  at the lower bar too. The ranking's sentence-level parts are left out: sentence vectors
  would cost an embedding per sentence written (a chat line costs one), sentence BM25 a term
  index rebuilt at every turn.
- ``bm25``: BM25's order; kept like hybrid's lexical lines.
- ``prune`` (context pruning): the ``lines`` matches, each with its turn partner only (the bot's
  reply to a human line, or the human line a bot line answered).
- ``pairs`` and ``windows``: the unit (exchange, or window of ``window_size`` lines overlapping
  by ``window_overlap``) whose vector reaches ``threshold`` comes back whole.

A match's reported score is its cosine with the match string in every strategy (for units,
the unit's), so traces compare across strategies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from membot.config import BotSettings
from membot.errors import ConfigError
from membot.recall.blend import min_max
from membot.recall.bm25 import STOPWORDS, query_terms
from membot.recall.hybrid import reciprocal_rank_fusion
from membot.recall.lines import Hit, blocks_for_hits, merge_blocks
from membot.recall.ranking import EVERY_LINE
from membot.recall.timeframe import window_of
from membot.search import Scope, similarities
from membot.store.base import BufferEntry

if TYPE_CHECKING:
    from membot.memory import Memory

CHAT_STRATEGIES = ("lines", "hybrid", "blend", "bm25", "prune", "pairs", "windows")

# Options each strategy reads from the bot's ``strategy.NAME`` settings, with defaults.
OPTIONS: dict[str, dict[str, float]] = {
    "lines": {},
    "hybrid": {
        "dense_weight": 1.0,
        "lexical_weight": 2.0,
        "rrf_k": 60.0,
        "lexical_top": 3,
        "lexical_margin": 0.1,
    },
    "blend": {
        "dense_weight": 1.0,
        "lexical_weight": 0.5,
        "neighbour_weight": 0.25,
        "time_weight": 0.25,
        "lexical_top": 3,
        "lexical_margin": 0.1,
    },
    "bm25": {"lexical_top": 3, "lexical_margin": 0.1},
    "prune": {},
    "pairs": {},
    "windows": {},
}
LEXICAL_DEPTH = 50  # BM25 candidates read per turn


@dataclass(frozen=True)
class ChatRecall:
    """The matches a strategy kept (best first) and the blocks they bring in."""

    hits: tuple[Hit, ...]
    blocks: tuple[BufferEntry, ...]


def check_strategy(settings: BotSettings) -> None:
    """ConfigError unless the strategy exists and every option is one it reads."""
    if settings.strategy not in OPTIONS:
        raise ConfigError(
            f"unknown strategy {settings.strategy!r}: use one of {', '.join(CHAT_STRATEGIES)}"
        )
    known = OPTIONS[settings.strategy]
    for name, _ in settings.strategy_options:
        if name not in known:
            listed = ", ".join(f"strategy.{each}" for each in known) or "none"
            raise ConfigError(
                f"strategy {settings.strategy} has no option {name!r} (it reads: {listed})"
            )


def recall_for_turn(
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None = None,
    said: str | None = None,
) -> ChatRecall:
    """The matches and blocks ``settings.strategy`` recalls for one turn asked at ``now``:
    ``blend`` reads time words such as "last week" in ``said`` (the new line itself; default
    ``query``, the match string) from that moment."""
    check_strategy(settings)
    if settings.max_matches == 0:
        return ChatRecall((), ())
    name = settings.strategy
    if name in ("pairs", "windows"):
        return _units(memory, settings, vector, scope)
    if name == "blend":
        hits = _blended(memory, settings, query, vector, scope, now, said or query)
    elif name in ("hybrid", "bm25"):
        hits = _lexical(memory, settings, query, vector, scope, fused=name == "hybrid")
    else:
        found = memory.index.search(vector, scope, settings.max_matches, settings.threshold)
        hits = memory.index.locate(found)
    if name == "prune":
        return ChatRecall(tuple(hits), tuple(merge_blocks(_with_partners(memory, hits))))
    return ChatRecall(tuple(hits), tuple(blocks_for_hits(hits, settings)))


def _lexical(
    memory: Memory,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    fused: bool,
) -> list[Hit]:
    defaults = OPTIONS[settings.strategy]
    option = {name: settings.option(name, value) for name, value in defaults.items()}
    low_bar = settings.threshold - option["lexical_margin"]
    # Only lines at or above the lower bar can be kept: the others need no score.
    cosine = dict(memory.index.search(vector, scope, EVERY_LINE, min_score=low_bar))
    lexical = _bm25_in_scope(memory, query, scope)
    lexical_top = {hit.line_id for hit in lexical[: int(option["lexical_top"])]}
    if fused:
        dense = memory.index.locate(
            (line_id, score) for line_id, score in cosine.items() if score >= settings.threshold
        )
        weights = (option["dense_weight"], option["lexical_weight"])
        order = reciprocal_rank_fusion([dense, lexical], weights, option["rrf_k"])
    else:
        order = lexical
    kept = []
    for hit in order:
        score = cosine.get(hit.line_id, -1.0)
        if score >= settings.threshold or (hit.line_id in lexical_top and score >= low_bar):
            kept.append(Hit(hit.line_id, hit.thread_id, hit.seq, score))
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
) -> list[Hit]:
    option = {name: settings.option(name, value) for name, value in OPTIONS["blend"].items()}
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
            kept.append(Hit(line_id, int(lines.thread_ids[index]), int(lines.seqs[index]), score))
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
    found = memory.store.lexical_search(
        terms, scope.bot_id, scope.person_id, scope.thread_id, scope.roles, limit=EVERY_LINE
    )
    ranked = np.asarray([line_id for line_id, _ in found], dtype=np.int64)
    at = np.clip(np.searchsorted(ids, ranked), 0, len(ids) - 1)
    in_scope = ids[at] == ranked
    if in_scope.any():
        raw = np.asarray([score for _, score in found], dtype=np.float32)[in_scope]
        scores[at[in_scope]] = min_max(raw)
    return scores, ranked[in_scope].tolist()


def _bm25_in_scope(memory: Memory, query: str, scope: Scope) -> list[Hit]:
    terms = query_terms(query)
    if not terms:
        return []
    scored = memory.store.lexical_search(
        terms, scope.bot_id, scope.person_id, scope.thread_id, scope.roles, limit=LEXICAL_DEPTH
    )
    memory.index.refresh()
    hits = memory.index.locate(scored)
    # The vector search's scope also leaves out the feed; keep BM25 to the same lines.
    window, start = scope.window_thread_id, scope.window_from_seq
    if window is None or start is None:
        return hits
    return [hit for hit in hits if not (hit.thread_id == window and hit.seq >= start)]


def _with_partners(memory: Memory, hits: Sequence[Hit]) -> list[BufferEntry]:
    from membot.recall.prune import layout_of

    layout = layout_of(memory)
    blocks = []
    for hit in hits:
        first = last = hit.seq
        line = layout.by_id.get(hit.line_id)
        partner = layout.partner(line) if line is not None else None
        if partner is not None:
            first, last = min(first, partner.seq), max(last, partner.seq)
        blocks.append(BufferEntry(hit.thread_id, first, last, hit.score, (hit.seq,)))
    return blocks


def _units(memory: Memory, settings: BotSettings, vector: np.ndarray, scope: Scope) -> ChatRecall:
    from membot.recall.pairs import PairsRanking
    from membot.recall.windows import WindowsRanking

    size = max(settings.window_size, 1)
    ranking = (
        PairsRanking()
        if settings.strategy == "pairs"
        else WindowsRanking(size, min(settings.window_overlap, size - 1))
    )
    feed = None
    if scope.window_thread_id is not None and scope.window_from_seq is not None:
        feed = (scope.window_thread_id, scope.window_from_seq)
    units, vectors = _unit_cache(memory, ranking, feed)
    if not units or len(vectors) != len(units):  # none, or every unit is in the feed
        return ChatRecall((), ())
    lines_in_scope = memory.index.scored_in_scope(vector, scope)
    in_scope = dict(zip(lines_in_scope.ids.tolist(), lines_in_scope.scores.tolist(), strict=True))
    scores = similarities(vectors, vector)
    hits: list[Hit] = []
    blocks: list[BufferEntry] = []
    for index in np.argsort(-scores, kind="stable"):
        score = float(scores[index])
        if score < settings.threshold or len(hits) == settings.max_matches:
            break
        unit = units[index]
        # A unit holding feed lines matches partly by the current conversation: skip it.
        if any(_in_feed(line.thread_id, line.seq, scope) for line in unit):
            continue
        lines = [line for line in unit if line.id in in_scope]
        if not lines:
            continue
        best = max(lines, key=lambda line: in_scope[line.id])
        hits.append(Hit(best.id, best.thread_id, best.seq, score))
        seqs = tuple(line.seq for line in lines)
        blocks.append(BufferEntry(best.thread_id, min(seqs), max(seqs), score, seqs))
    return ChatRecall(tuple(hits), tuple(merge_blocks(blocks)))


def _in_feed(thread_id: int, seq: int, scope: Scope) -> bool:
    return (
        scope.window_thread_id is not None
        and scope.window_from_seq is not None
        and thread_id == scope.window_thread_id
        and seq >= scope.window_from_seq
    )


_RANKINGS: dict[tuple[str, int, int], object] = {}


def _unit_cache(memory: Memory, ranking, defer: tuple[int, int] | None):
    """One ranking object per kind, so its per-store unit vectors are reused across turns;
    the units ``defer`` names (the feed's: thread id, first seq) are not embedded yet."""
    key = (ranking.name, getattr(ranking, "size", 0), getattr(ranking, "overlap", 0))
    kept = _RANKINGS.setdefault(key, ranking)
    return kept.embedded_units(memory, defer)

"""Recall as the benchmarks read it: what a live turn keeps, as a ranking of lines.

A benchmark asks the strategy through the turn's own code (:func:`chosen_for_turn`) with
``threshold`` -1, so every line in scope is kept, and reads the kept matches' blocks in
context order: a match, then the lines of its block as they come up by score -- a line ``d``
away from its match counts ``neighbour_decay ** d`` of the match's score (for a negative
score, that much further below it), so a block's lines compete with the next matches instead
of taking the places right after theirs. A turn that keeps ``m`` matches holds their whole
blocks; a benchmark that cuts this order at k lines holds the first matches and the lines of
their blocks that score above the next match.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from datetime import datetime
from typing import TYPE_CHECKING

from membot.config import BotSettings
from membot.index.scope import Scope
from membot.recall.chat import EVERY_LINE, check_strategy, chosen_for_turn, embedded_question
from membot.recall.strategies import Choice

if TYPE_CHECKING:
    from membot.recall.source import RecallSource

# Bot settings a benchmark may set with ``--set`` beside the strategy's own options.
BOT_SETTINGS = ("expand_before", "expand_after", "window_size", "window_overlap")


def settings_for_ranking(
    strategy: str, options: Mapping[str, float] | None = None, base: BotSettings | None = None
) -> BotSettings:
    """``base`` (default: a new bot's settings) with ``strategy``, its options (``NAME``: a
    strategy option, or one of :data:`BOT_SETTINGS`) and no threshold; ConfigError naming
    what is wrong."""
    known = {item.name for item in fields(BotSettings)}
    values: dict[str, object] = {"strategy": strategy}
    for name, value in (options or {}).items():
        values[name if name in BOT_SETTINGS and name in known else f"strategy.{name}"] = value
    settings = (base or BotSettings()).with_values(values)
    check_strategy(settings)
    return replace(settings, threshold=-1.0, max_matches=EVERY_LINE)


def ranked_lines(
    source: RecallSource,
    settings: BotSettings,
    query: str,
    scope: Scope,
    now: datetime | None = None,
    depth: int | None = None,
) -> list[int]:
    """Line ids in the order a turn asking ``query`` at ``now`` places them in context
    (``settings`` as from :func:`settings_for_ranking`). With ``depth``, blocks are read until
    that many lines are placed; the other matches follow alone."""
    if depth is not None:  # each match places at least its own line
        settings = replace(settings, max_matches=min(settings.max_matches, depth))
    vector, prepared = embedded_question(source.embed, settings, query)
    choices = chosen_for_turn(source, settings, query, vector, scope, now, query, prepared)
    return context_order(source, choices, scope, depth)


def context_order(
    source: RecallSource, choices: Sequence[Choice], scope: Scope, depth: int | None = None
) -> list[int]:
    """The lines of ``choices`` (best first), each line once, by score: a match at its
    order, the lines of its block at the decayed order (see the module docstring)."""
    heap: list[tuple[float, int, int, Choice | None]] = [
        (-choice.order, number, choice.hit.line_id, choice) for number, choice in enumerate(choices)
    ]
    heapq.heapify(heap)
    pushed = len(heap)
    placed: dict[int, None] = {}
    while heap and (depth is None or len(placed) < depth):
        _, _, line_id, choice = heapq.heappop(heap)
        if choice is None:  # a block's line: placed once, by its best score
            placed.setdefault(line_id)
            continue
        # A match already placed in another's block still brings its own block.
        placed.setdefault(line_id)
        for distance, neighbour in _block_lines(source, choice, scope):
            order = _decayed(choice.order, choice.decay, distance)
            heapq.heappush(heap, (-order, pushed, neighbour, None))
            pushed += 1
    for choice in choices:
        placed.setdefault(choice.hit.line_id)
    # Near-duplicates collapsed into a match take no place of their own: they come last.
    for choice in choices:
        for duplicate in choice.duplicates:
            placed.setdefault(duplicate.line_id)
    return list(placed)


def _decayed(order: float, decay: float, distance: int) -> float:
    return order - abs(order) * (1 - decay**distance)


def _block_lines(source: RecallSource, choice: Choice, scope: Scope) -> list[tuple[int, int]]:
    """(distance from the match, line id) of the block's other lines in scope, nearest
    first: lines of roles recall leaves out, and the feed's, stay out as in a turn."""
    block, hit = choice.block, choice.hit
    (lines,) = source.lines_in_ranges([(block.source_thread_id, block.first_seq, block.last_seq)])
    found = []
    for line in lines:
        in_feed = (
            scope.window_thread_id == block.source_thread_id
            and scope.window_from_seq is not None
            and line.seq >= scope.window_from_seq
        )
        if line.id != hit.line_id and str(line.role) in scope.roles and not in_feed:
            found.append((abs(line.seq - hit.seq), line.seq, line.id))
    return [(distance, line_id) for distance, _, line_id in sorted(found)]

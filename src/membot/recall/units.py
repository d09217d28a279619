"""The ``pairs`` and ``windows`` strategies: the unit (exchange, or window of ``window_size``
lines overlapping by ``window_overlap``) whose vector reaches ``threshold`` comes back whole
(the units: :mod:`membot.recall.pairs`, :mod:`membot.recall.windows`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from membot.index.scope import Scope, similarities
from membot.recall.lines import Hit
from membot.recall.pairs import KINDS_CUT, PairUnits, Units
from membot.recall.strategies import Choice, Question
from membot.recall.windows import WindowUnits
from membot.store.base import BufferEntry

if TYPE_CHECKING:
    from membot.config import BotSettings
    from membot.recall.source import RecallSource


def pair_units(settings: BotSettings) -> Units:
    return PairUnits()


def window_units(settings: BotSettings) -> Units:
    size = max(settings.window_size, 1)
    return WindowUnits(size, min(settings.window_overlap, size - 1))


class UnitStrategy:
    """Units matched by their own vectors, best first; a unit holding a feed line is
    skipped (it matches partly by the current conversation). Options: none (the units'
    shape is the bot's ``window_size`` and ``window_overlap``)."""

    options: Mapping[str, float] = MappingProxyType({})
    whole_numbers = switches = frozenset[str]()

    def __init__(self, name: str, kind_for: Callable[[BotSettings], Units]) -> None:
        self.name, self.kind_for = name, kind_for

    def choose(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[Choice]:
        scope, vector = question.scope, question.vector
        feed = None
        if scope.window_thread_id is not None and scope.window_from_seq is not None:
            feed = (scope.window_thread_id, scope.window_from_seq)
        units, vectors = source.units(self.kind_for(settings), scope, feed)
        if not units or len(vectors) != len(units):  # none, or every unit is in the feed
            return []
        lines_in_scope = source.scored(vector, scope)
        in_scope = dict(
            zip(lines_in_scope.ids.tolist(), lines_in_scope.scores.tolist(), strict=True)
        )
        scores = similarities(vectors, vector)
        choices: list[Choice] = []
        for index in np.argsort(-scores, kind="stable"):
            score = float(scores[index])
            if score < settings.threshold or len(choices) == settings.max_matches:
                break
            unit = units[index]
            if any(_in_feed(line.thread_id, line.seq, scope) for line in unit):
                continue
            lines = [line for line in unit if line.id in in_scope]
            if not lines:
                continue
            best = max(lines, key=lambda line: in_scope[line.id])
            seqs = tuple(line.seq for line in lines)
            block = BufferEntry(best.thread_id, min(seqs), max(seqs), score, seqs)
            # A unit comes back whole: its lines are ordered with it, not after it.
            hit = Hit(best.id, best.thread_id, best.seq, score)
            choices.append(Choice(hit, block, score, 1.0))
        return choices


def _in_feed(thread_id: int, seq: int, scope: Scope) -> bool:
    return (
        scope.window_thread_id is not None
        and scope.window_from_seq is not None
        and thread_id == scope.window_thread_id
        and seq >= scope.window_from_seq
    )


def unit_kinds(windows: Iterable[tuple[int, int]]) -> list[Units]:
    """The pairs units, windows of each (size, overlap) in ``windows``, and every kind this
    process has cut units of."""
    kinds: list[Units] = [PairUnits(), *KINDS_CUT.values()]
    for size, overlap in windows:
        size = max(size, 1)
        kinds.append(WindowUnits(size, min(overlap, size - 1)))
    return kinds

"""membot's own recall strategies, registered through the same call as another package's
(:func:`membot.recall.strategies.register_strategy`), in the order they are listed."""

from __future__ import annotations

from membot.recall.line_strategies import (
    BlendStrategy,
    LexicalStrategy,
    LinesStrategy,
    PruneStrategy,
)
from membot.recall.strategies import register_strategy
from membot.recall.units import UnitStrategy, pair_units, window_units


def register_builtin_strategies() -> None:
    for strategy in (
        LinesStrategy(),
        LexicalStrategy("hybrid", fused=True),
        BlendStrategy(),
        LexicalStrategy("bm25", fused=False),
        PruneStrategy(),
        UnitStrategy("pairs", pair_units),
        UnitStrategy("windows", window_units),
    ):
        register_strategy(strategy)

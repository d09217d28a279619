"""The ranked recall strategies by name, for benchmarks and front ends."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from membot.errors import ConfigError
from membot.recall.blend import BlendRanking
from membot.recall.bm25 import BM25Ranking
from membot.recall.hybrid import HybridRanking
from membot.recall.pairs import PairsRanking
from membot.recall.prune import PruneRanking
from membot.recall.ranking import LinesRanking, Ranking
from membot.recall.windows import WindowsRanking

RANKINGS: dict[str, Callable[[], Ranking]] = {
    "lines": LinesRanking,
    "bm25": BM25Ranking,
    "hybrid": HybridRanking,
    "prune": PruneRanking,
    "pairs": PairsRanking,
    "windows": WindowsRanking,
    "blend": BlendRanking,
}


def ranking_named(name: str, options: Mapping[str, float] | None = None) -> Ranking:
    """The strategy called ``name``, its defaults overridden by ``options`` (its constructor's
    numbers, e.g. ``{"lexical_weight": 0.7}``); ConfigError naming what it accepts."""
    if name not in RANKINGS:
        raise ConfigError(f"unknown strategy {name!r}: use one of {', '.join(RANKINGS)}")
    make = RANKINGS[name]
    parameters = inspect.signature(make).parameters
    unknown = sorted(set(options or {}) - set(parameters))
    if unknown:
        reads = ", ".join(parameters) or "none"
        raise ConfigError(f"strategy {name} has no option {unknown[0]!r} (it reads: {reads})")
    values = {}
    for key, value in (options or {}).items():
        parameter = parameters[key]
        default = parameter.default
        if isinstance(default, bool):
            if value not in (0, 1):
                raise ConfigError(f"strategy {name}: {key} is 1 (on) or 0 (off), not {value}")
            values[key] = bool(value)
            continue
        counts = "int" in str(parameter.annotation) or isinstance(default, int)
        if counts and not float(value).is_integer():
            raise ConfigError(f"strategy {name}: {key} is a whole number, not {value}")
        values[key] = int(value) if counts else value
    try:
        return make(**values)
    except ValueError as error:
        raise ConfigError(f"strategy {name}: {error}") from error

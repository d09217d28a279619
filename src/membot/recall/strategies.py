"""The ranked recall strategies by name, for benchmarks and front ends."""

from __future__ import annotations

from collections.abc import Callable

from membot.errors import ConfigError
from membot.recall.bm25 import BM25Ranking
from membot.recall.hybrid import HybridRanking
from membot.recall.ranking import LinesRanking, Ranking

RANKINGS: dict[str, Callable[[], Ranking]] = {
    "lines": LinesRanking,
    "bm25": BM25Ranking,
    "hybrid": HybridRanking,
}


def ranking_named(name: str) -> Ranking:
    """The strategy called ``name`` with its default settings."""
    if name not in RANKINGS:
        raise ConfigError(f"unknown strategy {name!r}: use one of {', '.join(RANKINGS)}")
    return RANKINGS[name]()

"""The ranked recall strategies by name, for benchmarks and front ends."""

from __future__ import annotations

from collections.abc import Callable

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


def ranking_named(name: str) -> Ranking:
    """The strategy called ``name`` with its default settings."""
    if name not in RANKINGS:
        raise ConfigError(f"unknown strategy {name!r}: use one of {', '.join(RANKINGS)}")
    return RANKINGS[name]()

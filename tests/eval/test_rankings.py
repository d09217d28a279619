"""The ranked strategies: BM25's query sanitiser, lexical search, fusion and expansion order."""

from __future__ import annotations

import pytest

from membot import Memory
from membot.errors import ConfigError
from membot.recall.bm25 import BM25Ranking, query_terms
from membot.recall.hybrid import HybridRanking, expand_by_score, reciprocal_rank_fusion
from membot.recall.lines import Hit
from membot.recall.ranking import LinesRanking
from membot.recall.strategies import ranking_named
from membot.search import Scope


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where does Bob work?", ["where", "does", "bob", "work"]),
        ("What's \"Bob's\" job?", ["what", "s", "bob", "job"]),
        ("NEAR(a b) OR c* -d: e^", ["near", "a", "b", "or", "c", "d", "e"]),
        ("bob BOB Bob", ["bob"]),
        ("?!…", []),
    ],
)
def test_the_query_becomes_its_words_once_each(text: str, expected: list[str]) -> None:
    assert query_terms(text) == expected


def stored(memory: Memory, *texts: str, thread: str = "t1", user: str = "ann") -> list[int]:
    return [memory.add(text, user=user, thread=thread).id for text in texts]


def scope(memory: Memory, **values: object) -> Scope:
    return Scope(bot_id=memory.store.bot_id("membot") or 0, person_id=None, **values)


def test_punctuation_in_a_query_cannot_break_the_lexical_search(memory: Memory) -> None:
    stored(memory, "I moved to Lisbon in May", "the cat sleeps")
    for query in ['"Lisbon', "Lisbon AND (", "NEAR(lisbon", "lisbon*", "-lisbon:", "^May"]:
        ranked = BM25Ranking(0, 0).rank(memory, query, scope(memory))
        assert ranked[:1] == [1], query


def test_lexical_search_ranks_by_bm25_within_scope(memory: Memory) -> None:
    stored(memory, "coffee", "coffee coffee with milk and coffee beans", "tea only")
    stored(memory, "coffee please", user="bob")
    ann = memory.store.person_id("ann")
    found = memory.store.lexical_search(["coffee"], memory.store.bot_id("membot"), ann)
    assert sorted(line_id for line_id, _ in found) == [1, 2]  # not tea, not Bob's line
    assert found[0][1] >= found[1][1]
    assert all(score > 0 for _, score in found)
    assert memory.store.lexical_search(["coffee"], 99) == []
    assert memory.store.lexical_search(['co"ffee', "NEAR(x"], 1) == []  # terms, never syntax


def test_lines_ranking_places_each_match_then_its_neighbours(memory: Memory) -> None:
    ids = stored(memory, "one", "two", "the red kite flew", "four", "five")
    other = stored(memory, "red kite again", thread="t2")
    ranked = LinesRanking(1, 1).rank(memory, "red kite flew", scope(memory))
    assert ranked[:4] == [ids[2], ids[1], ids[3], other[0]]
    assert sorted(ranked) == sorted(ids + other)  # every line once


def test_expansion_stops_at_depth_and_the_rest_follow_in_match_order(memory: Memory) -> None:
    ids = stored(memory, "alpha", "beta", "gamma alpha", "delta", "epsilon")
    ranked = LinesRanking(2, 2).rank(memory, "alpha", scope(memory), depth=1)
    assert ranked[0] in (ids[0], ids[2])
    assert len(ranked) == len(set(ranked)) == 5


def test_fusion_adds_weighted_reciprocal_ranks_and_keeps_ties_in_first_seen_order() -> None:
    dense = [Hit(1, 1, 1, 0.9), Hit(2, 1, 2, 0.8)]
    lexical = [Hit(2, 1, 2, 5.0), Hit(1, 1, 1, 1.0), Hit(3, 1, 3, 0.5)]
    fused = reciprocal_rank_fusion([dense, lexical], [1.0, 1.0], rrf_k=1)
    assert [hit.line_id for hit in fused] == [1, 2, 3]  # 1 and 2 tie at 1/2 + 1/3
    assert fused[0].score == pytest.approx(1 / 2 + 1 / 3)
    assert fused[2].score == pytest.approx(1 / 4)
    weighted = reciprocal_rank_fusion([dense, lexical], [1.0, 2.0], rrf_k=1)
    assert [hit.line_id for hit in weighted] == [2, 1, 3]


def test_hybrid_finds_what_only_one_side_finds(memory: Memory) -> None:
    ids = stored(memory, "zebra crossing", "the weather is nice", "zebra")
    ranked = HybridRanking(0, 0).rank(memory, "zebra", scope(memory))
    assert sorted(ranked) == sorted(ids)
    assert set(ranked[:2]) == {ids[0], ids[2]}


def test_neighbours_take_their_place_by_decayed_score() -> None:
    hits = [Hit(10, 1, 5, 1.0), Hit(20, 2, 1, 0.93), Hit(11, 1, 6, 0.1), Hit(12, 1, 7, 0.05)]
    # line 11 (next to the best hit) scores 0.95, line 12 two lines away 0.9025
    assert expand_by_score(hits, 2, 2, 0.95) == [10, 11, 20, 12]
    assert expand_by_score(hits, 0, 0, 0.95) == [10, 20, 11, 12]
    # a neighbour the rule refuses competes on its own score only
    refuse_11 = lambda hit, neighbour: neighbour != 11  # noqa: E731
    assert expand_by_score(hits, 2, 2, 0.95, refuse_11) == [10, 20, 12, 11]


def test_strategies_are_found_by_name() -> None:
    assert [ranking_named(name).name for name in ("lines", "bm25", "hybrid")] == [
        "lines",
        "bm25",
        "hybrid",
    ]
    with pytest.raises(ConfigError, match="unknown strategy 'dense'"):
        ranking_named("dense")

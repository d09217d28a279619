"""The one recall path as the benchmarks read it: the turn's matches, every line, in context
order; BM25's query words, fusion, expansion, time words."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from membot import Memory
from membot.index.vectors import Scope
from membot.memory.facade import embedding_text
from membot.model import Role
from membot.recall.bm25 import STOPWORDS, TermIndex, query_terms
from membot.recall.chat import chosen_for_turn, reciprocal_rank_fusion
from membot.recall.lines import Hit
from membot.recall.ranked import context_order, ranked_lines, settings_for_ranking
from membot.store.base import lines_between


def stored(memory: Memory, *texts: str, thread: str = "t1", user: str = "ann") -> list[int]:
    return [memory.add(text, user=user, thread=thread).id for text in texts]


def scope(memory: Memory, **values: object) -> Scope:
    return Scope.of(memory.store.bot_id("membot") or 0, None, **values)


def ranked(memory: Memory, strategy: str, query: str, now: datetime | None = None,
           **options: float) -> list[int]:  # fmt: skip
    settings = settings_for_ranking(strategy, options)
    return ranked_lines(memory.recall_source, settings, query, scope(memory), now)


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


def test_stopwords_are_left_out_unless_nothing_else_is_left() -> None:
    assert query_terms("what did my kite do", STOPWORDS) == ["kite"]
    assert query_terms("what did I do", STOPWORDS) == ["what", "did", "i", "do"]


def test_punctuation_in_a_query_cannot_break_the_lexical_search(memory: Memory) -> None:
    stored(memory, "I moved to Lisbon in May", "the cat sleeps")
    for query in ['"Lisbon', "Lisbon AND (", "NEAR(lisbon", "lisbon*", "-lisbon:", "^May"]:
        assert ranked(memory, "bm25", query, expand_before=0, expand_after=0)[:1] == [1], query


def test_lexical_search_ranks_by_bm25_within_scope(memory: Memory) -> None:
    stored(memory, "coffee", "coffee coffee with milk and coffee beans", "tea only")
    stored(memory, "coffee please", user="bob")
    ann = memory.store.person_id("ann")
    found = memory.store.lexical_search(["coffee"], memory.store.bot_id("membot"), (ann,))
    assert sorted(line_id for line_id, _ in found) == [1, 2]  # not tea, not Bob's line
    assert found[0][1] >= found[1][1]
    assert all(score > 0 for _, score in found)
    assert memory.store.lexical_search(["coffee"], 99) == []
    assert memory.store.lexical_search(['co"ffee', "NEAR(x"], 1) == []  # terms, never syntax


def test_fusion_adds_weighted_reciprocal_ranks_and_keeps_ties_in_first_seen_order() -> None:
    dense = [Hit(1, 1, 1, 0.9), Hit(2, 1, 2, 0.8)]
    lexical = [Hit(2, 1, 2, 5.0), Hit(1, 1, 1, 1.0), Hit(3, 1, 3, 0.5)]
    fused = reciprocal_rank_fusion([dense, lexical], [1.0, 1.0], rrf_k=1)
    assert [hit.line_id for hit in fused] == [1, 2, 3]  # 1 and 2 tie at 1/2 + 1/3
    assert fused[0].score == pytest.approx(1 / 2 + 1 / 3)
    assert fused[2].score == pytest.approx(1 / 4)
    weighted = reciprocal_rank_fusion([dense, lexical], [1.0, 2.0], rrf_k=1)
    assert [hit.line_id for hit in weighted] == [2, 1, 3]


def test_bm25_scores_favour_rare_words_and_short_documents() -> None:
    texts = ["red kite", "red sea", "red kite over the long grey sea", ""]
    documents = [Counter(text.split()) for text in texts]
    scores = TermIndex(documents).bm25(["kite", "red", "kite", "absent"])
    assert scores[0] > scores[2] > scores[1] > scores[3] == 0.0
    assert TermIndex(documents).bm25([]).tolist() == [0.0] * 4
    assert TermIndex([]).bm25(["kite"]).size == 0


@pytest.mark.parametrize("strategy", ["lines", "hybrid", "blend", "bm25", "prune", "pairs",
                                      "windows"])  # fmt: skip
def test_every_strategy_ranks_every_line_once(memory: Memory, strategy: str) -> None:
    ids = [memory.add(text, user="ann", thread="t1", role=role).id for text, role in [
        ("good morning", Role.BOT), ("I adopted a puppy called Rex", Role.HUMAN),
        ("the weather is fine", Role.BOT)]]  # fmt: skip
    other = stored(memory, "nothing much today about a puppy", thread="t2")
    order = ranked(memory, strategy, "what did I call the puppy")
    assert sorted(order) == sorted(ids + other)


def test_a_match_brings_its_block_by_decayed_score(memory: Memory) -> None:
    ids = [memory.add(text, user="ann", thread="t1", role=role).id for text, role in [
        ("one", Role.BOT), ("two", Role.HUMAN), ("the red kite flew", Role.BOT),
        ("four", Role.HUMAN), ("five", Role.BOT)]]  # fmt: skip
    other = stored(memory, "red kite again", thread="t2")
    order = ranked(memory, "lines", "red kite flew", expand_before=2, expand_after=2)
    # the match, then its neighbours one away (0.85 of its score), which beat the other thread
    assert order[:3] == [ids[2], ids[1], ids[3]]
    assert order.index(other[0]) < order.index(ids[0])  # two away: 0.72 of the match's score
    spread = ranked(memory, "lines", "red kite flew", neighbour_decay=0.1)
    assert spread[:2] == [ids[2], other[0]]


def test_only_the_other_partys_lines_widen_a_block(memory: Memory) -> None:
    ids = [
        memory.add("I adopted a puppy called Rex", user="ann", thread="t1", speaker="Ann").id,
        memory.add("the weather is fine", user="ann", thread="t1", speaker="Ann").id,
        memory.add("good morning", user="ann", thread="t1", speaker="Bob").id,
        memory.add("see you", user="ann", thread="t1", speaker="Bob").id,
    ]
    settings = settings_for_ranking("blend", {"expand_before": 2, "expand_after": 2})
    query = "what did Ann call the puppy"
    vector = memory.embed([query])[0]
    first = chosen_for_turn(memory.recall_source, settings, query, vector, scope(memory))[0]
    assert first.hit.line_id == ids[0]
    # Bob's line two away is the exchange: the block reaches it, and Ann's line between comes
    assert (first.block.first_seq, first.block.last_seq) == (1, 3)
    alone = settings_for_ranking("blend", {"expand_before": 2, "expand_after": 2,
                                           "partners_only": 0})  # fmt: skip
    first = chosen_for_turn(memory.recall_source, alone, query, vector, scope(memory))[0]
    assert (first.block.first_seq, first.block.last_seq) == (1, 3)  # ±2, every line
    only_ann = stored(memory, "Ann: I adopted a puppy", "Ann: it is called Rex", thread="t3")
    settings, query = settings_for_ranking("lines"), "Ann: I adopted a puppy"
    choices = chosen_for_turn(
        memory.recall_source, settings, query, memory.embed([query])[0], scope(memory)
    )
    (hit,) = [choice for choice in choices if choice.hit.line_id == only_ann[0]]
    assert (hit.block.first_seq, hit.block.last_seq) == (1, 1)  # one party: the match alone


def test_ranking_stops_expanding_at_depth_and_the_rest_follow_in_match_order(
    memory: Memory,
) -> None:
    ids = stored(memory, "alpha", "beta", "gamma alpha", "delta", "epsilon")
    settings = settings_for_ranking("lines")
    order = ranked_lines(memory.recall_source, settings, "alpha", scope(memory), depth=1)
    assert order[0] in (ids[0], ids[2])
    assert len(order) == 1  # a benchmark cut at k needs no more than k matches
    vector = memory.embed(["alpha"])[0]
    choices = chosen_for_turn(memory.recall_source, settings, "alpha", vector, scope(memory))
    full = context_order(memory.recall_source, choices, scope(memory), depth=1)
    assert len(full) == len(set(full)) == 5


def test_hybrid_finds_what_only_one_side_finds(memory: Memory) -> None:
    ids = stored(memory, "zebra crossing", "the weather is nice", "zebra")
    order = ranked(memory, "hybrid", "zebra", expand_before=0, expand_after=0)
    assert sorted(order) == sorted(ids)
    assert set(order[:2]) == {ids[0], ids[2]}


def test_a_question_about_last_week_prefers_the_line_said_last_week(memory: Memory) -> None:
    old = memory.add("I finished a novel", user="ann", thread="t1",
                     created_at=datetime(2023, 1, 2, tzinfo=UTC)).id  # fmt: skip
    new = memory.add("I finished the novel", user="ann", thread="t2",
                     created_at=datetime(2023, 3, 10, tzinfo=UTC)).id  # fmt: skip
    query, now = "Which novel did I finish last week?", datetime(2023, 3, 14, tzinfo=UTC)
    assert ranked(memory, "blend", query, now)[0] == new
    assert ranked(memory, "blend", query)[0] == old  # no date: ties in order


def test_a_question_naming_a_dated_day_needs_no_now(memory: Memory) -> None:
    ids = []
    for day, which in ((1, "a"), (7, "the"), (20, "one")):  # not duplicates of each other
        when = datetime(2023, 7, day, tzinfo=UTC)
        text = f"We baked {which} cake"
        ids.append(memory.add(text, user="ann", thread=f"t{day}", created_at=when).id)
    query = "What did we bake on 7 July, 2023?"
    assert ranked(memory, "blend", query)[0] == ids[1]
    assert ranked(memory, "blend", query, time_weight=0.0)[0] == ids[0]


@pytest.mark.parametrize(
    "query", ["What did we bake on July 7th?", "What did we bake on Independence Day?"]
)
def test_a_day_named_without_its_year_is_its_latest_before_now(memory: Memory, query) -> None:
    ids = {}
    for year, day, which in ((2022, 7, "a"), (2023, 7, "the"), (2023, 4, "one"), (2023, 20, "my")):
        when = datetime(year, 7, day, tzinfo=UTC)
        text = f"We baked {which} cake"
        ids[year, day] = memory.add(text, user="ann", thread=f"t{year}{day}", created_at=when).id
    now = datetime(2023, 8, 1, tzinfo=UTC)
    day = (2023, 4) if "Independence" in query else (2023, 7)
    assert ranked(memory, "blend", query, now)[0] == ids[day]


def test_a_line_with_a_speaker_is_embedded_with_its_name(memory: Memory, embedder) -> None:
    assert embedding_text("hi", "Ann") == "Ann: hi"
    assert embedding_text("hi", None) == "hi"
    line = memory.add("I adopted a puppy", user="ann", thread="t1", speaker="Ann")
    assert ["Ann: I adopted a puppy"] in embedder.calls
    assert memory.history(user="ann")[0].text == line.text == "I adopted a puppy"


@pytest.mark.parametrize("strategy", ["lines", "hybrid", "blend", "bm25", "prune", "pairs",
                                      "windows"])  # fmt: skip
def test_a_turn_keeps_the_first_matches_of_the_benchmarks_ranking(
    memory: Memory, strategy: str
) -> None:
    """The eval's ranking and a turn (``preview_recall``) agree on what they keep, in order."""
    for n, (text, role) in enumerate([
        ("my cat Miso sleeps all day", Role.HUMAN), ("lazy Miso", Role.BOT),
        ("I moved to Lisbon in May", Role.HUMAN), ("Lisbon has great wine", Role.BOT),
        ("Miso chased a bird", Role.HUMAN), ("cats do that", Role.BOT),
        ("work was long today", Role.HUMAN), ("rest well", Role.BOT),
    ]):  # fmt: skip
        memory.add(text, user="ann", thread=f"t{n // 4}", role=role)
    memory.configure_bot(strategy=strategy, threshold=-1.0, max_matches=3, window_size=4)
    query = "tell me about my cat Miso"
    preview = memory.preview_recall(query, user="ann")
    kept = [match.line.id for match in preview.matches]
    assert len(kept) == (2 if strategy == "windows" else 3)  # windows: one per thread
    settings = settings_for_ranking(strategy, base=memory.bot_settings())
    person = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("ann"))
    choices = chosen_for_turn(
        memory.recall_source, settings, query, memory.embed([query])[0], person
    )
    assert [choice.hit.line_id for choice in choices][: len(kept)] == kept
    order = ranked_lines(memory.recall_source, settings, query, person)
    assert order[0] == kept[0]
    placed = {line.id for block in preview.blocks for line in block.lines}
    # what the turn holds is what its three matches' blocks hold, each found in the ranking
    held = set()
    for choice in choices[: len(kept)]:
        block = choice.block
        held |= {line.id for line in lines_between(memory.store,
            block.source_thread_id, block.first_seq, block.last_seq)}  # fmt: skip
    assert placed == held and placed <= set(order)

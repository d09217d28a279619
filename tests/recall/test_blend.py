"""The blend strategy: sentences, neighbour scores, stopword-free BM25, normalised fusion."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from membot import Memory
from membot.memory import LineInput
from membot.model import Role
from membot.recall.blend import (
    BlendRanking,
    TermIndex,
    blend,
    chunk_units,
    in_window,
    normalised,
    sentence_units,
    sentences_of,
    with_neighbours,
    with_sentences,
)
from membot.recall.bm25 import STOPWORDS, bm25_hits, query_terms
from membot.recall.hybrid import reciprocal_rank_fusion
from membot.recall.lines import Hit
from membot.recall.prune import Layout, StoredLine
from membot.recall.strategies import ranking_named
from membot.search import Scope


def stored(memory: Memory, *texts: str, thread: str = "t1", user: str = "ann") -> list[int]:
    return [memory.add(text, user=user, thread=thread).id for text in texts]


def scope(memory: Memory) -> Scope:
    return Scope(bot_id=memory.store.bot_id("membot") or 0, person_id=None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi. I moved to Lisbon! Did you?", ["Hi.", "I moved to Lisbon!", "Did you?"]),
        ("one line\n\nanother line", ["one line", "another line"]),
        ("no break at all", ["no break at all"]),
        ("version 1.5 is out", ["version 1.5 is out"]),
        ("  ", ["  "]),
    ],
)
def test_a_text_is_cut_into_sentences_at_end_marks_and_line_breaks(
    text: str, expected: list[str]
) -> None:
    assert sentences_of(text) == expected


def test_only_lines_of_several_sentences_get_sentence_units_with_their_speaker() -> None:
    layout = Layout(
        [
            StoredLine(1, 1, 1, Role.HUMAN, "Just one.", "Ann"),
            StoredLine(2, 1, 2, Role.HUMAN, "First. Second!", "Ann"),
            StoredLine(3, 1, 3, Role.BOT, "Alpha? Beta", None),
        ]
    )
    owners, texts = sentence_units(layout)
    assert owners == [2, 2, 3, 3]
    assert texts == ["Ann: First.", "Ann: Second!", "Alpha?", "Beta"]


def test_only_long_lines_get_chunks_of_whole_sentences_up_to_the_word_limit() -> None:
    layout = Layout(
        [
            StoredLine(1, 1, 1, Role.HUMAN, "Short one. Two.", "Ann"),
            StoredLine(2, 1, 2, Role.HUMAN, "a b c. d e. f g h i j. k.", None),
        ]
    )
    owners, texts = chunk_units(layout, 6)
    assert owners == [2, 2]
    assert texts == ["a b c. d e.", "f g h i j. k."]


def test_hits_dated_in_the_window_are_raised_and_resorted() -> None:
    hits = [Hit(1, 1, 1, 0.9), Hit(2, 2, 1, 0.8), Hit(3, 3, 1, 0.1)]
    dates = {1: datetime(2023, 1, 5, tzinfo=UTC).timestamp(),
             2: datetime(2023, 2, 5, tzinfo=UTC).timestamp()}  # fmt: skip
    window = (datetime(2023, 2, 1, tzinfo=UTC), datetime(2023, 3, 1, tzinfo=UTC))
    raised = in_window(hits, dates, window, 0.25)
    assert [hit.line_id for hit in raised] == [2, 1, 3]
    assert [hit.score for hit in raised] == pytest.approx([1.05, 0.9, 0.1])


def test_a_question_about_last_week_prefers_the_line_said_last_week(memory: Memory) -> None:
    old = memory.add("I finished a novel", user="ann", thread="t1",
                     created_at=datetime(2023, 1, 2, tzinfo=UTC)).id  # fmt: skip
    new = memory.add("I finished a novel", user="ann", thread="t2",
                     created_at=datetime(2023, 3, 10, tzinfo=UTC)).id  # fmt: skip
    query, now = "Which novel did I finish last week?", datetime(2023, 3, 14, tzinfo=UTC)
    assert BlendRanking().rank(memory, query, scope(memory), now=now)[0] == new
    assert BlendRanking().rank(memory, query, scope(memory))[0] == old  # no date: ties in order


def test_a_better_sentence_moves_its_line_part_of_the_way_up() -> None:
    hits = [Hit(1, 1, 1, 0.2), Hit(2, 1, 2, 0.5), Hit(3, 1, 3, 0.4)]
    moved = with_sentences(hits, {1: 0.6, 2: 0.3}, 0.5)
    assert [hit.score for hit in moved] == pytest.approx([0.4, 0.5, 0.4])  # a worse one: no


def test_neighbour_scores_are_added_and_a_missing_neighbour_counts_the_line_itself() -> None:
    hits = [Hit(1, 1, 1, 0.2), Hit(2, 1, 2, 0.8), Hit(3, 1, 3, 0.4), Hit(9, 2, 1, 0.7)]
    smoothed = {hit.line_id: hit.score for hit in with_neighbours(hits, 0.5)}
    assert smoothed == pytest.approx({1: 0.2 + 0.5 * (0.2 + 0.8), 2: 0.8 + 0.5 * (0.2 + 0.4),
                                      3: 0.4 + 0.5 * (0.8 + 0.4), 9: 0.7 + 0.5 * 1.4})  # fmt: skip
    assert [hit.line_id for hit in with_neighbours(hits, 0.5)] == [9, 2, 3, 1]
    assert [hit.line_id for hit in with_neighbours(hits, 0.0)] == [2, 9, 3, 1]


def test_scores_are_scaled_to_the_unit_interval() -> None:
    assert normalised([Hit(1, 1, 1, -2.0), Hit(2, 1, 2, 0.0), Hit(3, 1, 3, 2.0)]) == {
        1: 0.0,
        2: 0.5,
        3: 1.0,
    }
    assert normalised([Hit(1, 1, 1, 0.3), Hit(2, 1, 2, 0.3)]) == {1: 1.0, 2: 1.0}
    assert normalised([]) == {}


def test_blending_weighs_how_far_ahead_a_match_is_not_just_its_rank() -> None:
    dense = [Hit(1, 1, 1, 0.9), Hit(2, 1, 2, 0.5), Hit(3, 1, 3, 0.1)]
    lexical = [Hit(3, 1, 3, 12.0), Hit(2, 1, 2, 11.0), Hit(7, 9, 9, 1.0)]
    blended = blend(dense, lexical, (1.0, 0.5))
    assert [hit.line_id for hit in blended] == [1, 2, 3]  # 7 is not a dense hit: out of scope
    assert [hit.score for hit in blended] == pytest.approx([1.0, 0.5 + 0.5 * 10 / 11, 0.5])
    # reciprocal ranks put 2 first: second on both sides beats a clear first on one
    fused = reciprocal_rank_fusion([dense, lexical], (1.0, 0.5))
    assert [hit.line_id for hit in fused] == [2, 3, 1, 7]


def test_stopwords_are_left_out_of_the_lexical_query_unless_nothing_else_is_left() -> None:
    assert query_terms("What did Bob do in May?", STOPWORDS) == ["bob", "may"]
    assert query_terms("What did you do?", STOPWORDS) == ["what", "did", "you", "do"]
    assert query_terms("What did Bob do?") == ["what", "did", "bob", "do"]  # the default
    assert {"what", "did", "i", "don", "t"} <= STOPWORDS


def test_bm25_without_stopwords_skips_lines_that_share_only_a_stopword(memory: Memory) -> None:
    ids = stored(memory, "what a day", "my kite flew away", "did you see it")
    assert {hit.line_id for hit in bm25_hits(memory, "what did my kite do", scope(memory))} == {
        *ids
    }
    found = bm25_hits(memory, "what did my kite do", scope(memory), stopwords=STOPWORDS)
    assert [hit.line_id for hit in found] == [ids[1]]


def test_blend_ranks_every_line_once_with_the_match_first(memory: Memory) -> None:
    ids = [
        memory.add("good morning", user="ann", thread="t1", role=Role.BOT).id,
        *stored(memory, "I adopted a puppy called Rex"),
        memory.add("the weather is fine", user="ann", thread="t1", role=Role.BOT).id,
    ]
    other = stored(memory, "nothing much today", thread="t2")
    ranked = BlendRanking().rank(memory, "what did I call the puppy", scope(memory))
    assert ranked[0] == ids[1]
    assert sorted(ranked) == sorted(ids + other)
    assert ranked.index(other[0]) > ranked.index(ids[0])  # neighbours of the match come sooner


def test_only_the_other_partys_neighbours_are_placed_with_a_match(memory: Memory) -> None:
    ids = [
        memory.add("I adopted a puppy called Rex", user="ann", thread="t1", speaker="Ann").id,
        memory.add("the weather is fine", user="ann", thread="t1", speaker="Ann").id,
        memory.add("good morning", user="ann", thread="t1", speaker="Bob").id,
    ]
    other = stored(memory, "nothing much happened at work today", thread="t2")
    query = "what did Ann call the puppy"
    ranked = BlendRanking().rank(memory, query, scope(memory))
    assert ranked[0] == ids[0]
    # Ann's own next line is not the exchange around the match: it competes on its own score,
    # while Bob's line two away is placed with the match (0.85 ** 2 of its score)
    assert ranked.index(ids[2]) < ranked.index(other[0])
    assert ranked[1] != ids[1]
    with_own = BlendRanking(partners_only=False).rank(memory, query, scope(memory))
    assert with_own[1] == ids[1]


def test_a_fact_in_one_sentence_of_a_long_line_is_found_by_its_sentence(
    memory: Memory, embedder
) -> None:
    filler = "We talked about the garden. The roses need water. The lawn needs mowing."
    ids = stored(memory, f"{filler} By the way, my passport expired.", "my passport photos")
    plain = BlendRanking(sentence_weight=0.0, neighbour_weight=0.0, lexical_weight=0.0)
    with_parts = BlendRanking(sentence_weight=1.0, neighbour_weight=0.0, lexical_weight=0.0)
    query = "my passport expired"
    assert plain.rank(memory, query, scope(memory))[0] == ids[1]  # the long line is diluted
    assert with_parts.rank(memory, query, scope(memory))[0] == ids[0]
    assert "By the way, my passport expired." in embedder.embedded


def test_sentence_vectors_are_built_once_per_state_of_the_store(memory: Memory, embedder) -> None:
    stored(memory, "Red kite. Blue sea.")
    ranking = BlendRanking()
    ranking.rank(memory, "kite", scope(memory))
    ranking.rank(memory, "sea", scope(memory))
    assert embedder.calls.count(["Red kite.", "Blue sea."]) == 1
    stored(memory, "Green tree. Tall tree.")
    ranking.rank(memory, "tree", scope(memory))
    assert ["Red kite.", "Blue sea.", "Green tree.", "Tall tree."] in embedder.calls


def test_blend_is_found_by_name_and_embeds_the_speaker_with_the_line() -> None:
    ranking = ranking_named("blend")
    assert ranking.name == "blend"
    assert ranking.index_text(LineInput("hi", "ann", "t", speaker="Ann")) == "Ann: hi"
    assert ranking.index_text(LineInput("hi", "ann", "t")) == "hi"


def test_a_question_naming_a_dated_day_needs_no_now(memory: Memory) -> None:
    ids = []
    for day in (1, 7, 20):
        when = datetime(2023, 7, day, tzinfo=UTC)
        ids.append(memory.add("We baked a cake", user="ann", thread=f"t{day}", created_at=when).id)
    query = "What did we bake on 7 July, 2023?"
    assert BlendRanking().rank(memory, query, scope(memory))[0] == ids[1]
    assert BlendRanking(time_weight=0.0).rank(memory, query, scope(memory))[0] == ids[0]


def test_bm25_scores_favour_rare_words_and_short_documents() -> None:
    texts = ["red kite", "red sea", "red kite over the long grey sea", ""]
    documents = [Counter(text.split()) for text in texts]
    scores = TermIndex(documents).bm25(["kite", "red", "kite", "absent"])
    assert scores[0] > scores[2] > scores[1] > scores[3] == 0.0
    assert TermIndex(documents).bm25([]).tolist() == [0.0] * 4
    assert TermIndex([]).bm25(["kite"]).size == 0


def test_a_word_said_in_passing_in_a_long_line_counts_by_its_sentence(memory: Memory) -> None:
    filler = " ".join(f"Sentence {n} is about gardening and roses." for n in range(12))
    ids = stored(memory, f"{filler} I keep my stamps in an album.", "Stamps and more stamps. Nice.")
    lexical_only = {"dense_weight": 0.0, "neighbour_weight": 0.0}
    plain = BlendRanking(sentence_weight=0.0, **lexical_only)
    with_parts = BlendRanking(sentence_weight=1.0, **lexical_only)
    query = "where do I keep my stamps"
    assert [hit.line_id for hit in plain.lexical(memory, query, scope(memory))] == [ids[1], ids[0]]
    moved = {hit.line_id: hit.score for hit in with_parts.lexical(memory, query, scope(memory))}
    assert moved[ids[0]] == pytest.approx(1.0)  # its sentence is the best BM25 match

"""Matches from more places (``blend``'s ``thread_penalty``, ``near_penalty``, ``many_only``,
``many_decay``): the greedy spread, the questions that ask for many things, and the options
acting in a turn and in the benchmarks' ranking alike, off by default."""

from __future__ import annotations

import pytest

from membot import ConfigError, Memory
from membot.index.vectors import Scope
from membot.recall.chat import check_strategy, chosen_for_turn, options_of
from membot.recall.diversity import Spread, asks_for_many, block_decay, spread_out
from membot.recall.lines import Hit
from membot.recall.ranked import ranked_lines, settings_for_ranking

FIRST, NEXT_TO_IT, SAME_THREAD, ELSEWHERE = (
    Hit(1, thread_id=1, seq=10, score=0.5),
    Hit(2, thread_id=1, seq=11, score=0.5),
    Hit(3, thread_id=1, seq=40, score=0.5),
    Hit(4, thread_id=2, seq=10, score=0.5),
)
ORDERED = [(FIRST, 1.0), (NEXT_TO_IT, 0.9), (SAME_THREAD, 0.85), (ELSEWHERE, 0.8)]


def ids(ordered: list[tuple[Hit, float]]) -> list[int]:
    return [hit.line_id for hit, _ in ordered]


def test_off_the_order_is_the_strategys() -> None:
    assert spread_out(ORDERED, Spread(0.0, 0.0, 3)) == ORDERED


def test_each_match_taken_lowers_the_rest_of_its_thread() -> None:
    spread = spread_out(ORDERED, Spread(thread_penalty=0.15, near_penalty=0.0, near_lines=3))
    # 0.9 and 0.85 fall to 0.75 and 0.7 behind the other thread's 0.8; then 0.85 - 0.3
    assert ids(spread) == [1, 4, 2, 3]
    assert [order for _, order in spread] == pytest.approx([1.0, 0.8, 0.75, 0.55])


def test_a_match_near_one_taken_gives_way_more_than_one_further_off() -> None:
    spread = spread_out(ORDERED, Spread(thread_penalty=0.0, near_penalty=0.2, near_lines=3))
    assert ids(spread) == [1, 3, 4, 2]  # only the line next to the first is lowered
    assert spread[-1][1] == pytest.approx(0.7)
    wide = spread_out(ORDERED, Spread(thread_penalty=0.0, near_penalty=0.2, near_lines=30))
    assert ids(wide) == [1, 4, 2, 3]  # 30 lines away is near too


def test_a_negative_penalty_draws_the_neighbours_up_in_order() -> None:
    spread = spread_out(ORDERED, Spread(thread_penalty=0.0, near_penalty=-0.2, near_lines=3))
    assert ids(spread) == [2, 1, 3, 4]  # 0.9 + 0.2 passes the first: orders stay sorted
    assert [order for _, order in spread] == sorted((order for _, order in spread), reverse=True)


@pytest.mark.parametrize(
    ("question", "many"),
    [
        ("What activities does Melanie partake in?", True),
        ("What states has Maria vacationed at?", True),
        ("What European countries has Maria been to?", True),
        ("Which kinds of books do you read?", True),
        ("How many dogs has Maria adopted?", True),
        ("List the places I visited", True),
        ("What are Maria's dogs' names?", True),
        ("What is Joanna allergic to?", False),
        ("What makes Jon a perfect mentor?", False),  # a verb, not a plural noun
        ("What exciting news did Maria share?", False),
        ("When did Caroline move?", False),
        ("Where is my passport?", False),
        ("", False),
    ],
)
def test_a_question_asks_for_many_things_by_its_words(question: str, many: bool) -> None:
    assert asks_for_many(question) is many


def test_many_decay_shortens_the_blocks_of_a_question_asking_for_many() -> None:
    option = {"neighbour_decay": 0.8, "many_decay": 0.5}
    assert block_decay(option, "What hobbies does Ann have?") == pytest.approx(0.4)
    assert block_decay(option, "Where does Ann live?") == 0.8
    assert block_decay({"neighbour_decay": 0.8, "many_decay": 1.0}, "What hobbies?") == 0.8


def test_the_options_are_checked_and_off_by_default() -> None:
    settings = settings_for_ranking("blend")
    option = options_of(settings)
    assert (option["thread_penalty"], option["near_penalty"], option["many_only"]) == (0, 0, 0)
    assert option["many_decay"] == 1
    for bad in ({"near_lines": 2.5}, {"many_only": 2}):
        with pytest.raises(ConfigError):
            check_strategy(settings_for_ranking("blend", bad))


def crowded(memory: Memory) -> tuple[list[int], int]:
    """Three lines about Miso in one thread and a fourth, less alike, in another."""
    texts = ("my cat Miso purrs loudly", "my cat Miso purrs at night", "my cat Miso purrs a lot")
    near = [memory.add(text, user="ann", thread="home").id for text in texts]
    far = memory.add("Miso went to the vet", user="ann", thread="vet").id
    return near, far


def test_a_turn_takes_its_next_match_from_another_thread(memory: Memory) -> None:
    near, far = crowded(memory)
    memory.configure_bot(strategy="blend", threshold=-1.0, max_matches=2)
    query = "my cat Miso purrs"
    before = [match.line.id for match in memory.preview_recall(query, user="ann").matches]
    assert set(before) <= set(near)
    memory.configure_bot(**{"strategy.thread_penalty": 2.0})
    after = [match.line.id for match in memory.preview_recall(query, user="ann").matches]
    assert after == [before[0], far]
    # the benchmarks read the same order: the other thread's line right after the first match
    settings = settings_for_ranking("blend", base=memory.bot_settings())
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("ann"))
    vector = memory.embed([query])[0]
    choices = chosen_for_turn(memory.recall_source, settings, query, vector, scope)
    assert [choice.hit.line_id for choice in choices][:2] == after
    order = ranked_lines(memory.recall_source, settings, query, scope)
    assert order.index(far) < min(order.index(line) for line in near if line != before[0])


def test_many_only_spreads_only_a_question_asking_for_many(memory: Memory) -> None:
    near, far = crowded(memory)
    memory.configure_bot(strategy="blend", threshold=-1.0, max_matches=2,
                         **{"strategy.thread_penalty": 2.0, "strategy.many_only": 1})  # fmt: skip
    one = [match.line.id for match in memory.preview_recall("my cat Miso purrs",
                                                            user="ann").matches]  # fmt: skip
    assert set(one) <= set(near)
    many = memory.preview_recall("what things does my cat Miso do", user="ann").matches
    assert far in [match.line.id for match in many]

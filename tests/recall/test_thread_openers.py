"""A thread as a unit (``opener_weight``): the line that opens one of the best threads is
raised by as much as its thread matches the question."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from membot import Memory
from membot.index.scope import InScope
from membot.index.vectors import Scope
from membot.recall.chat import strategy_named
from membot.recall.openers import opener_scores, opening_lines
from membot.recall.ranked import ranked_lines, settings_for_ranking

QUESTION = "what did Rex chase in the park?"


def in_scope(threads: list[int], seqs: list[int]) -> InScope:
    count = len(threads)
    return InScope(np.arange(1, count + 1), np.array(threads), np.array(seqs),
                   np.zeros(count, dtype=np.float32), np.zeros(count))  # fmt: skip


def test_the_opening_line_is_each_threads_lowest_seq_in_any_order() -> None:
    lines = in_scope([2, 1, 2, 1, 3], [5, 9, 4, 7, 1])
    assert opening_lines(lines).tolist() == [False, False, True, True, True]


def test_an_opening_line_scores_its_threads_best_normalised_over_threads() -> None:
    lines = in_scope([1, 1, 2, 2, 3], [0, 1, 0, 1, 0])
    scores = np.array([0.1, 0.9, 0.5, 0.2, 0.3])  # thread bests 0.9, 0.5, 0.3
    np.testing.assert_allclose(opener_scores(lines, scores, 5), [1.0, 0.0, 1 / 3, 0.0, 0.0])
    # Threads that match alike say nothing; nor does an empty scope.
    assert not opener_scores(lines, np.array([0.4, 0.4, 0.4, 0.1, 0.4]), 5).any()
    assert opener_scores(in_scope([], []), np.zeros(0), 5).size == 0


def test_only_the_best_threads_opening_lines_are_raised() -> None:
    lines = in_scope([1, 1, 2, 2, 3], [0, 1, 0, 1, 0])
    scores = np.array([0.1, 0.9, 0.5, 0.2, 0.3])
    np.testing.assert_allclose(opener_scores(lines, scores, 2), [1.0, 0.0, 1 / 3, 0.0, 0.0])
    np.testing.assert_allclose(opener_scores(lines, scores, 1), [1.0, 0.0, 0.0, 0.0, 0.0])


def ranking(memory: Memory, **options: float) -> list[int]:
    settings = settings_for_ranking("blend", options)
    scope = Scope.of(memory.store.bot_id("membot") or 0, None)
    return ranked_lines(memory.recall_source, settings, QUESTION, scope)


def test_the_opener_of_a_matching_thread_is_raised_and_off_leaves_it(
    memory: Memory,
) -> None:
    texts = {"walks": ["I adopted a puppy last spring", "Rex chased a ball in the park",
                       "Rex loves the park"],
             "other": ["hello there", "the weather was grey in Leeds", "I had soup for lunch",
                       "the park was closed"]}  # fmt: skip
    for thread, said in texts.items():
        for day, text in enumerate(said, start=1):
            memory.add(text, user="ann", thread=thread,
                       created_at=datetime(2026, 3, day, tzinfo=UTC))  # fmt: skip
    opener = next(line.id for line in memory.store.lines(ranking(memory))
                  if line.text == texts["walks"][0])  # fmt: skip
    assert strategy_named("blend").options["opener_weight"] == 0.1
    off = ranking(memory, opener_weight=0)
    assert ranking(memory, opener_weight=1, opener_threads=0) == off  # no thread raised
    before, after = off.index(opener), ranking(memory, opener_weight=1).index(opener)
    assert after < before
    assert after <= 2  # beside the thread's best lines

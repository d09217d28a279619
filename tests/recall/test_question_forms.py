"""A question in the form of its answer (issue 30, items 4 and 9): the rules that turn it into
a statement, and blend's cosines mixed with the statement's (``statement_weight``, off)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from asked import asked

from membot import Memory
from membot.recall.blend_features import blend_features
from membot.recall.chat import options_of
from membot.recall.question_forms import (
    is_question,
    mixed_cosines,
    statement_form,
    with_statement,
)
from membot.recall.ranked import settings_for_ranking

TEXTS = ["Melanie: I painted a sunset last week", "Caroline: the weather was grey in Leeds",
         "Melanie: we went camping with the kids", "Caroline: I had soup for lunch"]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "form"),
    [
        ("What has Melanie painted?", "Melanie painted"),
        ("What activities does Melanie partake in?", "activities Melanie partake in"),
        ("How many days passed between the concert and the trip?", "the concert the trip days"),
        ("When did Caroline go to the support group?", "Caroline go to the support group"),
        ("What kind of art does Caroline make?", "art Caroline make"),
        ("How long ago was Caroline's birthday?", "Caroline's birthday"),
        ("Is Melanie a painter", "Melanie a painter"),
        ("What book recommendation did Tim give?", "book recommendation Tim give"),
    ],
)
def test_a_question_becomes_a_statement(line: str, form: str) -> None:
    assert statement_form(line) == form


@pytest.mark.parametrize("line", ["I painted a sunset.", "thanks!", "", "?"])
def test_a_line_that_does_not_ask_has_no_statement_form(line: str) -> None:
    assert statement_form(line) is None


def test_a_question_ends_with_a_question_mark_or_starts_with_a_wh_word() -> None:
    assert is_question("you painted that?")
    assert is_question("Where did you go")
    assert is_question("did you go")
    assert not is_question("I went home")


def test_mixed_cosines_move_toward_the_statements_and_keep_minus_infinity() -> None:
    question = np.array([0.2, 0.5, -np.inf], dtype=np.float32)
    statement = np.array([0.6, 0.3, -np.inf], dtype=np.float32)
    np.testing.assert_allclose(mixed_cosines(question, statement, 1.0), [0.6, 0.5, -np.inf])
    np.testing.assert_allclose(
        mixed_cosines(question, statement, 0.5, highest=False), [0.4, 0.4, -np.inf]
    )
    assert mixed_cosines(question, statement, 1.0).dtype == np.float32


@pytest.fixture
def stored(memory: Memory) -> Memory:
    for day, text in enumerate(TEXTS, start=1):
        speaker, said = text.split(": ")
        when = datetime(2026, 3, day, tzinfo=UTC)
        memory.add(said, user="ann", speaker=speaker, thread=f"t{day % 2}", created_at=when)
    return memory


def test_a_questions_cosines_are_raised_by_its_statement_form(stored: Memory) -> None:
    source = stored.recall_source
    question = asked(stored, "What has Melanie painted?")
    plain = source.scored(question.vector, question.scope)
    mixed = with_statement(source, question, plain, 1.0, highest=True)
    statement = source.scored(source.embed(["Melanie painted"])[0], question.scope)
    np.testing.assert_allclose(mixed.scores, np.maximum(plain.scores, statement.scores))
    assert (mixed.scores > plain.scores).any()


def test_a_line_that_does_not_ask_is_scored_as_before(stored: Memory) -> None:
    option = options_of(settings_for_ranking("blend", {"statement_weight": 1.0}))
    off = options_of(settings_for_ranking("blend"))
    question = asked(stored, "I painted a sunset")
    on_features = blend_features(stored.recall_source, question, option, -2.0)
    off_features = blend_features(stored.recall_source, question, off, -2.0)
    assert on_features is not None and off_features is not None
    np.testing.assert_array_equal(on_features.fused, off_features.fused)


def test_statement_weight_is_off_by_default(stored: Memory) -> None:
    assert options_of(settings_for_ranking("blend"))["statement_weight"] == 0.0
    # The question names a speaker: without the names searched too, only the parts move it.
    option = options_of(settings_for_ranking("blend", {"unnamed_weight": 0}))
    question = asked(stored, "What has Melanie painted?")
    found = blend_features(stored.recall_source, question, option, -2.0)
    plain = stored.recall_source.scored(question.vector, question.scope)
    assert found is not None
    np.testing.assert_array_equal(
        found.lines.scores, plain.with_parts(option["part_weight"]).scores
    )

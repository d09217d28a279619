"""blend's second round (issue 30 item 4): the first round's best lines seed a second
search -- their names and numbers (``entity_weight``) or their own vectors
(``feedback_weight``) -- that lifts the lines joined to them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot import Memory, Role
from membot.index.vectors import Scope
from membot.model import Line
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.recall.second_round import MAX_ENTITY_TERMS, entity_terms

QUESTION = "what does my dog play with?"


def said(text: str, speaker: str | None = None) -> Line:
    return Line(1, "membot", "ann", "t", 1, Role.HUMAN, text, datetime(2026, 1, 1, tzinfo=UTC),
                5, speaker)  # fmt: skip


def test_entity_terms_are_the_seeds_names_and_numbers_not_the_questions() -> None:
    seeds = [said("Thanks, Melanie! My dog Rex was born in 2019 in Sweden.", "Caroline"),
             said("Caroline loves Rex and Sweden.", "Melanie")]  # fmt: skip
    # "Melanie" and "Caroline" speak; "Thanks" and "My" open a sentence; "dog" is asked.
    assert entity_terms(seeds, "Where does my dog Rex come from?") == ["2019", "sweden"]
    many = [said(" ".join(f"x Name{n}" for n in range(30)))]
    assert len(entity_terms(many, QUESTION)) == MAX_ENTITY_TERMS


def ranking(memory: Memory, **options: float) -> list[int]:
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("ann"))
    settings = settings_for_ranking("blend", options)
    return ranked_lines(memory.recall_source, settings, QUESTION, scope)


@pytest.mark.parametrize("design", ["entity_weight", "feedback_weight"])
def test_the_line_joined_to_the_best_match_comes_up(memory, design) -> None:
    """The line "my dog is called Rex" answers half the question; "Rex loves chasing tennis
    balls" shares no word with it, only the name with the first line."""
    texts = ["my dog is called Rex", "the weather was grey in Leeds", "I had soup for lunch",
             "my sister bought a red car", "Rex loves chasing tennis balls",
             "the train to Leeds was late"]  # fmt: skip
    ids = [memory.add(text, user="ann", thread=f"t{n}").id for n, text in enumerate(texts)]
    first, joined = ids[0], ids[4]
    alone = ranking(memory, entity_weight=0)
    assert alone[0] == first and alone.index(joined) > 1
    together = ranking(memory, **{"entity_weight": 0, design: 1.0, "feedback_seeds": 1})
    assert together[:2] == [first, joined] or design == "feedback_weight"
    assert together.index(joined) < alone.index(joined)

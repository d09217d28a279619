"""The relevance check: the model's yes drops nothing, its no drops a hint, anything else keeps."""

from __future__ import annotations

import pytest

from membot import ScriptedLLM
from membot.turn.context import Hint
from membot.turn.relevance import VERDICT_SCHEMA, check_hints, judged_relevant

HINT = Hint("h4", "history", "lines", "HUMAN: my sister's wedding is in June", 0.6)


@pytest.mark.parametrize("answer", ["yes", "Yes.", " YES, it would help", '"Yes"', "**yes**"])
def test_yes_keeps_the_hint(answer: str) -> None:
    assert judged_relevant(ScriptedLLM([answer]), "when is my wedding?", HINT) is True


@pytest.mark.parametrize("answer", ["no", "No.", "NO, it is about a sister", "'no'", "**No**"])
def test_no_rejects_the_hint(answer: str) -> None:
    assert judged_relevant(ScriptedLLM([answer]), "when is my wedding?", HINT) is False


@pytest.mark.parametrize("answer", ["", "   ", "maybe", "Not sure", "None of it", "I think so"])
def test_anything_else_is_no_clear_answer(answer: str) -> None:
    assert judged_relevant(ScriptedLLM([answer]), "when is my wedding?", HINT) is None


def test_a_failing_model_gives_no_clear_answer() -> None:
    assert judged_relevant(ScriptedLLM(["!error down"]), "when is my wedding?", HINT) is None


def test_the_question_shows_the_message_and_the_hint_and_asks_for_few_tokens() -> None:
    llm = ScriptedLLM(["yes"])
    judged_relevant(llm, "when is my wedding?", HINT)
    ((message,),) = llm.history
    assert message["role"] == "user"
    assert "when is my wedding?" in message["content"]
    assert HINT.text in message["content"]
    assert "yes or no" in message["content"]
    assert llm.schemas == [VERDICT_SCHEMA]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ('{"answer": "yes"}', True),
        ('{"answer": "no"}', False),
        ('{"answer": "maybe"}', None),
        ('{"relevant": true}', None),
    ],
)
def test_the_json_answer_asked_for_is_read(answer: str, verdict: bool | None) -> None:
    assert judged_relevant(ScriptedLLM([answer]), "when is my wedding?", HINT) is verdict


def test_check_hints_drops_the_rejected_and_notes_each_decision() -> None:
    hints = [
        Hint("h1", "history", "lines", "one", 0.9),
        Hint("s2", "history", "summary", "two", 0.8),
        Hint("e3", "expertise", "chunk", "three", 0.7),
    ]
    kept, notes = check_hints(ScriptedLLM(["yes", "no", "hmm"]), "q", hints)
    assert [hint.id for hint in kept] == ["h1", "e3"]
    assert notes == [
        "relevance check dropped s2",
        "relevance check gave no clear answer for e3; kept it",
    ]


def test_check_hints_with_no_hints_asks_nothing() -> None:
    llm = ScriptedLLM()
    assert check_hints(llm, "q", []) == ([], [])
    assert llm.history == []

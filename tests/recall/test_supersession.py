"""Facts that changed (issue 30 item 5): of two recalled lines that state different values
of the same thing, the later is marked current and the earlier as history -- in the prompt
and in the trace (``superseded_by``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from membot import Bot, Memory, Role, ScriptedLLM
from membot.model import Line
from membot.recall.supersession import superseded_lines
from membot.recall.values import masked, named_words

DAY = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def line(line_id: int, text: str, days: int = 0, **fields: object) -> Line:
    values: dict[str, object] = {
        "id": line_id, "bot": "membot", "person": "ann", "thread": f"t{line_id}", "seq": 1,
        "role": Role.HUMAN, "text": text, "created_at": DAY + timedelta(days=days), "tokens": 5,
    }  # fmt: skip
    return Line(**{**values, **fields})  # type: ignore[arg-type]


def test_values_are_names_and_numbers_not_a_sentence_opening_or_i() -> None:
    said = "I'm in Boston. Then I moved to Denver in 2025, with 3 cats."
    assert named_words(said) == ["Boston", "Denver", "2025", "3"]
    assert masked("I live in Boston.") == "I live in X."


def test_no_pair_to_compare_embeds_nothing() -> None:
    asked: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        asked.append(texts)
        return np.ones((len(texts), 4), dtype=np.float32)

    lines = [
        line(1, "I live in Boston."),
        line(2, "Where is Denver?", 30),
        line(3, "I live in Boston!", 40),
        line(4, "I moved to Denver.", 50, role=Role.BOT),
    ]
    assert superseded_lines(lines, embed) == {}  # a question; the same values; another party
    assert asked == []


@pytest.mark.slow
def test_a_bots_replies_are_never_marked(minilm) -> None:
    """A bot's reply is not a fact about anyone: two of its lines that state different
    values of the same thing are not paired, nor is its line paired with the person's."""

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(minilm.embed(texts))

    said = [
        line(1, "Your daughter Asha is 3 months old.", 1, role=Role.BOT),
        line(2, "Your daughter Asha is 7 years old.", 2, role=Role.BOT),
        line(3, "I live in Boston."),
        line(4, "You moved to Denver.", 60, role=Role.BOT),
    ]
    assert superseded_lines(said, embed) == {}
    moved = line(6, "I moved to Denver.", 60)  # said by the person, it supersedes Boston
    assert superseded_lines([*said, moved], embed) == {3: 6}


@pytest.mark.slow
def test_a_changed_home_is_marked_and_a_visit_is_not(minilm) -> None:
    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(minilm.embed(texts))

    boston, denver = line(1, "I live in Boston."), line(2, "I moved to Denver.", 60)
    assert superseded_lines([denver, boston], embed) == {1: 2}  # by time, not by order given
    visit = line(3, "I visited Denver last week.", 60)
    assert superseded_lines([boston, visit], embed) == {}


@pytest.mark.slow
def test_boston_then_denver_through_a_turn(make_memory, minilm) -> None:
    """ "I live in Boston" ... months later "I moved to Denver"; asked "where do I live?",
    the turn recalls both, marks Denver current and Boston earlier, in the prompt and the
    trace."""
    memory: Memory = make_memory(embedder=minilm)
    llm = ScriptedLLM()
    bot = Bot(memory, llm)
    said = [("I live in Boston.", DAY), ("I moved to Denver.", DAY + timedelta(days=90))]
    for number, (text, when) in enumerate(said):
        llm.enqueue(json.dumps({"response": "Good to know!", "citation_ids": []}))
        bot.turn(text, user="ann", thread=f"chat-{number}", now=when)

    turn = bot.turn(
        "where do I live?", user="ann", thread="chat-2", dry_run=True,
        now=DAY + timedelta(days=100),
    )  # fmt: skip

    by_text = {match.line.text: match for match in turn.matches}
    assert {"I live in Boston.", "I moved to Denver."} <= set(by_text)
    denver = by_text["I moved to Denver."]
    assert by_text["I live in Boston."].superseded_by == denver.line.id
    assert denver.superseded_by is None
    assert "I live in Boston. (earlier; changed on 2026-04-05)" in turn.prompt
    assert "I moved to Denver. (current)" in turn.prompt
    assert turn.prompt.index("I live in Boston.") < turn.prompt.index("I moved to Denver.")
    trace = {match["text"]: match for match in turn.to_json()["matches"]}
    assert trace["I live in Boston."]["superseded_by"] == denver.line.id

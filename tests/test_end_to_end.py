"""One conversation end to end with the real parts: the bundled MiniLM and the bundled
offline SmolLM2 (no scripted replies). The tiny model's words are not judged, only that
every part of the turn, the ending and the summary's recall work with it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from membot import Bot, Memory
from membot.llm import BundledSmolLM2
from membot.turn.ending import end_conversation

pytestmark = pytest.mark.slow


def test_a_bot_with_expertise_talks_ends_a_thread_and_remembers(
    make_memory, minilm, tmp_path: Path
) -> None:
    memory: Memory = make_memory(embedder=minilm)
    memory.create_bot("barista", bot_name="Bea", human_name="Sam", relevance_check=True)
    guide = tmp_path / "grind.md"
    guide.write_text("# Grind\n\nEspresso wants a fine grind, finer than table salt.\n")
    memory.add_document(guide, bot="barista")
    bot = Bot(memory, BundledSmolLM2(), "barista")

    first = bot.turn("Hi, I'm Sam and I love flat whites.", user="sam", thread="monday")
    assert first.error is None and first.response and first.bot_line is not None
    assert any("cannot write JSON" in note for note in first.notes)
    ending = end_conversation(memory, bot.llm, bot="barista", user="sam", thread="monday",
                              remember=True)  # fmt: skip
    assert memory.store.thread_state(ending_key(ending)).ended_at is not None
    # The tiny model cannot write key points: the person's own statement is kept instead.
    assert ending.decision == "kept" and ending.remembered is not None
    assert ending.remembered.text.endswith("Sam said: I'm Sam and I love flat whites.")

    later = bot.turn("How fine should I grind espresso?", user="sam", thread="friday")
    assert later.error is None and later.response
    assert later.expertise_match_string == "How fine should I grind espresso?"
    assert later.tokens["prompt"] <= later.tokens["budget"]
    assert later.timings_ms["llm"] > 0
    data = later.to_json()
    for key in ("response", "score", "citations", "feed", "story", "history_match_string",
                "history_matches", "history_hints", "expertise_match_string",
                "expertise_matches", "expertise_hints", "prompt"):  # fmt: skip
        assert key in data


def test_the_issue_s_cat_is_remembered_as_said_with_the_bundled_model(make_memory, minilm):
    """Issue 13's case, as a new user meets it: the bundled model remembered this thread as
    "2026-11-30: HUMAN is allergic to peanuts" and "2026-11-23: ...", then (once those were
    checked) as nothing at all."""
    memory: Memory = make_memory(embedder=minilm)
    bot = Bot(memory, BundledSmolLM2())
    said = "I just adopted a cat named Miso; she is grey and loves tuna"
    turn = bot.turn(said, user="sam", thread="t", now=datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
    assert turn.error is None

    ending = end_conversation(memory, bot.llm, bot=bot.name, user="sam", thread="t",
                              remember=True)  # fmt: skip

    assert ending.decision == "kept" and ending.remembered is not None
    assert ending.remembered.text == f"- 2026-11-23: sam said: {said}"
    assert "peanuts" not in ending.remembered.text


def ending_key(ending):
    from membot.store import ThreadKey

    return ThreadKey(ending.bot, ending.user, ending.thread)

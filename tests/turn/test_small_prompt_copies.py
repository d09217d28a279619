"""The bundled SmolLM2 with the small prompt answers from a memory in the memory's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from membot import Bot, Memory
from membot.llm import BundledSmolLM2

pytestmark = pytest.mark.slow

THEN = datetime(2024, 3, 2, 18, 0, tzinfo=UTC)


def test_the_bundled_model_says_the_fact_its_memory_holds(make_memory, minilm) -> None:
    memory: Memory = make_memory(embedder=minilm)
    said = [
        ("Priya", "Hi Tom! How was your weekend?"),
        ("Tom", "Busy! We adopted a beagle puppy called Rusty on Saturday."),
        ("Priya", "Aw, a puppy! Send me a photo."),
        ("Tom", "Will do, he already chewed one of my shoes."),
    ]
    for step, (speaker, text) in enumerate(said):
        memory.add(text, user="tom", thread="weekend", speaker=speaker,
                   created_at=THEN + timedelta(minutes=step))  # fmt: skip
    bot = Bot(memory, BundledSmolLM2())

    turn = bot.turn("What is the name of Tom's puppy?", user="tom", thread="later",
                    now=THEN + timedelta(days=30))  # fmt: skip

    assert turn.error is None
    assert any("small prompt" in note for note in turn.notes)
    assert "Rusty" in turn.response

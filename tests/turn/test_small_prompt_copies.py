"""The bundled SmolLM2 with the small prompt, in a real chat: it answers from a memory in the
memory's words, and its replies do not go round in circles."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from membot import Bot, Memory
from membot.llm import BundledSmolLM2
from membot.turn.ending import end_conversation

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


def test_a_chats_replies_do_not_repeat_a_sentence(make_memory, minilm) -> None:
    """Without a repeat penalty the model, recalling its own chatty replies, wrote "I'm glad
    to hear that you're learning the cello." four times in one reply, in 4 replies of 9."""
    memory: Memory = make_memory(embedder=minilm)
    bot = Bot(memory, BundledSmolLM2())
    monday = ["Hi! I'm Sam. I just adopted a grey cat called Miso.",
              "She loves tuna and sleeps on my keyboard.",
              "I also started learning the cello last month."]  # fmt: skip
    friday = ["Hello again!", "What is my cat called?", "What instrument am I learning?",
              "What does Miso like to eat?"]  # fmt: skip
    replies = [bot.turn(text, user="sam", thread="monday").response for text in monday]
    end_conversation(memory, bot.llm, bot=bot.name, user="sam", thread="monday", remember=True)
    replies += [bot.turn(text, user="sam", thread="friday").response for text in friday]

    for reply in replies:
        sentences = Counter(part.strip().lower() for part in re.split(r"[.!?]", reply)
                            if len(part.strip()) > 8)  # fmt: skip
        assert max(sentences.values(), default=0) < 3, reply

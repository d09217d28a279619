"""A reply without what a small model adds to it: each kind of artefact seen from the bundled
SmolLM2 (docs/answers.md) is left out of the reply shown and the bot's line stored, and a reply
with nothing else is the bot's no_response."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot import Bot, Memory, Role, ScriptedLLM
from membot.turn.artefacts import ARTEFACTS, ReplyContext, clean_reply, shown_part
from membot.turn.templates import DEFAULTS

QUESTION = "What does Melanie say running has been great for?"
THEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

# (what the model wrote, what the bot says and stores, the kinds left out)
SEEN = [
    ("The AI responds: Her mental health.", "Her mental health.", ("opener",)),
    ("Here is the response: <response text>", None, ("opener", "markup")),
    ("Here's my reply: It was great for her mind.", "It was great for her mind.", ("opener",)),
    ('The AI\'s utterance is "What does Melanie say running has been great for?"', None,
     ("opener", "question repeated")),
    (f"HUMAN: {QUESTION}\nAI: Her mental health.", "Her mental health.", ("speaker label",)),
    ("HUMAN (not in the first person): No, I'm not sure.", "No, I'm not sure.",
     ("speaker label",)),
    ("AI: Her mental health.", "Her mental health.", ("speaker label",)),
    ("Student: It was great for her.", "It was great for her.", ("speaker label",)),
    ("Caroline: Hey, Melanie! I'm so glad you're here.\nMelanie: Oh, that sounds amazing!",
     "Hey, Melanie! I'm so glad you're here.", ("speaker label", "transcript continued")),
    (f"Student: {QUESTION}", None, ("speaker label", "question repeated")),
    ('Melanie said: "It was great for my mental health."\nCaroline said: "Wow!"',
     "It was great for my mental health.", ("speaker label", "transcript continued")),
    ("Her mental health.\nCaroline: Hey, Melanie! How was the run?", "Her mental health.",
     ("transcript continued",)),
    ("Her mental health.\nHUMAN: thanks", "Her mental health.", ("transcript continued",)),
    ('Melanie says: "It was great for my mental health."', "It was great for my mental health.",
     ("speaker label",)),
    ('<memory citation_id="h697">Running is great for her mental health.</memory>',
     "Running is great for her mental health.", ("markup",)),
    ("Her mental health.<|im_end|>", "Her mental health.", ("markup",)),
    (QUESTION, None, ("question repeated",)),
    (f"{QUESTION} Her mental health.", "Her mental health.", ("question repeated",)),
    ("I'm glad to hear that you're learning the cello. I'm glad to hear that you're learning "
     "the cello. I'm glad to hear that", "I'm glad to hear that you're learning the cello.",
     ("sentence repeated",)),
    ("It was great for her mind! Running helps. It was great for her mind! It was",
     "It was great for her mind! Running helps.", ("sentence repeated",)),
]  # fmt: skip


def melanie(memory: Memory) -> None:
    """Caroline's earlier thread, in which Melanie says what running has been great for, and
    a bot whose person is a Student."""
    memory.add("Running has been great for my mental health", user="caroline", thread="s1",
               speaker="Melanie", created_at=THEN)  # fmt: skip
    memory.add("That's so good to hear", user="caroline", thread="s1", speaker="Caroline",
               created_at=THEN)  # fmt: skip
    memory.configure_bot(threshold=0.1, human_name="Student")


def test_every_kind_is_tested() -> None:
    assert {kind for _, _, kinds in SEEN for kind in kinds} == set(ARTEFACTS)


@pytest.mark.parametrize(("raw", "said", "kinds"), SEEN)
def test_an_artefact_is_never_stored_as_the_bots_line(memory, raw, said, kinds) -> None:
    melanie(memory)
    turn = Bot(memory, ScriptedLLM([raw])).turn(
        QUESTION, user="caroline", thread="q", settings={"citations": False}
    )
    assert "Caroline" in turn.prompt and "Melanie" in turn.prompt  # speakers it may copy
    expected = said if said is not None else DEFAULTS["no_response"]
    assert turn.response == expected
    stored = memory.history(user="caroline", thread="q")
    assert [(line.role, line.text) for line in stored][-1] == (Role.BOT, expected)
    assert f"left out of the reply: {', '.join(kinds)}" in " ".join(turn.notes)
    if said is None:
        assert any("answered with no_response" in note for note in turn.notes)


@pytest.mark.parametrize(("raw", "said", "kinds"), SEEN)
def test_a_streamed_reply_shows_exactly_what_is_stored(memory, raw, said, kinds) -> None:
    melanie(memory)
    shown: list[str] = []
    llm = ScriptedLLM([raw], piece_size=3)
    turn = Bot(memory, llm).turn(
        QUESTION, user="caroline", thread="q", settings={"citations": False}, on_text=shown.append
    )
    assert "".join(shown) == turn.response == turn.bot_line.text
    assert turn.response == (said if said is not None else DEFAULTS["no_response"])


CONTEXT = ReplyContext.of("AI", "HUMAN", ["Caroline", "Melanie"], QUESTION)


@pytest.mark.parametrize(
    "reply",
    [
        "Answers vary from day to day.",
        "The AI says hello to everyone.",  # an opener only before a colon or a quote
        "Melanie says it helps her mind.",
        "I'm sorry, but I don't know.",
        "It is great for x < y and <div> tags.",
        "Running: it is good for her mental health.",  # not a speaker's name
        "ok",
        "Yes. Yes. It was her mental health.",  # a short sentence twice may be meant
        "It grew 2.5 times. It grew 2.5 times faster than before.",  # not the same sentence
    ],
)
def test_a_reply_without_artefacts_is_kept_as_written(reply: str) -> None:
    assert clean_reply(reply, CONTEXT).text == reply and clean_reply(reply, CONTEXT).found == ()


def test_a_short_line_written_back_is_no_echo() -> None:
    context = ReplyContext.of("AI", "HUMAN", (), "ok thanks")
    assert clean_reply("ok thanks", context).text == "ok thanks"


def test_a_growing_reply_is_held_while_it_could_still_become_an_artefact() -> None:
    held = [
        "Th",
        "The AI resp",
        "What does Mel",
        "Caro",
        "HUMAN (not",
        "<memo",
        "Here is",
        "Melanie sa",
    ]
    assert [shown_part(text, CONTEXT) for text in held] == [None] * len(held)
    assert shown_part("Her men", CONTEXT) == "Her men"
    assert shown_part("Her mental health.\nCaro", CONTEXT) == "Her mental health."
    assert shown_part("Her mental health. <memory cita", CONTEXT) == "Her mental health."
    # a sentence that may be one said before is held until it turns out not to be
    assert shown_part("Her mental health. Her men", CONTEXT) == "Her mental health."
    assert shown_part("Her mental health. Her mind too", CONTEXT) == (
        "Her mental health. Her mind too"
    )

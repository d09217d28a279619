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
    ("The answer is: Her mental health.", "Her mental health.", ("opener",)),
    ('The answer is: Melanie said: "It was great for my mental health."',
     "It was great for my mental health.", ("speaker label", "opener")),
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


# A reply of 64 tokens or more (the small prompt's cap) once the model's last sentence is added.
LONG = (
    "You work at a bakery in the old town, and you told me how much you love the early "
    "mornings there. The smell of fresh bread makes it worth getting up before the sun, "
    "and the people who come in every day are always so kind to you and to your dog Bruno."
)

# Seen where the turn gives the bot's previous reply (the small prompt's): (that reply, what
# the model wrote, what the bot says and stores, the kinds left out)
AFTER_A_REPLY = [
    ("Bruno is a golden retriever.", "Bruno is a golden retriever.", None,
     ("previous reply repeated",)),
    ("Bruno is a golden retriever. He loves the park.",
     "You work at a bakery. You love it there! Bruno is a golden retriever.",
     "You work at a bakery. You love it there!", ("previous reply repeated",)),
    ("Bruno is a golden retriever.", "You work at a bakery. You work at a bakery.",
     "You work at a bakery.", ("sentence repeated",)),
    ("Bruno is a golden retriever.", LONG + " I'm glad you're enjoying your", LONG,
     ("unfinished sentence",)),
]  # fmt: skip


def test_every_kind_is_tested() -> None:
    tested = {kind for *_, kinds in [*SEEN, *AFTER_A_REPLY] for kind in kinds}
    assert tested == set(ARTEFACTS)


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
        "The answer is 42, as she said.",
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


def _after_a_reply(memory: Memory, previous: str, raw: str, style: str, **turn: object):  # type: ignore[no-untyped-def]
    """The second turn of a thread whose first reply was ``previous``, the model writing
    ``raw``, with the prompt ``style``."""
    bot = Bot(memory, ScriptedLLM([previous, raw], piece_size=3))
    settings = {"citations": False, "prompt_style": style}
    bot.turn("What breed is Bruno?", user="olga", thread="t", settings=settings)
    return bot.turn("Where do I work?", user="olga", thread="t", settings=settings, **turn)


@pytest.mark.parametrize(("previous", "raw", "said", "kinds"), AFTER_A_REPLY)
def test_the_small_prompts_reply_does_not_repeat_the_previous_one(
    memory, previous, raw, said, kinds
) -> None:  # fmt: skip
    turn = _after_a_reply(memory, previous, raw, "small")
    expected = said if said is not None else DEFAULTS["no_response"]
    assert turn.response == expected == memory.history(user="olga", thread="t")[-1].text
    assert f"left out of the reply: {', '.join(kinds)}" in " ".join(turn.notes)
    shown: list[str] = []
    streamed = _after_a_reply(memory, previous, raw, "small", on_text=shown.append)
    assert "".join(shown) == streamed.response == expected


def test_only_a_reply_stopped_by_the_cap_loses_its_unfinished_sentence(memory) -> None:
    """Under the cap the model ended the reply itself; the full prompt's replies are long
    and streamed as written, so theirs is kept too."""
    unfinished = LONG + " I'm glad you're enjoying your"
    assert memory.tokens.count(unfinished) >= 64 > memory.tokens.count("You work. And")
    assert _after_a_reply(memory, "Hi.", "You work. And", "small").response == "You work. And"
    settings = {"citations": False, "prompt_style": "full", "reply_tokens": 64}
    full = Bot(memory, ScriptedLLM([unfinished])).turn(
        "Where do I work?", user="olga", thread="f", settings=settings
    )
    assert full.response == unfinished


def test_the_full_prompts_reply_may_repeat_the_previous_one(memory) -> None:
    """A model that reads the full prompt is not cut for it ("Say that again?")."""
    turn = _after_a_reply(memory, "Bruno is a golden retriever.",
                          "Bruno is a golden retriever.", "full")  # fmt: skip
    assert turn.response == "Bruno is a golden retriever."


def test_a_stream_holds_back_what_may_become_the_previous_reply() -> None:
    context = ReplyContext.of("AI", "HUMAN", (), "Where do I work?",
                              "Bruno is a golden retriever.")  # fmt: skip
    assert shown_part("Bruno is a gold", context) is None
    assert shown_part("Bruno is a puppy", context) == "Bruno is a puppy"
    assert shown_part("You work at a bakery. Bruno is a", context) == "You work at a bakery."


def test_a_stream_holds_back_a_sentence_the_cap_may_stop() -> None:
    context = ReplyContext.of("AI", "HUMAN", (), "Where do I work?", whole_sentences=True)
    assert shown_part("You work at a ba", context) == "You work at a ba"  # nothing before it
    assert shown_part("You work at a bakery. I'm glad you", context) == "You work at a bakery."
    assert shown_part("You work at a bakery. I'm glad.", context) == (
        "You work at a bakery. I'm glad."
    )
    assert shown_part("You work at a bakery. I'm glad you", CONTEXT) == (
        "You work at a bakery. I'm glad you"
    )

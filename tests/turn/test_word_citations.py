"""Citations for a model that cannot cite: the memories whose words the reply used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from small_model import SmallLLM, block_hint

from membot import Bot, Memory, ScriptedLLM
from membot.turn.templates import DEFAULTS
from membot.turn.word_citations import FOUND_BY_WORDS_NOTE, cited_by_words

THEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
NOW = THEN + timedelta(days=24)


CAT = block_hint(
    "h1", 0.5, [("Sam", "I adopted a grey cat called Miso."), ("AI", "Lovely! Cats are great.")], 0
)
FOOD = block_hint("h2", 0.5, [("Sam", "Miso loves tuna and sleeps on my keyboard.")], 0)
SISTER = block_hint("h3", 0.5, [("Sam", "My sister Ines is a dentist in Porto.")], 0)


def cites(reply: str, question: str, *, small: bool = True) -> list[str]:
    return cited_by_words(reply, question, [CAT, FOOD, SISTER], ("AI", "Sam"), small=small)


def test_a_reply_cites_the_memory_whose_words_it_used() -> None:
    assert cites("Miso loves tuna.", "What does my cat like to eat?") == ["h2"]
    assert cites("She is a dentist.", "What does my sister do?") == ["h3"]  # its one new word


def test_the_questions_words_and_the_names_are_no_evidence() -> None:
    # "sister" came from the question, "doctor" from nowhere: nothing cited.
    assert cites("My sister is a doctor.", "What does my sister do?") == []
    # "Miso", its one word of its own, is in two memories: both cited, in the prompt's order.
    assert cites("Sam, your cat is called Miso.", "What is my cat called?") == ["h1", "h2"]
    assert cites("Hello Sam!", "Hi AI") == []


def test_two_new_words_are_needed_when_the_reply_has_more() -> None:
    # "grey" alone, among several words of its own, is not enough.
    assert cites("It is grey and fluffy and very playful.", "What colour is my cat?") == []
    assert cites("Grey, called Miso.", "What colour is my cat?") == ["h1"]


def test_the_small_prompt_shows_no_bot_reply_so_none_is_cited_from() -> None:
    reply, question = "Cats are great.", "Do you like animals?"
    assert cites(reply, question) == []  # the small prompt left the bot's reply out
    assert cites(reply, question, small=False) == ["h1"]


def furnish(memory: Memory) -> None:
    for day, said in enumerate(["My grandma gave me a necklace from Sweden",
                                "I paint lakes at sunrise"]):  # fmt: skip
        memory.add(said, user="caroline", thread=f"s{day}", speaker="Caroline",
                   created_at=THEN + timedelta(days=day))  # fmt: skip
    memory.configure_bot(threshold=0.05)


def test_a_turn_of_a_model_that_cannot_cite_cites_by_words(memory) -> None:
    furnish(memory)
    turn = Bot(memory, SmallLLM(["A necklace from Sweden."])).turn(
        "What did grandma give Caroline?", user="caroline", thread="q", now=NOW
    )
    assert [c.found_by for c in turn.citations] == ["words"]
    assert "Sweden" in turn.citations[0].text and FOUND_BY_WORDS_NOTE in turn.notes
    assert turn.to_json()["citations"][0]["found_by"] == "words"


def test_the_no_response_cites_nothing(memory) -> None:
    furnish(memory)
    turn = Bot(memory, SmallLLM(["   "])).turn(
        "What did grandma give Caroline?", user="caroline", thread="q", now=NOW
    )
    assert turn.response == DEFAULTS["no_response"] and turn.citations == ()
    assert FOUND_BY_WORDS_NOTE not in turn.notes


def test_a_bot_that_asks_no_citations_gets_none_found(memory) -> None:
    furnish(memory)
    turn = Bot(memory, SmallLLM(["A necklace from Sweden."])).turn(
        "What did grandma give Caroline?", user="caroline", thread="q", now=NOW,
        settings={"citations": False},
    )  # fmt: skip
    assert turn.citations == () and FOUND_BY_WORDS_NOTE not in turn.notes


def test_a_model_that_cites_keeps_its_own_citations(memory) -> None:
    furnish(memory)
    bot = Bot(memory, ScriptedLLM(['{"response": "A necklace from Sweden.", "citation_ids": []}']))
    turn = bot.turn("What did grandma give Caroline?", user="caroline", thread="q", now=NOW)
    assert turn.citations == ()  # it cited nothing, and nothing is found for it
    hint_id = turn.history_matches[0]["id"]
    bot.llm.enqueue(f'{{"response": "A necklace.", "citation_ids": ["{hint_id}"]}}')  # type: ignore[attr-defined]
    turn = bot.turn("What did grandma give Caroline?", user="caroline", thread="r", now=NOW)
    assert [c.found_by for c in turn.citations] == ["model"]

"""The short prompt for a model too small to read the templates' prompt (``prompt_style``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from small_model import SmallLLM, block_hint

from membot import Bot, ConfigError, Memory, Role, ScriptedLLM
from membot.config import BotSettings
from membot.turn.context import Speakers
from membot.turn.small_prompt import (
    INSTRUCTION,
    MEMORIES,
    REPLY_TOKENS,
    assemble_small,
    memory_text,
    question_words,
    resolved_style,
)
from membot.turn.templates import DEFAULTS

THEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
NOW = datetime(2023, 6, 1, 9, 0, tzinfo=UTC)


def furnish(memory: Memory) -> None:
    """Three old threads of Caroline's, each recalled by the question about her necklace."""
    for day, (said, answer) in enumerate(
        [
            ("My necklace is a gift from my grandma", "What a lovely necklace gift"),
            ("The gift from grandma reminds me of Sweden", "Sweden and the gift, how nice"),
            ("I lost a gift from grandma once", "Oh no, the gift"),
        ]
    ):
        at = THEN + timedelta(days=day)
        memory.add(said, user="caroline", thread=f"s{day}", speaker="Caroline", created_at=at)
        memory.add(answer, user="caroline", thread=f"s{day}", speaker="Melanie", created_at=at)
    memory.configure_bot(threshold=0.05)


def test_auto_is_small_for_a_model_that_cannot_read_a_long_prompt() -> None:
    small, big = SmallLLM(), ScriptedLLM()
    assert resolved_style(BotSettings(), small) == "small"
    assert resolved_style(BotSettings(), big) == "full"
    assert resolved_style(BotSettings(prompt_style="small"), big) == "small"
    assert resolved_style(BotSettings(prompt_style="full"), small) == "full"
    own = BotSettings(prompt_fmt="You are {BOT}. {HUMAN} says {QUERY}.")
    assert resolved_style(own, small) == "full"  # templates written for the bot are kept


def test_the_bundled_model_says_it_cannot_read_a_long_prompt() -> None:
    from membot.llm import BundledSmolLM2

    assert BundledSmolLM2.reads_long_prompts is False
    assert resolved_style(BotSettings(), BundledSmolLM2()) == "small"


def test_prompt_style_is_checked() -> None:
    with pytest.raises(ConfigError, match="prompt_style must be auto, small, full"):
        BotSettings().with_values({"prompt_style": "tiny"})
    assert BotSettings().with_values({"prompt_style": "small"}).prompt_style == "small"


def test_the_small_prompt_holds_the_best_memories_dated_next_to_the_question(memory) -> None:
    furnish(memory)
    llm = SmallLLM(["A gift from her grandma."])
    turn = Bot(memory, llm).turn(
        "What was grandma's gift to Caroline?", user="caroline", thread="q", now=NOW
    )
    ((system, user),) = llm.history
    assert user == {"role": "user", "content": "What was grandma's gift to Caroline?"}
    assert system["role"] == "system"
    who, memories = system["content"].split("\nMemories:\n")
    assert who == "You are AI, a friendly assistant with a memory of past conversations with HUMAN."
    assert memories.startswith("On ") and memories.endswith(f'"\n\n{INSTRUCTION}')
    assert memories.count("On ") == len(turn.recalled) == MEMORIES  # the best two, of three
    assert 'May 2023:\nCaroline said: "' in memories and "<memory" not in memories
    best = max(turn.recalled, key=lambda block: block.score)
    assert f'Melanie said: "{best.lines[-1].text}"\n\n{INSTRUCTION}' in memories  # best last
    assert turn.cut == {"history_hints": 1}
    assert all(part in memories for part in turn.history_hints.split("\n\n"))
    assert turn.tokens["reply_limit"] == REPLY_TOKENS and llm.schemas == [None]
    assert "small prompt: small cannot read the full one" in turn.notes
    assert turn.response == "A gift from her grandma."


def test_without_memories_the_line_is_asked_as_it_is(memory) -> None:
    llm = SmallLLM(["Hi!", "Fine, thanks."])
    bot = Bot(memory, llm)
    bot.turn("hello there", user="sam", thread="t")
    bot.turn("how are you?", user="sam", thread="t")
    assert llm.history[1][1:] == [
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "how are you?"},
    ]


def test_what_this_thread_said_before_the_shown_lines_is_recalled(memory) -> None:
    """The small prompt shows the thread's last two lines; the lines before them, though
    within the bot's window_size, are searched: before, a fact said three lines back in the
    same thread was neither shown nor recalled, and the bot could not answer from it."""
    memory.configure_bot(threshold=0.05)
    llm = SmallLLM(["Hello Sam!", "Lovely.", "Nice.", "Miso."])
    bot = Bot(memory, llm)
    for text in ["I adopted a grey cat called Miso.", "She loves tuna.", "I play the cello."]:
        bot.turn(text, user="sam", thread="t")
    turn = bot.turn("What is my cat called?", user="sam", thread="t")
    system, *earlier, asked = llm.history[-1]
    assert "I adopted a grey cat called Miso." in system["content"]
    assert [message["content"] for message in earlier] == ["I play the cello.", "Nice."]
    assert asked["content"] == "What is my cat called?" and turn.response == "Miso."
    assert BotSettings().window_size > 2 * 3  # the cat line was within the window


def test_a_small_prompt_keeps_to_a_tight_budget(memory) -> None:
    furnish(memory)
    llm = SmallLLM(["ok"])
    turn = Bot(memory, llm).turn(
        "What was grandma's gift to Caroline? " * 20, user="caroline", thread="q",
        settings={"context_size": 200, "reply_tokens": 40},
    )  # fmt: skip
    assert turn.tokens["prompt"] <= 200 - 40
    assert turn.cut.get("history_hints", 0) >= 2


def test_a_model_that_reads_long_prompts_keeps_the_full_prompt(memory) -> None:
    furnish(memory)
    llm = ScriptedLLM(['{"response": "A necklace.", "citation_ids": []}'])
    turn = Bot(memory, llm).turn("What was grandma's gift?", user="caroline", thread="q")
    assert "<memory citation_id=" in turn.prompt and turn.tokens["reply_limit"] == 256
    assert not any("small prompt" in note for note in turn.notes)


def test_small_on_request_for_any_model(memory) -> None:
    furnish(memory)
    llm = ScriptedLLM(["A necklace."])
    turn = Bot(memory, llm).turn(
        "What was grandma's gift?", user="caroline", thread="q",
        settings={"prompt_style": "small"},
    )  # fmt: skip
    assert "\nMemories:\nOn " in llm.history[0][0]["content"]
    assert llm.schemas == [None] and turn.response == "A necklace."
    assert [line.role for line in memory.history(user="caroline", thread="q")] == [
        Role.HUMAN,
        Role.BOT,
    ]


def test_the_no_response_answers_an_empty_small_reply(memory) -> None:
    turn = Bot(memory, SmallLLM(["   "])).turn("hello", user="sam", thread="t")
    assert turn.response == DEFAULTS["no_response"]


class WordCounter:
    """Tokens as words: enough to size a prompt in a test."""

    def count(self, text: str) -> int:
        return len(text.split())


def test_the_small_prompt_prefers_the_memory_holding_the_questions_words() -> None:
    chat = block_hint("h1", 0.7, [("Caroline", "Hey Melanie! What's up?"),
                                  ("Melanie", "Hey Caroline, good to see you!")], 0)  # fmt: skip
    race = block_hint("h2", 0.5, [("Melanie", "I ran a charity race for mental health."),
                                  ("Caroline", "So proud of you!")], 0)  # fmt: skip
    weak = block_hint("h3", 0.4, [("Caroline", "Lovely weather for a race.")], 0)
    question = "What did Melanie's charity race raise awareness for?"
    prompt = assemble_small(BotSettings(), question, [], [chat, race, weak], [],
                            WordCounter(), now=NOW)  # fmt: skip
    system = prompt.messages[0]["content"]
    assert [hint.id for hint in prompt.history] == ["h2", "h3"]  # by question words, not score
    assert question_words(race, question, Speakers()) == 2  # charity, race; not the name
    assert "Hey Melanie" not in system
    # the memory holding most of the question's words is last, nearest the question
    assert system.endswith(f'Caroline said: "So proud of you!"\n\n{INSTRUCTION}')
    assert system.index("Lovely weather") < system.index("charity race")
    assert prompt.messages[-1] == {"role": "user", "content": question}


def test_a_memory_shows_what_people_said_not_the_bots_own_replies() -> None:
    chat = block_hint("h1", 0.6, [("Sam", "I just adopted a grey cat called Miso."),
                                  ("AI", "My cat is called Sam, a lovely tabby."),
                                  ("Sam", "She loves tuna.")], 0)  # fmt: skip
    shown = memory_text(chat, Speakers())
    assert shown == (f"On {THEN:%-d %B %Y}:\n"
                     'Sam said: "I just adopted a grey cat called Miso."\n'
                     'Sam said: "She loves tuna."')  # fmt: skip
    only_bot = block_hint("h2", 0.6, [("AI", "Welcome back!")], 0)
    assert memory_text(only_bot, Speakers()) == f'On {THEN:%-d %B %Y}:\nAI said: "Welcome back!"'


def test_a_block_matched_only_through_the_bots_reply_counts_no_question_words() -> None:
    echo = block_hint("h1", 0.7, [("Sam", "What is my cat called?"),
                                  ("AI", "My cat is called Sam.")], 1)  # fmt: skip
    fact = block_hint("h2", 0.5, [("Sam", "I just adopted a grey cat called Miso.")], 0)
    question = "What is my cat called?"
    assert question_words(echo, question, Speakers()) == 0
    assert question_words(fact, question, Speakers()) == 2  # cat, called
    prompt = assemble_small(BotSettings(), question, [], [echo, fact], [], WordCounter(),
                            now=NOW)  # fmt: skip
    assert [hint.id for hint in prompt.history] == ["h2", "h1"]  # the person's fact nearest


def test_asked_again_the_bots_earlier_answer_is_not_a_memory(make_memory, minilm) -> None:
    """A newcomer tells a fact, asks about it in a new thread and gets an invented answer,
    then asks again in another: the memories show the fact, not the invented answer."""
    memory: Memory = make_memory(embedder=minilm)
    llm = SmallLLM(["Nice!", "My cat is called Sam.", "Your cat is Miso."])
    bot = Bot(memory, llm)
    bot.turn("I just adopted a grey cat called Miso.", user="sam", thread="first", now=THEN)
    bot.turn("What is my cat called?", user="sam", thread="second", now=THEN)
    bot.turn("What is my cat called?", user="sam", thread="third", now=NOW)
    system = llm.history[-1][0]["content"]
    assert "grey cat called Miso" in system
    assert "Sam" not in system.split("Memories:")[1]  # neither the invented name nor a label


def test_a_matched_line_that_only_asks_counts_no_question_words() -> None:
    asked = block_hint("h1", 0.9, [("Sam", "Hello again!"), ("Sam", "When is my exam?")], 1)
    told = block_hint("h2", 0.4, [("Sam", "My exam is on 12 December. Wish me luck?")], 0)
    question = "When is my exam?"
    assert question_words(asked, question, Speakers()) == 0  # the question is not its answer
    assert question_words(told, question, Speakers()) == 1  # exam, in the sentence that states

"""Clean in, clean out (issue 30 item 6a): near-duplicate matches collapse into one, and a
question asked again gives way to the lines that answer it -- for every strategy, in a turn,
a preview and a benchmark's ranking."""

from __future__ import annotations

import json
from typing import Any

import pytest

from membot import Bot, BotSettings, Memory, Role, ScriptedLLM
from membot.index.vectors import Scope
from membot.recall.chat import ChatRecall, recall_for_turn, strategy_names
from membot.recall.duplicates import DUPLICATE_COSINE, is_question, normalised
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.store import ThreadKey

EXAM = "when is my exam?"
ANSWER = "My exam is on 12 December."


def settings_of(**values: Any) -> BotSettings:
    return BotSettings().with_values(values)


def recall(memory: Memory, text: str, settings: BotSettings, thread: str = "now") -> ChatRecall:
    """Recall for ``text`` said in ``thread``, as Memory.recall scopes it; the thread is
    forgotten after (later calls do not find the line)."""
    line = memory.add(text, user="alice", thread=thread)
    thread_id = memory.store.thread_id(ThreadKey("membot", "alice", thread)) or 0
    scope = Scope.of(memory.store.bot_id("membot") or 0, memory.store.person_id("alice"),
                     settings, feed=(thread_id, line.seq - settings.window_size))  # fmt: skip
    vector = memory.embed([text])[0]
    chosen = recall_for_turn(memory.recall_source, settings, text, vector, scope, said=text)
    memory.forget(user="alice", thread=thread)
    return chosen


def add(memory: Memory, thread: str, *lines: tuple[Role, str]) -> list[int]:
    return [memory.add(text, user="alice", thread=thread, role=role).id for role, text in lines]


def test_lines_are_compared_by_their_words() -> None:
    assert normalised("  When is my EXAM?? ") == normalised("when is my exam") == "when is my exam"
    assert normalised("When's my exam?") != normalised("when is my exam?")
    assert is_question("when is my exam") and is_question("So... my exam?")
    assert not is_question(ANSWER) and not is_question("")


@pytest.mark.parametrize("strategy", strategy_names())
def test_copies_of_a_line_are_one_match_and_free_the_other_slots(memory, strategy) -> None:
    """Four threads hold the same line; the fifth line recalls it once, saying it stands for
    three more, and the slots left take the next lines."""
    copies = [add(memory, f"t{n}", (Role.HUMAN, "My cat Miso loves tuna!"), (Role.BOT, "ok"))[0]
              for n in range(4)]  # fmt: skip
    others = add(memory, "t5", (Role.HUMAN, "Miso the cat sleeps on my bed"), (Role.BOT, "ok"))
    settings = settings_of(strategy=strategy, threshold=0.1, max_matches=2)
    chosen = recall(memory, "tell me about my cat Miso and tuna", settings)
    kept = [hit.line_id for hit in chosen.hits]
    (copy,) = [hit for hit in chosen.hits if hit.line_id in copies]
    assert copy.duplicates == 3
    assert others[0] in kept or strategy in ("pairs", "windows")  # units: a unit, not a line
    assert len(kept) == 2


def test_lines_whose_numbers_differ_never_collapse(memory) -> None:
    """Two lines alike but for a number are two facts (MiniLM scores such pairs 0.97)."""
    said = "my {} exam of the year is in the great hall of the old school up the hill in town"
    texts = [f"{said.format(day)} on December" for day in (12, 14)]
    first, second = (add(memory, thread, (Role.HUMAN, text))[0]
                     for thread, text in zip("ab", texts, strict=True))  # fmt: skip
    one, two = memory.embed(texts)
    assert float(one @ two) >= DUPLICATE_COSINE  # the hashing embedder: one word in 21
    chosen = recall(memory, "my exam December", settings_of(threshold=0.1))
    assert {hit.line_id for hit in chosen.hits} == {first, second}
    assert all(hit.duplicates == 0 for hit in chosen.hits)


@pytest.mark.parametrize("strategy", strategy_names())
def test_a_question_asked_again_gives_way_to_its_answer(memory, strategy) -> None:
    question = add(memory, "t1", (Role.HUMAN, "When is my exam?"), (Role.BOT, "Good luck"))[0]
    answer = add(memory, "t2", (Role.HUMAN, "I have my exam in December"), (Role.BOT, "Noted"))
    one_slot = settings_of(strategy=strategy, threshold=0.1, max_matches=1)
    (first,) = recall(memory, EXAM, one_slot).hits
    assert first.line_id == answer[0] or strategy in ("pairs", "windows")
    assert first.line_id != question
    # With room to spare, the question still comes back, after the answer, with its block.
    two_slots = settings_of(strategy=strategy, threshold=0.1, max_matches=2)
    kept = [hit.line_id for hit in recall(memory, EXAM, two_slots, thread="later").hits]
    assert kept[-1] == question


def test_a_statement_said_again_is_not_a_question_asked_again(memory) -> None:
    said = add(memory, "t1", (Role.HUMAN, ANSWER))[0]
    add(memory, "t2", (Role.HUMAN, "my exam is hard"))
    (first, _) = recall(memory, ANSWER, settings_of(threshold=0.1, max_matches=2)).hits
    assert first.line_id == said


def test_a_benchmark_ranks_the_copies_after_every_other_line(memory) -> None:
    copies = [add(memory, f"t{n}", (Role.HUMAN, "cat Miso likes tuna"))[0] for n in range(3)]
    other = add(memory, "t9", (Role.HUMAN, "cat Miso sleeps"))[0]
    bot_id, person_id = memory.store.bot_id("membot") or 0, memory.store.person_id("alice")
    settings = settings_for_ranking("blend")
    scope = Scope.of(bot_id, person_id)
    order = ranked_lines(memory.recall_source, settings, "cat Miso tuna", scope)
    assert order[:2] == [copies[-1], other]
    assert sorted(order[2:]) == copies[:2]


@pytest.mark.slow
def test_the_fifth_thread_recalls_the_exam_date_with_the_bundled_embedder(
    make_memory, minilm
) -> None:
    """Issue 30's case as a new user met it in the web app: "when is my exam?" asked in four
    threads (three answered "I don't know"), the date said in one of them; in a fifth the
    copies of the question filled the three matches and the date was not recalled."""
    memory: Memory = make_memory(embedder=minilm)
    llm = ScriptedLLM()
    bot = Bot(memory, llm)
    asked = (EXAM, "When is my exam?", "When's my exam?", "when is my exam??")
    for number, question in enumerate(asked):
        llm.enqueue(json.dumps({"response": "I don't know when your exam is.", "citation_ids": []}))
        bot.turn(question, user="sam", thread=f"chat-{number}")
        if number == 1:
            llm.enqueue(json.dumps({"response": "Noted, good luck!", "citation_ids": []}))
            bot.turn(ANSWER, user="sam", thread=f"chat-{number}")

    turn = bot.turn(EXAM, user="sam", thread="chat-5", dry_run=True)

    matched = [match.line.text for match in turn.matches]
    assert ANSWER in matched
    recalled = [line.text for block in turn.recalled for line in block.lines]
    assert ANSWER in recalled and ANSWER in turn.prompt
    trace = turn.to_json()["matches"]
    assert sum(match["duplicates"] for match in trace) >= 3  # the copies, each counted once
    replies = [match for match in trace if match["text"] == "I don't know when your exam is."]
    assert [match["duplicates"] for match in replies] in ([3], [])
    questions = [match for match in trace if match["role"] == "human" and "?" in match["text"]]
    assert all(match is trace[-1] for match in questions)  # a repeat comes last, if at all


def test_a_large_shared_scope_reads_the_vectors_from_the_store(make_memory, embedder) -> None:
    """A bot sharing memory across many lines is searched approximately (its vectors are not
    held in memory): the copies' vectors are read from the store, and still collapse."""
    memory: Memory = make_memory(embedder)
    memory.create_bot("shared", share_across_people=True)
    for number in range(3):
        memory.add("I keep bees on my roof!", user=f"p{number}", thread="t", bot="shared")
    memory.add("Bees sting sometimes", user="p9", thread="t", bot="shared")
    memory.recall_source.index.approximate.from_lines = 1  # every shared scope is large
    found = memory.preview_recall("bees on my roof", user="p0", bot="shared")
    assert found.matches[0].duplicates == 2
    assert memory.recall_source.index.scopes_held() == []  # none read into memory

"""Ending a conversation: the thread is marked ended and, with consent, its key points about
the person are kept as a ``summary`` memory after the bot's remember policy had its say."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from membot import ConfigError, Memory, Role, ScriptedLLM
from membot.errors import ProviderError
from membot.store import ThreadKey
from membot.turn.ending import (
    end_conversation,
    end_idle_threads,
    normalise_categories,
    read_points,
)

BOT = "membot"
MAY_1 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
ENDED = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
POINTS = {
    "points": [
        "2024-05-01: Alice is allergic to peanuts",
        "2024-05-01: Alice prefers green tea to coffee",
        "2024-05-02: Alice flies to Lisbon",
    ],
    "categories": ["Health", "preferences", "events"],
}
DRAFT = (
    "- 2024-05-01: Alice is allergic to peanuts\n"
    "- 2024-05-01: Alice prefers green tea to coffee\n"
    "- 2024-05-02: Alice flies to Lisbon"
)


def talk(memory: Memory, thread: str = "t1", user: str = "alice", start: datetime = MAY_1):
    said = [
        (Role.HUMAN, "I'm allergic to peanuts, so no satay for me."),
        (Role.BOT, "Noted, no peanuts."),
        (Role.HUMAN, "I prefer green tea to coffee. I fly to Lisbon tomorrow."),
        (Role.BOT, "Have a good flight!"),
    ]
    for minute, (role, text) in enumerate(said):
        memory.add(text, user=user, thread=thread, role=role, bot=BOT,
                   created_at=start + timedelta(minutes=minute))  # fmt: skip


def end(memory: Memory, llm: ScriptedLLM | None, remember: bool = True, thread: str = "t1"):
    return end_conversation(memory, llm, bot=BOT, user="alice", thread=thread,
                            remember=remember, now=ENDED)  # fmt: skip


def ended_at(memory: Memory, thread: str = "t1", user: str = "alice") -> datetime | None:
    state = memory.store.thread_state(ThreadKey(BOT, user, thread))
    assert state is not None
    return state.ended_at


def test_yes_keeps_the_dated_key_points_as_a_summary_with_categories(memory: Memory) -> None:
    memory.configure_bot(BOT, bot_name="Robo", human_name="Alice")
    talk(memory)
    reply = f"Sure! Here are the notes:\n```json\n{json.dumps(POINTS)}\n```\nAnything else?"
    llm = ScriptedLLM([reply])

    ending = end(memory, llm)

    assert (ending.decision, ending.reason) == ("kept", "no remember policy")
    assert ending.ended_at == ENDED and ended_at(memory) == ENDED
    assert llm.json_modes == [True]
    ((request,),) = llm.history
    assert "[2024-05-01 10:00 UTC] Alice: I'm allergic to peanuts" in request["content"]
    assert "[2024-05-01 10:01 UTC] Robo: Noted, no peanuts." in request["content"]
    assert '{"points": [' in request["content"] and "absolute date" in request["content"]
    (kept,) = memory.summaries(user="alice")
    assert kept == ending.remembered
    assert kept.to_json() | {"id": 0, "created_at": ""} == {
        "id": 0,
        "kind": "summary",
        "bot": BOT,
        "user": "alice",
        "thread": "t1",
        "text": DRAFT,
        "categories": ["health", "preferences", "events"],
        "created_at": "",
        "covers_from": "2024-05-01T10:00:00Z",
        "covers_to": "2024-05-01T10:03:00Z",
    }
    assert kept.to_json()["created_at"].endswith("Z")
    assert ending.to_json()["remembered"]["text"] == DRAFT


def test_a_later_search_finds_the_summary(memory: Memory) -> None:
    talk(memory)
    end(memory, ScriptedLLM([json.dumps(POINTS)]))
    query = memory.embed(["Is Alice allergic to peanuts?"])[0]

    found = memory.search_summaries(query, bot=BOT, user="alice", k=3, min_score=-1)

    assert [summary.text for summary, _ in found] == [DRAFT]
    assert found[0][1] > 0.3
    assert memory.search_summaries(query, bot=BOT, user="bob", k=3, min_score=-1) == []


def test_a_point_the_model_left_undated_gets_the_conversations_date(memory: Memory) -> None:
    talk(memory)
    points = ["- Alice likes green tea", "2024: flies to Lisbon"]
    reply = json.dumps({"points": points, "categories": []})

    ending = end(memory, ScriptedLLM([reply]))

    assert ending.remembered is not None
    assert ending.remembered.text == "- 2024-05-01: Alice likes green tea\n- 2024: flies to Lisbon"
    assert ending.remembered.categories == ()


def test_no_derives_nothing_and_calls_no_model(memory: Memory) -> None:
    talk(memory)
    llm = ScriptedLLM([json.dumps(POINTS)])

    ending = end(memory, llm, remember=False)

    assert ending.decision == "not asked to remember" and ending.remembered is None
    assert llm.history == [] and ending.llm_calls == ()
    assert memory.summaries(user="alice") == []
    assert ended_at(memory) == ENDED
    assert len(memory.history(user="alice", thread="t1")) == 4  # the lines stay


@pytest.mark.parametrize(
    "reply",
    ["Alice likes tea and is allergic to peanuts.", '{"points": "', '{"notes": ["x"]}', ""],
)
def test_an_unreadable_reply_keeps_nothing_without_crashing(memory: Memory, reply: str) -> None:
    talk(memory)

    ending = end(memory, ScriptedLLM([reply]))

    assert ending.decision == "dropped" and ending.remembered is None
    assert "unreadable" in ending.reason
    assert memory.summaries(user="alice") == []
    assert ended_at(memory) == ENDED
    assert ending.llm_calls[0].reply == reply


def test_no_points_keeps_nothing(memory: Memory) -> None:
    talk(memory)

    ending = end(memory, ScriptedLLM(['{"points": [], "categories": []}']))

    assert ending.decision == "dropped" and "nothing about the person" in ending.reason
    assert memory.summaries(user="alice") == []


def test_a_policy_that_drops_keeps_nothing(memory: Memory) -> None:
    memory.configure_bot(BOT, remember_policy="never keep health details")
    talk(memory)
    verdict = {"decision": "drop", "summary": "", "reason": "the notes are about health"}
    llm = ScriptedLLM([json.dumps(POINTS), json.dumps(verdict)])

    ending = end(memory, llm)

    assert (ending.decision, ending.reason) == ("dropped", "the notes are about health")
    assert ending.remembered is None and memory.summaries(user="alice") == []
    assert ending.draft == DRAFT and ending.policy == "never keep health details"
    assert llm.json_modes == [True, True]
    check = llm.history[1][0]["content"]
    assert "never keep health details" in check and DRAFT in check
    assert [call.purpose for call in ending.llm_calls] == ["points", "policy"]


def test_a_policy_that_trims_keeps_the_trimmed_text(memory: Memory) -> None:
    memory.configure_bot(BOT, remember_policy="never keep health details")
    talk(memory)
    verdict = {
        "decision": "trim",
        "summary": "- 2024-05-01: Alice prefers green tea to coffee\n- 2024-05-02: Alice flies "
        "to Lisbon",
        "categories": ["preferences", "events"],
        "reason": "the allergy is a health detail",
    }
    llm = ScriptedLLM([json.dumps(POINTS), f"```json\n{json.dumps(verdict)}\n```"])

    ending = end(memory, llm)

    assert ending.decision == "trimmed" and ending.reason == "the allergy is a health detail"
    (kept,) = memory.summaries(user="alice")
    assert kept.text == verdict["summary"]
    assert "peanuts" not in kept.text
    assert kept.categories == ("preferences", "events")


def test_a_policy_that_keeps_stores_the_draft(memory: Memory) -> None:
    memory.configure_bot(BOT, remember_policy="never keep bank details")
    talk(memory)
    verdict = {"decision": "keep", "summary": "whatever", "reason": "no bank details"}

    ending = end(memory, ScriptedLLM([json.dumps(POINTS), json.dumps(verdict)]))

    assert ending.decision == "kept"
    assert [summary.text for summary in memory.summaries(user="alice")] == [DRAFT]


def test_a_trim_that_leaves_nothing_is_a_drop(memory: Memory) -> None:
    memory.configure_bot(BOT, remember_policy="never keep anything")
    talk(memory)
    verdict = {"decision": "trim", "summary": "", "reason": "all of it"}

    ending = end(memory, ScriptedLLM([json.dumps(POINTS), json.dumps(verdict)]))

    assert ending.decision == "dropped" and "nothing was left" in ending.reason
    assert memory.summaries(user="alice") == []


@pytest.mark.parametrize(
    "verdict",
    [
        "I think it is fine.",
        '{"decision": "maybe", "summary": "x"}',
        "{}",
        # the bundled SmolLM2's answer: the instruction's own wording, judging nothing
        '{"decision": "keep", "summary": "the notes, one point a line starting with - ", '
        '"categories": ["..."], "reason": "which part of the policy applied"}',
        '{"decision": "keep", "summary": "", "categories": [], '
        '"reason": "which part of the policy applied, in one sentence"}',
    ],
)
def test_an_unreadable_policy_check_fails_closed(memory: Memory, verdict: str) -> None:
    memory.configure_bot(BOT, remember_policy="never keep health details")
    talk(memory)

    ending = end(memory, ScriptedLLM([json.dumps(POINTS), verdict]))

    assert ending.decision == "dropped" and ending.remembered is None
    assert "policy check could not be read" in ending.reason
    assert memory.summaries(user="alice") == []


@pytest.mark.parametrize(
    ("policy", "fails_at"),
    [("", 0), ("never keep health details", 0), ("never keep health details", 1)],
)
def test_a_provider_error_keeps_nothing_but_ends_the_thread(
    memory: Memory, policy: str, fails_at: int
) -> None:
    memory.configure_bot(BOT, remember_policy=policy)
    talk(memory)
    replies = [json.dumps(POINTS)] * fails_at + ["!error the model is down"]

    ending = end(memory, ScriptedLLM(replies))

    assert ending.decision == "dropped" and ending.remembered is None
    assert "the model is down" in ending.reason
    assert ending.llm_calls[-1].error == "the model is down"
    assert memory.summaries(user="alice") == []
    assert ended_at(memory) == ENDED


def test_idle_timeout_ends_only_old_threads_and_remembers_nothing(memory: Memory) -> None:
    memory.configure_bot(BOT, idle_timeout_minutes=60)
    now = MAY_1 + timedelta(hours=3)
    talk(memory, "old")  # last line at 10:03, three hours before now
    talk(memory, "recent", start=now - timedelta(minutes=30))
    talk(memory, "bobs", user="bob")
    llm = ScriptedLLM([json.dumps(POINTS)])

    endings = end_idle_threads(memory, llm, bot=BOT, now=now)

    assert sorted((e.user, e.thread, e.decision) for e in endings) == [
        ("alice", "old", "not asked to remember"),
        ("bob", "bobs", "not asked to remember"),
    ]
    assert ended_at(memory, "old") == now and ended_at(memory, "recent") is None
    assert llm.history == [] and memory.summaries(user="alice") == []
    assert end_idle_threads(memory, llm, bot=BOT, now=now) == []  # already ended


def test_a_thread_taken_up_while_idle_threads_are_ended_stays_open(memory: Memory) -> None:
    """The idle threads were listed once, then each ended: one the person came back to while
    an earlier one's key points were written was ended (and summarised) mid-conversation."""
    memory.configure_bot(BOT, idle_timeout_minutes=60)
    now = MAY_1 + timedelta(hours=3)
    talk(memory, "a")
    talk(memory, "b", start=MAY_1 + timedelta(minutes=10))

    class ComesBack(ScriptedLLM):
        def complete(self, messages, max_tokens, *, schema=None):
            if not self.history:  # while thread a's key points are written
                memory.add("I'm back", user="alice", thread="b", bot=BOT, created_at=now)
            return super().complete(messages, max_tokens, schema=schema)

    llm = ComesBack([json.dumps(POINTS)] * 4)
    endings = end_idle_threads(memory, llm, bot=BOT, now=now, remember=True)
    assert [ending.thread for ending in endings] == ["a"]
    assert ended_at(memory, "a") == now and ended_at(memory, "b") is None


def test_two_endings_of_one_thread_at_once_keep_one_summary(memory: Memory) -> None:
    """The person's /end and end-idle both asked to remember: each checked "already
    remembered" before writing its points, and both kept a summary."""
    talk(memory)
    other = ScriptedLLM([json.dumps(POINTS)] * 2)

    class EndedMeanwhile(ScriptedLLM):
        def complete(self, messages, max_tokens, *, schema=None):
            if not self.history:  # while this ending's key points are written
                end(memory, other)
            return super().complete(messages, max_tokens, schema=schema)

    ending = end(memory, EndedMeanwhile([json.dumps(POINTS)] * 2))
    assert ending.decision == "already remembered" and ending.remembered is None
    assert len(memory.summaries(user="alice")) == 1


def test_idle_ending_can_be_limited_to_one_person_or_switched_off(memory: Memory) -> None:
    talk(memory, "old")
    talk(memory, "bobs", user="bob")
    later = MAY_1 + timedelta(days=1)

    (alice,) = end_idle_threads(memory, None, bot=BOT, user="alice", now=later)
    assert (alice.user, alice.thread) == ("alice", "old")
    assert ended_at(memory, "bobs", user="bob") is None

    memory.configure_bot(BOT, idle_timeout_minutes=0)
    assert end_idle_threads(memory, None, bot=BOT, now=later) == []
    assert ended_at(memory, "bobs", user="bob") is None


def test_ending_an_unknown_or_empty_thread_says_so(memory: Memory) -> None:
    talk(memory)

    with pytest.raises(ConfigError, match="'alice' has no thread 'nope' with bot 'membot'"):
        end(memory, ScriptedLLM(), thread="nope")
    with pytest.raises(ConfigError, match="has no thread"):
        end_conversation(memory, None, bot=BOT, user="carol", thread="t1", remember=False)
    with pytest.raises(ConfigError, match="needs an LLM"):
        end(memory, None, remember=True)
    assert ended_at(memory) is None


def test_remembering_twice_keeps_one_summary_until_more_is_said(memory: Memory) -> None:
    talk(memory)
    llm = ScriptedLLM([json.dumps(POINTS)])
    first = end(memory, llm)

    again = end(memory, llm)

    assert again.decision == "already remembered" and again.remembered is None
    assert again.ended_at == first.ended_at == ENDED
    assert len(llm.history) == 1 and len(memory.summaries(user="alice")) == 1
    memory.add("And I moved to Porto.", user="alice", thread="t1", bot=BOT,
               created_at=MAY_1 + timedelta(hours=5))  # fmt: skip
    assert ended_at(memory) is None  # a new line takes the conversation up again
    llm.enqueue(json.dumps({"points": ["2024-05-01: Alice moved to Porto", *POINTS["points"]]}))

    later = end(memory, llm)

    # Only what was said since is read, and what was kept the first time is not kept twice.
    assert later.decision == "kept" and later.remembered is not None
    assert later.remembered.text == "- 2024-05-01: Alice moved to Porto"
    assert later.remembered.covers_from == later.remembered.covers_to == MAY_1 + timedelta(hours=5)
    transcript = llm.history[-1][0]["content"].split("<transcript>")[1]
    assert "Porto" in transcript and "peanuts" not in transcript
    assert any("remembered through 2024-05-01T10:03" in note for note in later.notes)
    assert len(memory.summaries(user="alice")) == 2


def test_a_long_thread_is_cut_to_fit_with_its_running_summary(memory: Memory) -> None:
    memory.configure_bot(BOT, context_size=1024)
    for minute in range(60):
        memory.add(f"Line number {minute} about my garden and the roses in it.", user="alice",
                   thread="t1", bot=BOT, created_at=MAY_1 + timedelta(minutes=minute))  # fmt: skip
    state = memory.store.thread_state(ThreadKey(BOT, "alice", "t1"))
    assert state is not None
    memory.store.save_thread_summary(state.id, "Alice talked about her garden.", 30)
    llm = ScriptedLLM([json.dumps(POINTS)])

    ending = end(memory, llm)

    content = llm.history[0][0]["content"]
    assert "Line number 59 about" in content and "Line number 0 about" not in content
    assert "(Earlier, in summary: <summary>Alice talked about her garden.</summary>)" in content
    cut, *unsaid = ending.notes  # the points are about peanuts and tea, never said here
    assert cut.startswith("the transcript was cut to its last ") and "of 60 lines" in cut
    assert len(unsaid) == 3 and all(note.startswith("left out a point (") for note in unsaid)
    assert ending.decision == "dropped" and memory.summaries(user="alice") == []
    assert memory.tokens.count(content) <= 1024 - 500


def test_categories_are_short_lowercase_words() -> None:
    raw = ["Health", "health", "work_life", "  Family  ", "x" * 40, "42", "café", 7, "events",
           "plans", "hobbies"]  # fmt: skip
    assert normalise_categories(raw) == ("health", "work life", "family", "events", "plans")
    assert normalise_categories("Preferences, Events") == ("preferences", "events")
    assert normalise_categories(None) == ()
    assert read_points('{"points": "- a\\n- b", "categories": "events"}') == (
        ["a", "b"],
        ("events",),
    )


def test_a_point_the_person_never_said_is_not_kept(memory: Memory) -> None:
    talk(memory)
    points = [
        "2024-05-01: Alice is allergic to peanuts",
        "2024-05-01: Alice owns three cats and a parrot",  # the model made it up
        "2024-05-01: Alice enjoys satay",  # one word of two she said, the other the opposite
    ]
    llm = ScriptedLLM([json.dumps({"points": points, "categories": ["health"]})])

    ending = end(memory, llm)

    assert ending.decision == "kept" and ending.remembered is not None
    assert ending.remembered.text == "- 2024-05-01: Alice is allergic to peanuts"
    assert any("three cats" in note for note in ending.notes)


def test_nothing_is_kept_when_no_point_was_said(memory: Memory) -> None:
    talk(memory)
    points = ["2024-05-01: Alice owns three cats", "2024-05-01: Alice works as a pilot"]
    llm = ScriptedLLM([json.dumps({"points": points, "categories": []})])

    ending = end(memory, llm)

    assert ending.decision == "dropped" and ending.remembered is None
    assert "supported by what the person said" in ending.reason
    assert memory.summaries(user="alice") == []


def test_a_trimmed_summary_is_held_to_the_lines_too(memory: Memory) -> None:
    memory.configure_bot(BOT, remember_policy="Never keep anything about health.")
    talk(memory)
    trimmed = "- 2024-05-01: Alice prefers green tea\n- 2024-05-01: Alice is a famous chess player"
    check = {"decision": "trim", "summary": trimmed, "categories": ["preferences"],
             "reason": "health left out"}  # fmt: skip
    llm = ScriptedLLM([json.dumps(POINTS), json.dumps(check)])

    ending = end(memory, llm)

    assert ending.decision == "trimmed" and ending.remembered is not None
    assert ending.remembered.text == "- 2024-05-01: Alice prefers green tea"


def test_points_are_checked_by_words_alone_when_the_embedder_fails(memory: Memory) -> None:
    talk(memory)
    points = ["2024-05-01: Alice is allergic to peanuts", "2024-05-01: Alice owns three cats"]
    llm = ScriptedLLM([json.dumps({"points": points, "categories": []})])

    def broken(texts, keep=True):  # Memory.embed's signature
        raise ProviderError("the embedder is down")

    memory.embed = broken
    ending = end(memory, llm)

    assert any("words only: the embedder is down" in note for note in ending.notes)
    assert ending.draft == "- 2024-05-01: Alice is allergic to peanuts"
    assert ending.remembered is None  # the summary itself could not be embedded either
    assert ending.decision == "dropped" and "could not be embedded" in ending.reason


def test_a_model_that_cannot_write_key_points_keeps_the_persons_own_statements(
    memory: Memory,
) -> None:
    llm = ScriptedLLM([])  # any call would fail: none is made
    llm.writes_summaries = False  # as the bundled SmolLM2 declares
    talk(memory)

    ending = end(memory, llm)

    assert ending.decision == "kept" and ending.llm_calls == ()
    assert ending.remembered is not None
    assert ending.remembered.text == (
        "- 2024-05-01: alice said: I'm allergic to peanuts, so no satay for me.\n"
        "- 2024-05-01: alice said: I prefer green tea to coffee. I fly to Lisbon tomorrow."
    )
    assert any("own statements" in note for note in ending.notes)


def test_kept_points_name_the_person_as_named_and_still_pass_the_grounding_check(
    memory: Memory,
) -> None:
    """Issue 32: the points read "Student said: My name is Ana", the bot's word for anyone.
    They name the person now, and the check that holds a point to its lines still keeps it
    (the name is a speaker's, not a name nobody said)."""
    memory.configure_bot(BOT, human_name="Student")
    memory.add("My name is Ana and I teach maths in Porto.", user="Ana", thread="t1", bot=BOT,
               created_at=MAY_1)  # fmt: skip
    llm = ScriptedLLM([])
    llm.writes_summaries = False

    ending = end_conversation(memory, llm, bot=BOT, user="Ana", thread="t1", remember=True,
                              now=ENDED)  # fmt: skip

    assert ending.decision == "kept" and ending.remembered is not None
    assert (
        ending.remembered.text
        == "- 2024-05-01: Ana said: My name is Ana and I teach maths in Porto."
    )


def test_with_a_remember_policy_a_model_that_cannot_check_it_keeps_nothing(
    memory: Memory,
) -> None:
    memory.configure_bot(BOT, remember_policy="never keep health details")
    llm = ScriptedLLM([])
    llm.writes_summaries = llm.checks_remember_policy = False
    talk(memory)

    ending = end(memory, llm)

    assert ending.decision == "dropped" and ending.remembered is None
    assert "cannot check key points against it" in ending.reason
    assert memory.summaries(user="alice") == []


def test_the_wording_a_copied_policy_check_repeats_is_the_instructions_own() -> None:
    from membot.turn.ending import _SHAPE_REASON, _SHAPE_SUMMARY, POLICY_INSTRUCTION

    assert _SHAPE_SUMMARY in POLICY_INSTRUCTION and _SHAPE_REASON in POLICY_INSTRUCTION


def test_a_thread_taken_up_only_by_the_bot_calls_no_model_and_says_why(memory: Memory) -> None:
    talk(memory)
    llm = ScriptedLLM([json.dumps(POINTS)])
    end(memory, llm)
    memory.add("A reminder: your flight leaves at 9.", user="alice", thread="t1", bot=BOT,
               role=Role.BOT, created_at=MAY_1 + timedelta(hours=5))  # fmt: skip

    again = end(memory, llm)

    assert again.decision == "dropped" and len(llm.history) == 1
    assert again.reason == "the person said nothing since the thread was last remembered"


def test_a_model_writing_key_points_is_asked_about_the_person_by_name(memory: Memory) -> None:
    """The model reads the person's lines under their name, so its points name them, and
    the grounding check keeps a point that does (a bot's human_name "Student" is anyone)."""
    memory.configure_bot(BOT, bot_name="Robo", human_name="Student")
    talk(memory)
    points = {"points": ["2024-05-01: alice is allergic to peanuts"], "categories": []}
    llm = ScriptedLLM([json.dumps(points)])

    ending = end(memory, llm)

    ((request,),) = llm.history
    assert "between alice (the person)" in request["content"]
    assert "] alice: I'm allergic to peanuts" in request["content"]
    assert "Student" not in request["content"]
    assert ending.decision == "kept" and ending.remembered is not None
    assert ending.remembered.text == "- 2024-05-01: alice is allergic to peanuts"

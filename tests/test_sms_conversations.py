"""Text conversations (membot.service.text_messages): the pure parts, and the flow over a real
store with a
scripted model."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import count, pairwise

import pytest

from membot import Bot, ConfigError, ConflictError, Memory, ScriptedLLM, StoreError, utc_now
from membot.service import (
    IncomingText,
    TextConversations,
    bot_for_sms_number,
    claim_sms,
    record_sms_answer,
    sms_sender_name,
    split_sms,
)
from membot.service.text_messages import (
    EMPTY,
    KEPT,
    MEDIA_ONLY,
    MESSAGE_LIMIT,
    NOT_KEPT,
    QUESTION,
    TAKEN_AS_NO,
    UNANSWERED,
    consent,
    keyword,
    units,
)

NUMBER = "+15550100001"
BOT_NUMBER = "+15550109999"
SECRET = "a test secret of more than sixteen characters"
# Undated: membot dates it by the thread's last line (a point must fall within the thread).
POINTS = json.dumps({"points": ["Sam runs on Sundays"], "categories": ["hobbies"]})

# -- cutting replies ----------------------------------------------------------------------


def test_a_short_reply_is_one_text():
    assert split_sms("  Hello there.  ") == ["Hello there."]
    assert split_sms("   ") == []


def test_a_long_reply_is_cut_after_sentences_within_the_limit():
    sentences = [f"Sentence number {i} says something useful about running." for i in range(80)]
    text = " ".join(sentences)
    assert len(text) > MESSAGE_LIMIT
    parts = split_sms(text)
    assert len(parts) >= 3
    assert all(units(part) <= MESSAGE_LIMIT for part in parts)
    assert all(part.endswith(".") for part in parts)  # each ends where a sentence ends
    assert " ".join(parts) == text  # nothing lost, nothing added
    # Sentences share a text while they fit: no text could have taken the next sentence.
    for part, following in pairwise(parts):
        first_sentence = following.split(". ")[0] + "."
        assert units(f"{part} {first_sentence}") > MESSAGE_LIMIT


def test_lines_end_sentences_too_and_a_limit_can_be_given():
    parts = split_sms("First line without a stop\nSecond line also without one", limit=30)
    assert parts == ["First line without a stop", "Second line also without one"]


def test_a_sentence_longer_than_a_text_is_cut_between_words():
    sentence = " ".join(["word"] * 500) + "."
    parts = split_sms(sentence)
    assert all(units(part) <= MESSAGE_LIMIT for part in parts)
    assert all(set(part.split()) <= {"word", "word."} for part in parts)
    assert " ".join(parts) == sentence


def test_a_word_longer_than_a_text_is_cut_anywhere():
    parts = split_sms("x" * 4000)
    assert [len(part) for part in parts] == [1600, 1600, 800]


def test_characters_are_counted_as_twilio_counts_them():
    assert units("é") == 1 and units("😀") == 2  # outside the BMP: two UTF-16 units
    parts = split_sms("😀" * 1000)  # 2000 units
    assert [units(part) for part in parts] == [1600, 400]


# -- keywords -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ("STOP", "stop"),
        (" stop! ", "stop"),
        ("Unsubscribe", "stop"),
        ("quit", "stop"),
        ("START", "start"),
        ("unstop", "start"),
        ("help", "help"),
        ("INFO?", "help"),
        ("stop please", None),  # Twilio reads only a keyword alone
        ("please stop", None),
        ("helpful", None),
        ("", None),
    ],
)
def test_keywords_are_whole_texts(body, word):
    assert keyword(body) == word


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        ("YES", True),
        ("yes please", True),
        ("Yeah!", True),
        ("ok", True),
        ("No", False),
        ("nope, thanks", False),
        ("maybe", None),
        ("what conversation?", None),
        ("", None),
    ],
)
def test_consent_is_read_from_the_first_word(body, answer):
    assert consent(body) is answer


# -- who is texting -------------------------------------------------------------------------


def test_the_sender_is_a_keyed_hash_of_the_number():
    name = sms_sender_name(NUMBER, SECRET)
    assert name.startswith("sms-") and len(name) == 4 + 32
    assert "5550100001" not in name
    assert sms_sender_name(NUMBER, SECRET) == name  # the same person every time
    assert sms_sender_name(NUMBER, SECRET + "!") != name  # keyed: another secret, another name
    assert sms_sender_name("+15550100002", SECRET) != name
    with pytest.raises(ConfigError, match="16 characters"):
        sms_sender_name(NUMBER, "short")


# -- bots' numbers --------------------------------------------------------------------------


def test_a_bot_is_found_by_its_number(memory: Memory):
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    memory.create_bot("other")
    assert bot_for_sms_number(memory, BOT_NUMBER) == "coach"
    assert bot_for_sms_number(memory, "+15550100000") is None


@pytest.mark.parametrize("number", ["5550100", "+1 555 010 0000", "+0123", "+1234567890123456"])
def test_a_number_not_in_e164_is_refused(memory: Memory, number):
    with pytest.raises(ConfigError, match=r"E\.164"):
        memory.create_bot("coach", sms_number=number)
    assert not memory.has_bot("coach")


def test_two_bots_cannot_share_a_number(memory: Memory):
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    memory.configure_bot("coach", sms_number=BOT_NUMBER)  # setting its own number again is fine
    with pytest.raises(ConflictError, match="coach"):
        memory.create_bot("barista", sms_number=BOT_NUMBER)
    memory.create_bot("barista")
    with pytest.raises(ConflictError, match="one number, one bot"):
        memory.configure_bot("barista", sms_number=BOT_NUMBER)
    with pytest.raises(ConflictError):
        memory.replace_profile("barista", {"sms_number": BOT_NUMBER})
    assert memory.bot_settings("barista").sms_number == ""


# -- the conversation -----------------------------------------------------------------------


class Texter:
    """One person texting one bot: each text gets a new MessageSid, like Twilio's."""

    def __init__(self, memory: Memory, llm: ScriptedLLM, number: str = NUMBER) -> None:
        self.memory = memory
        self.llm = llm
        self.sender = sms_sender_name(number, SECRET)
        self.conversations = TextConversations(Bot(memory, llm, "coach"))
        self._sids = count(1)
        self.last: IncomingText | None = None

    def text(self, body: str, *, media: int = 0, later: timedelta = timedelta(0)) -> list[str]:
        self.last = IncomingText(f"SM{next(self._sids):032d}", "coach", self.sender, body, media)
        return self.conversations.answer(self.last, now=utc_now() + later)

    def lines(self) -> list[tuple[str, str, str]]:
        return [
            (line.thread, str(line.role), line.text)
            for line in self.memory.history(user=self.sender, bot="coach")
        ]

    def threads(self) -> list[str]:
        return [thread.name for thread in self.memory.threads(user=self.sender, bot="coach")]


@pytest.fixture
def texter(memory: Memory) -> Texter:
    memory.create_bot("coach", bot_name="Cy", sms_number=BOT_NUMBER, idle_timeout_minutes=60)
    return Texter(memory, ScriptedLLM())


def test_a_text_is_a_turn_under_the_hashed_sender(texter: Texter, tmp_path):
    texter.llm.enqueue("Hi Sam! Sundays are a fine day to run.")
    assert texter.text("Hi, I'm Sam and I run on Sundays.") == [
        "Hi Sam! Sundays are a fine day to run."
    ]
    (thread,) = texter.threads()
    assert texter.lines() == [
        (thread, "human", "Hi, I'm Sam and I run on Sundays."),
        (thread, "bot", "Hi Sam! Sundays are a fine day to run."),
    ]
    texter.memory.close()
    stored = (tmp_path / "memory.db").read_bytes()
    assert b"5550100001" not in stored  # the number is nowhere in the store
    assert texter.sender.encode() in stored


def test_a_text_whose_sender_is_forgotten_while_it_is_answered_gets_no_answer(texter: Texter):
    def forgotten_then_failed(messages, max_tokens, *, schema=None):  # type: ignore[no-untyped-def]
        texter.memory.forget(user=texter.sender)
        raise RuntimeError("a bug met after the forget")

    texter.llm.complete = texter.llm.stream = forgotten_then_failed  # type: ignore[method-assign]
    assert texter.text("Hi, I'm Sam.") == []  # no traceback, no apology for a kept line
    assert texter.lines() == []


def test_the_next_text_goes_on_in_the_same_thread(texter: Texter):
    texter.llm.enqueue("One.", "Two.")
    texter.text("first")
    assert texter.text("second", later=timedelta(minutes=59)) == ["Two."]
    assert len(texter.threads()) == 1 and len(texter.lines()) == 4


def test_a_long_reply_comes_back_in_several_texts(texter: Texter):
    reply = " ".join(f"Point {i} of a long training plan for you." for i in range(100))
    texter.llm.enqueue(reply)
    parts = texter.text("Give me a plan")
    assert len(parts) > 1 and all(units(part) <= MESSAGE_LIMIT for part in parts)
    assert " ".join(parts) == reply
    assert texter.lines()[-1][2] == reply  # stored whole


def test_stop_silences_until_start(texter: Texter):
    texter.llm.enqueue("Hello.")
    texter.text("hello")
    assert texter.text("STOP") == []
    before = texter.lines()
    assert texter.text("are you there?") == []
    assert texter.text("HELP") == []  # silenced means silenced
    assert texter.lines() == before  # nothing stored while silenced
    assert texter.text("start") == []  # Twilio confirms START itself
    texter.llm.enqueue("Welcome back.")
    assert texter.text("are you there?") == ["Welcome back."]
    assert len(texter.lines()) == len(before) + 2
    assert len(texter.llm.history) == 2  # no model call while silenced


def test_yes_alone_also_ends_the_silence(texter: Texter):
    texter.text("stop")
    assert texter.text("Yes") == []
    texter.llm.enqueue("Hi.")
    assert texter.text("hi") == ["Hi."]


def test_help_media_and_empty_texts_store_nothing(texter: Texter):
    (help_text,) = texter.text("help")
    assert "Cy" in help_text and "STOP" in help_text and "60 minutes" in help_text
    assert texter.text("", media=1) == [MEDIA_ONLY]
    assert texter.text("  ") == [EMPTY]
    assert texter.lines() == [] and texter.llm.history == []


def test_a_text_with_media_and_words_is_a_turn(texter: Texter):
    texter.llm.enqueue("Nice picture.")
    assert texter.text("look at my run", media=2) == ["Nice picture."]


def test_a_failing_model_gets_an_apology_and_the_text_is_kept(texter: Texter):
    texter.llm.enqueue("!error the model is down")
    assert texter.text("hello?") == [UNANSWERED]
    assert [text for _, _, text in texter.lines()] == ["hello?"]


def test_a_turn_failing_after_the_text_is_stored_gets_the_apology(texter: Texter, monkeypatch):
    """A busy store after the text was stored raised out of the webhook (an error page to
    Twilio, nothing texted back); the text is kept, as the apology says."""

    def busy(*args, **kwargs):
        raise StoreError("the store failed: busy")

    monkeypatch.setattr(texter.memory, "recall", busy)
    assert texter.text("hello?") == [UNANSWERED]
    assert [text for _, _, text in texter.lines()] == ["hello?"]


def test_the_same_text_is_never_stored_twice(texter: Texter):
    texter.llm.enqueue("Hi.")
    texter.text("hello")
    assert texter.last is not None
    assert texter.conversations.answer(texter.last) == []  # its line's source key is held
    assert len(texter.lines()) == 2 and len(texter.llm.history) == 1


def _idle_then(texter: Texter, body: str) -> list[str]:
    texter.llm.enqueue("Noted, Sam.")
    texter.text("I'm Sam and I run on Sundays.")
    return texter.text(body, later=timedelta(minutes=61))


def test_after_an_idle_thread_the_bot_asks_first_and_holds_the_text(texter: Texter):
    assert _idle_then(texter, "What should I run this week?") == [QUESTION]
    (old,) = texter.threads()
    assert texter.memory.thread_state(bot="coach", user=texter.sender, thread=old).ended_at
    assert [text for _, _, text in texter.lines()] == [
        "I'm Sam and I run on Sundays.",
        "Noted, Sam.",
    ]
    # YES: the key points are kept, then the held text is answered in a new thread.
    texter.llm.enqueue(POINTS, "Ten kilometres on Sunday.")
    assert texter.text("YES") == [KEPT, "Ten kilometres on Sunday."]
    old, new = texter.threads()
    assert texter.lines()[-2:] == [
        (new, "human", "What should I run this week?"),
        (new, "bot", "Ten kilometres on Sunday."),
    ]
    (summary,) = texter.memory.summaries(user=texter.sender, bot="coach")
    assert summary.thread == old and "Sundays" in summary.text
    texter.llm.enqueue("Sure.")
    assert texter.text("thanks", later=timedelta(minutes=1)) == ["Sure."]  # asked once


def test_no_keeps_nothing_and_answers_the_held_text(texter: Texter):
    _idle_then(texter, "What should I run this week?")
    texter.llm.enqueue("Ten kilometres.")
    assert texter.text("no") == [NOT_KEPT, "Ten kilometres."]
    assert texter.memory.summaries(user=texter.sender, bot="coach") == []
    assert len(texter.llm.history) == 2  # no call to write key points


def test_anything_else_counts_as_no_and_both_texts_are_said(texter: Texter):
    _idle_then(texter, "What should I run this week?")
    texter.llm.enqueue("Start with five kilometres.")
    assert texter.text("what conversation?") == [TAKEN_AS_NO, "Start with five kilometres."]
    _old, new = texter.threads()
    assert texter.lines()[-3:] == [
        (new, "human", "What should I run this week?"),
        (new, "human", "what conversation?"),
        (new, "bot", "Start with five kilometres."),
    ]
    assert texter.memory.summaries(user=texter.sender, bot="coach") == []
    assert "What should I run this week?" in json.dumps(texter.llm.history[-1])  # in the feed


def test_help_and_stop_leave_the_question_open(texter: Texter):
    _idle_then(texter, "What now?")
    assert "STOP" in texter.text("help")[0]
    texter.llm.enqueue("Rest.")
    assert texter.text("no") == [NOT_KEPT, "Rest."]


def test_a_thread_ended_elsewhere_is_asked_about_too(texter: Texter):
    texter.llm.enqueue("Noted.")
    texter.text("I run on Sundays.")
    (thread,) = texter.threads()
    Bot(texter.memory, texter.llm, "coach").end_thread(
        user=texter.sender, thread=thread, remember=False
    )
    assert texter.text("hello again") == [QUESTION]


def test_a_remembered_or_forgotten_thread_is_not_asked_about(texter: Texter):
    texter.llm.enqueue("Noted.", POINTS)
    texter.text("I run on Sundays.")
    (thread,) = texter.threads()
    Bot(texter.memory, texter.llm, "coach").end_thread(
        user=texter.sender, thread=thread, remember=True
    )
    texter.llm.enqueue("Hello again.")
    assert texter.text("hello again") == ["Hello again."]
    texter.memory.forget(user=texter.sender, bot="coach")
    texter.llm.enqueue("Hi, who are you?")
    assert texter.text("hi", later=timedelta(minutes=90)) == ["Hi, who are you?"]


def test_no_timeout_means_no_question(texter: Texter):
    texter.memory.configure_bot("coach", idle_timeout_minutes=0)
    texter.llm.enqueue("One.", "Two.")
    texter.text("first")
    assert texter.text("second", later=timedelta(days=30)) == ["Two."]


def test_forgetting_the_person_drops_the_held_text(texter: Texter):
    _idle_then(texter, "a held secret")
    texter.memory.forget(user=texter.sender)
    state = texter.memory.store.sms_sender("coach", texter.sender)
    assert state is not None and state.held_text is None and state.asking_about is None


def test_deleting_the_bot_drops_its_texts(texter: Texter):
    _idle_then(texter, "a held secret")
    texter.memory.delete_bot("coach")
    assert texter.memory.store.sms_sender("coach", texter.sender).held_text is None


# -- the record of texts received -----------------------------------------------------------


def test_a_text_is_claimed_once_and_its_answer_kept(memory: Memory):
    text = IncomingText("SM1", "coach", "sms-x", "hi")
    assert claim_sms(memory, text) is None
    held = claim_sms(memory, text)
    assert held is not None and held.replies is None  # being answered
    record_sms_answer(memory, "SM1", ["Hello.", "Again."], "twiml")
    held = claim_sms(memory, text)
    assert held is not None and held.replies == ("Hello.", "Again.") and held.via == "twiml"


def test_records_older_than_a_day_are_dropped(memory: Memory):
    old = IncomingText("SM-old", "coach", "sms-x", "hi")
    claim_sms(memory, old)
    day_ago = (utc_now() - timedelta(days=2)).isoformat()
    with memory.store._write() as db:
        db.execute("UPDATE sms_messages SET received_at = ?", (day_ago,))
    claim_sms(memory, IncomingText("SM-new", "coach", "sms-x", "hi"))
    assert claim_sms(memory, old) is None  # forgotten, so new again


def test_the_number_is_set_on_the_command_line(cli):
    cli.ok("bot", "create", "coach")
    cli.ok("bot", "set", "coach", "sms_number", BOT_NUMBER)
    assert cli.json("bot", "show", "coach")["settings"]["sms_number"] == BOT_NUMBER
    cli.ok("bot", "create", "other")
    taken = cli.run("bot", "set", "other", "sms_number", BOT_NUMBER)
    assert taken.exit_code != 0 and "one number, one bot" in str(taken.exception)
    spaced = cli.run("bot", "set", "other", "sms_number", "+1 555 010 9999")
    assert spaced.exit_code != 0 and "E.164" in str(spaced.exception)


def test_a_state_changed_by_another_process_is_read_again_and_no_text_is_lost(
    make_memory, embedder, monkeypatch
):
    """Two server processes answer one person's texts: B asks the remember question (holding
    the first text) after A read the state but before A wrote it. A's write is refused, A
    decides again on B's state, and its text settles the question: both texts are kept."""
    a = Texter(make_memory(embedder), ScriptedLLM())
    a.memory.create_bot("coach", sms_number=BOT_NUMBER, idle_timeout_minutes=60)
    a.llm.enqueue("Noted.")
    a.text("I run on Sundays.")
    b = Texter(make_memory(embedder), ScriptedLLM())  # the same file, another connection
    b._sids = count(100)  # Twilio's MessageSids are unique
    store = a.conversations.store
    stale = store.sms_sender("coach", a.sender)
    assert b.text("first text after a while", later=timedelta(hours=2)) == [QUESTION]
    reads = iter([stale])
    real_read = store.sms_sender
    monkeypatch.setattr(store, "sms_sender", lambda *key: next(reads, None) or real_read(*key))
    a.llm.enqueue("Both answered.")
    assert a.text("second text", later=timedelta(hours=2)) == [TAKEN_AS_NO, "Both answered."]
    texts = [text for _, _, text in a.lines()]
    assert texts[-3:] == ["first text after a while", "second text", "Both answered."]


def test_a_stale_write_of_the_sender_state_is_refused(memory: Memory):
    from membot.store.base import SmsSender

    blank = SmsSender("coach", "sms-x")
    assert memory.store.save_sms_sender(blank, None)
    assert not memory.store.save_sms_sender(blank, None)  # one is stored now
    stopped = SmsSender("coach", "sms-x", stopped=True)
    assert memory.store.save_sms_sender(stopped, blank)
    assert not memory.store.save_sms_sender(SmsSender("coach", "sms-x", thread="t"), blank)
    assert memory.store.sms_sender("coach", "sms-x") == stopped


def test_help_counts_one_minute_as_one() -> None:
    from membot import BotSettings
    from membot.service.text_messages import help_text

    assert "after 1 minute without a text" in help_text(BotSettings(idle_timeout_minutes=1))
    assert "after 90 minutes without" in help_text(BotSettings(idle_timeout_minutes=90))

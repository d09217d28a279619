"""Linking over SMS, through POST /sms/twilio signed as Twilio signs (the twilio package's own
RequestValidator): LINK answers a code, LINK and a code links the number with the identity
that made it, UNLINK splits them. Neither the texts nor a reply holding a code becomes a line,
a log record or clear text anywhere in the store; a retried webhook answers without the code."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator

import pytest
from test_sms import (
    BOT_NUMBER,
    PERSON,
    PUBLIC_URL,
    SECRET,
    MessagesApi,
    SlowLLM,
    Sms,
    message,
    replies,
    settings,
    sms_app,
)
from test_sms import _post as post_signed

from membot import Memory
from membot.server import create_app
from membot.service import sms_sender_name
from membot.service.keys import create_key
from membot.service.text_links import CODE_SENT_BEFORE, NOT_KNOWN_YET

CODE = re.compile(r"\b[0-9A-Z]{4}-[0-9A-Z]{4}\b")
PHONE = sms_sender_name(PERSON, SECRET)
USERS = "/v1/bots/coach/users"


@pytest.fixture
def sms(memory: Memory) -> Iterator[Sms]:
    """The app with Twilio's settings, its bot answering texts to BOT_NUMBER (test_sms.py's)."""
    yield from sms_app(memory)


def everything_stored(sms: Sms) -> str:
    """Every value of every table of the store, as one text."""
    with sms.memory.store._write() as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(
            repr(row) for table in tables for row in db.execute(f'SELECT * FROM "{table}"')
        )


def say_hello(sms: Sms) -> None:
    sms.llm.enqueue("Hi! Noted.")
    assert sms.text("Hi, it's Ana") == ["Hi! Noted."]


def test_link_texts_a_code_that_links_the_web_identity(sms: Sms, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    say_hello(sms)
    sms.memory.add("I'm Ana, on the web", user="ana", thread="web", bot="coach")
    lines = sms.stored()

    form = message("link")
    (reply,) = replies(sms.post(form))
    code = CODE.search(reply)
    assert code is not None, reply
    assert f"LINK {code[0]}" in reply and "10 minutes" in reply
    # Twilio sends the webhook again: the answer holds no code, and no second one is made.
    assert replies(sms.post(form)) == [CODE_SENT_BEFORE]

    ana = {"Authorization": f"Bearer {create_key(sms.memory, bot='coach', user='ana').secret}"}
    linked = sms.client.post(f"{USERS}/ana/links", json={"code": code[0]}, headers=ana)
    assert linked.status_code == 200 and linked.json()["linked"] == sorted(["ana", PHONE])

    assert sms.stored() == lines  # the texts are no lines
    assert code[0] not in everything_stored(sms)
    assert code[0].replace("-", "") not in everything_stored(sms)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert code[0] not in logged and code[0].replace("-", "") not in logged


def test_a_code_from_the_web_is_entered_by_text_then_unlinked(sms: Sms, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    say_hello(sms)
    sms.memory.add("I'm Ana, on the web", user="ana", thread="web", bot="coach")
    ana = {"Authorization": f"Bearer {create_key(sms.memory, bot='coach', user='ana').secret}"}
    code = sms.client.post(f"{USERS}/ana/link-codes", headers=ana).json()["code"]
    lines = sms.stored()

    typed = "Link " + code.lower().replace("-", " ")  # as a phone's keyboard may send it
    (reply,) = sms.text(typed)
    assert reply.startswith("Linked:") and "ana" in reply and "UNLINK" in reply
    assert sms.memory.linked(user=PHONE, bot="coach").linked == tuple(sorted(["ana", PHONE]))

    (split,) = sms.text("UNLINK")
    assert split.startswith("Unlinked")
    assert sms.memory.linked(user="ana", bot="coach").linked == ("ana",)
    assert sms.stored() == lines
    assert code not in everything_stored(sms)
    assert code not in "\n".join(record.getMessage() for record in caplog.records)


def test_wrong_codes_by_text_are_refused_then_limited(sms: Sms) -> None:
    say_hello(sms)
    answers = [sms.text("LINK K7QF-3M9P")[0] for _ in range(6)]
    assert all("not valid" in answer for answer in answers[:5]), answers
    assert answers[5].startswith("Too many tries")
    assert sms.memory.linked(user=PHONE, bot="coach").linked == (PHONE,)


def test_a_number_the_bot_does_not_know_yet_is_told_to_text_first(sms: Sms) -> None:
    assert sms.text("LINK") == [NOT_KNOWN_YET]
    assert sms.stored() == 0


def test_a_silenced_number_gets_no_code(sms: Sms) -> None:
    say_hello(sms)
    assert sms.text("STOP") == []
    assert sms.text("LINK") == []


@pytest.mark.parametrize("text", ["link me to that recipe", "Link please", "links"])
def test_other_texts_that_begin_with_link_are_turns(sms: Sms, text: str) -> None:
    sms.llm.enqueue("Here you go.")
    assert sms.text(text) == ["Here you go."]
    assert sms.stored() == 2


@pytest.fixture
def messages_api() -> Iterator[MessagesApi]:
    api = MessagesApi()
    yield api
    api.close()


def test_a_late_code_goes_through_the_messages_api_and_is_not_kept(
    memory: Memory, messages_api: MessagesApi, serve, caplog
) -> None:
    """On a real server on 127.0.0.1, Twilio's own client sending late replies to a stand-in
    for its Messages API: LINK waits behind the person's slow turn, so its code goes out
    through the API; the record keeps no code and a retry sends nothing again."""
    caplog.set_level(logging.DEBUG)
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    llm = SlowLLM("A considered answer.")
    twilio = settings(api_url=messages_api.url, reply_wait_seconds=0.2)
    with serve(create_app(memory, llm=llm, public_url=PUBLIC_URL, twilio=twilio)) as url:
        assert replies(post_signed(url, message("a hard question"))) == []
        link = message("LINK")
        assert replies(post_signed(url, link)) == []  # behind the turn: answered later
        llm.go.set()
        deadline = time.monotonic() + 10
        while len(messages_api.sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert replies(post_signed(url, link)) == []  # sent already: not again
    # Each late reply is sent from a thread of its own: in either order.
    bodies = [sent["Body"] for _, sent, _ in messages_api.sent]
    answer, with_code = sorted(bodies, key=lambda body: CODE.search(body) is not None)
    assert answer == "A considered answer."
    code = CODE.search(with_code)
    assert code is not None, with_code
    with memory.store._write() as db:
        sid = (link["MessageSid"],)
        (kept,) = db.execute("SELECT replies FROM sms_messages WHERE sid = ?", sid)
    assert json.loads(kept[0]) == [CODE_SENT_BEFORE]
    assert code[0] not in caplog.text
    assert memory.count_lines() == 2

"""POST /sms/twilio: requests signed exactly as Twilio signs them (by the twilio package's own
RequestValidator.compute_signature), forged, unsigned and replayed ones; a real server on
127.0.0.1 end to end, and a stand-in for Twilio's Messages API on 127.0.0.1 for late replies."""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from urllib.parse import parse_qs

import httpx
import pytest
from fastapi.testclient import TestClient
from twilio.request_validator import RequestValidator

from membot import ConfigError, Memory, ScriptedLLM
from membot.server import create_app
from membot.server.sms_route import PATH, TwilioSettings
from membot.service import sms_sender_name
from membot.service.text_messages import MESSAGE_LIMIT, QUESTION, units

TOKEN = "0123456789abcdef0123456789abcdef"
ACCOUNT = "AC" + "0" * 32
SECRET = "the server's secret for hashing numbers"
PUBLIC_URL = "https://membot.example.org"
URL = PUBLIC_URL + PATH
BOT_NUMBER = "+15550109999"
PERSON = "+15550100001"


def settings(**changes) -> TwilioSettings:
    values = dict(auth_token=TOKEN, account_sid=ACCOUNT, secret=SECRET, reply_wait_seconds=5.0)
    return TwilioSettings(**{**values, **changes})


_sids = count(1)


def message(body: str, *, sid: str | None = None, **fields: str) -> dict[str, str]:
    """The form Twilio posts for an incoming SMS (its usual fields)."""
    sid = sid or f"SM{next(_sids):032x}"
    form = {
        "ToCountry": "US",
        "ToState": "CA",
        "SmsMessageSid": sid,
        "NumMedia": "0",
        "ToCity": "",
        "FromZip": "",
        "SmsSid": sid,
        "FromState": "CA",
        "SmsStatus": "received",
        "FromCity": "",
        "Body": body,
        "FromCountry": "US",
        "To": BOT_NUMBER,
        "ToZip": "",
        "NumSegments": "1",
        "MessageSid": sid,
        "AccountSid": ACCOUNT,
        "From": PERSON,
        "ApiVersion": "2010-04-01",
    }
    return {**form, **fields}


def signature(form: dict[str, str], token: str = TOKEN, url: str = URL) -> str:
    return RequestValidator(token).compute_signature(url, form)


def replies(response) -> list[str]:
    assert response.headers["content-type"].startswith("application/xml")
    root = ET.fromstring(response.text)
    assert root.tag == "Response"
    return [element.text or "" for element in root.findall("Message")]


class Sms:
    def __init__(self, client, memory: Memory, llm: ScriptedLLM) -> None:
        self.client, self.memory, self.llm = client, memory, llm

    def post(self, form: dict[str, str], headers: dict[str, str] | None = None):
        if headers is None:
            headers = {"X-Twilio-Signature": signature(form)}
        return self.client.post(PATH, data=form, headers=headers)

    def text(self, body: str, **fields: str) -> list[str]:
        response = self.post(message(body, **fields))
        assert response.status_code == 200, response.text
        return replies(response)

    def stored(self) -> int:
        return self.memory.count_lines()

    def records(self) -> int:
        with self.memory.store._write() as db:
            return db.execute("SELECT COUNT(*) FROM sms_messages").fetchone()[0]


def sms_app(memory: Memory) -> Iterator[Sms]:
    """The app with Twilio's settings, its bot "coach" answering texts to BOT_NUMBER."""
    memory.create_bot("coach", bot_name="Cy", sms_number=BOT_NUMBER)
    llm = ScriptedLLM()
    app = create_app(memory, llm=llm, public_url=PUBLIC_URL + "/", twilio=settings())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Sms(client, memory, llm)


@pytest.fixture
def sms(memory: Memory) -> Iterator[Sms]:
    yield from sms_app(memory)


def test_a_signed_text_is_answered_in_twiml(sms: Sms):
    sms.llm.enqueue("Hi Sam! Sundays are good for a long run.")
    assert sms.text("Hi, I'm Sam and I run on Sundays.") == [
        "Hi Sam! Sundays are good for a long run."
    ]
    person = sms_sender_name(PERSON, SECRET)
    lines = sms.memory.history(user=person, bot="coach")
    assert [line.text for line in lines] == [
        "Hi, I'm Sam and I run on Sundays.",
        "Hi Sam! Sundays are good for a long run.",
    ]


def test_texts_are_counted_like_any_turn(sms: Sms):
    sms.llm.enqueue("One.", "!error down")
    sms.text("hello")
    sms.text("again")
    sms.text("HELP")  # not a turn
    metrics = sms.client.get("/metrics").text
    assert 'membot_turns_total{bot="coach",outcome="answered"' in metrics
    assert 'membot_turns_total{bot="coach",outcome="llm_failed"' in metrics
    assert f'route="{PATH}",status="200"' in metrics


def test_the_reply_is_escaped_in_the_xml(sms: Sms):
    sms.llm.enqueue("Use <b>bold</b> & see.")
    assert sms.text("format?") == ["Use <b>bold</b> & see."]


def test_characters_xml_cannot_hold_are_left_out_of_the_twiml(sms: Sms):
    """A reply with an escape character made TwiML that no XML parser reads; the stored
    reply keeps what the model wrote."""
    said = "Red \x1b[31mtext\x1b[0m,\x0c done \ufffe]]>"
    sms.llm.enqueue(said)
    assert sms.text("colours?") == ["Red [31mtext[0m, done ]]>"]
    person = sms_sender_name(PERSON, SECRET)
    assert sms.memory.history(user=person, bot="coach")[-1].text == said


def test_an_unsigned_request_is_refused_and_nothing_stored(sms: Sms):
    response = sms.post(message("hello"), headers={})
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "forbidden"
    assert (sms.stored(), sms.records(), sms.llm.history) == (0, 0, [])


@pytest.mark.parametrize(
    "forge",
    [
        lambda form: signature(form, token="f" * 32),  # another account's token
        lambda form: signature(form, url="https://elsewhere.example.org" + PATH),  # another URL
        lambda form: signature({**form, "Body": "something else"}),  # a changed text
        lambda form: "not a signature",
    ],
)
def test_a_forged_request_is_refused_and_nothing_stored(sms: Sms, forge):
    form = message("hello")
    response = sms.post(form, headers={"X-Twilio-Signature": forge(form)})
    assert response.status_code == 403
    assert (sms.stored(), sms.records(), sms.llm.history) == (0, 0, [])


def test_the_query_string_twilio_was_given_is_signed_too(sms: Sms):
    form = message("hello")
    signed = signature(form, url=URL + "?source=console")
    response = sms.client.post(
        PATH + "?source=console", data=form, headers={"X-Twilio-Signature": signed}
    )
    assert response.status_code == 200
    response = sms.client.post(
        PATH + "?source=other", data=message("hello again"), headers={"X-Twilio-Signature": signed}
    )
    assert response.status_code == 403


def test_a_replayed_text_is_stored_once_and_answered_the_same_way(sms: Sms):
    sms.llm.enqueue("First answer.", "A second answer nobody should see.")
    form = message("hello")
    first = sms.post(form)
    again = sms.post(form)
    assert replies(first) == replies(again) == ["First answer."]
    assert sms.stored() == 2 and len(sms.llm.history) == 1


def _claimed_by_a_dead_process(sms: Sms, sid: str) -> None:
    """A text claimed ("being answered") by a worker that was killed since."""
    import socket
    import subprocess
    from datetime import timedelta

    from membot import utc_now
    from membot.store.base import SmsRecord

    gone = subprocess.Popen(["true"])
    gone.wait()
    answerer = f"answering:{socket.gethostname()}:{gone.pid}"
    sender = sms_sender_name(PERSON, SECRET)
    record = SmsRecord(sid, "coach", sender, utc_now(), answerer=answerer)
    assert sms.memory.store.claim_sms_message(record, utc_now() - timedelta(days=1)) is None


def test_a_text_whose_answerer_died_is_answered_by_a_retry(sms: Sms):
    """A worker killed while it answered left its texts "being answered" for a day: every
    retry got an empty answer, a text still waiting its turn was never stored, and one
    stored but not yet answered never was (a probe of multi-worker serving)."""
    from membot import LineInput, Role

    sms.llm.enqueue("Hello!", "Noted: Tuesday.")
    assert sms.text("hello") == ["Hello!"]
    waiting = message("is Tuesday fine?")  # claimed, then its worker died before its turn
    _claimed_by_a_dead_process(sms, waiting["MessageSid"])
    assert replies(sms.post(waiting)) == ["Noted: Tuesday."]
    assert replies(sms.post(waiting)) == ["Noted: Tuesday."]  # and once answered, as before
    assert sms.stored() == 4

    stored = message("and Friday?")  # its line stored, then its worker died
    _claimed_by_a_dead_process(sms, stored["MessageSid"])
    thread = sms.memory.history(user=sms_sender_name(PERSON, SECRET))[-1].thread
    sms.memory.add_with_vector(LineInput("and Friday?", sms_sender_name(PERSON, SECRET), thread,
                                         Role.HUMAN, "coach",
                                         source_key="twilio:" + stored["MessageSid"]))  # fmt: skip
    (apology,) = replies(sms.post(stored))
    assert "no need to send it again" in apology  # kept, and said so: not an empty answer
    assert sms.stored() == 5 and len(sms.llm.history) == 2


def test_a_long_reply_comes_back_as_several_messages(sms: Sms):
    reply = " ".join(f"Step {i} of your plan is an easy run." for i in range(120))
    sms.llm.enqueue(reply)
    parts = sms.text("plan please")
    assert len(parts) > 1 and all(units(part) <= MESSAGE_LIMIT for part in parts)
    assert " ".join(parts) == reply


def test_stop_gets_no_reply_and_silences_until_start(sms: Sms):
    assert sms.text("STOP") == []
    assert sms.text("hello?") == []
    assert sms.stored() == 0 and sms.llm.history == []
    assert sms.text("START") == []
    sms.llm.enqueue("Hello again.")
    assert sms.text("hello?") == ["Hello again."]


def test_help_and_media_get_a_text(sms: Sms):
    (help_text,) = sms.text("HELP")
    assert "Cy" in help_text and "STOP" in help_text
    (media,) = sms.text("", NumMedia="1", MediaUrl0="https://api.twilio.com/media/1")
    assert "text" in media
    assert sms.stored() == 0


def test_a_number_no_bot_has_is_404(sms: Sms):
    response = sms.post(message("hi", To="+15550101234"))
    assert response.status_code == 404
    assert "sms_number" in response.json()["error"]["message"]
    assert sms.stored() == 0


def test_a_form_without_the_message_fields_is_400(sms: Sms):
    form = {"Body": "hi"}
    response = sms.post(form)
    assert response.status_code == 400
    assert "MessageSid" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("twilio", "public_url", "missing"),
    [
        (None, PUBLIC_URL, "TWILIO_AUTH_TOKEN"),
        (settings(), None, "--public-url"),
        (settings(secret="short"), PUBLIC_URL, "MEMBOT_SMS_SECRET"),
    ],
)
def test_without_its_settings_the_route_says_what_is_missing(memory, twilio, public_url, missing):
    app = create_app(memory, llm=ScriptedLLM(), public_url=public_url, twilio=twilio)
    with TestClient(app) as client:
        form = message("hello")
        response = client.post(PATH, data=form, headers={"X-Twilio-Signature": signature(form)})
    assert response.status_code == 503
    assert missing in response.json()["error"]["message"]
    assert memory.count_lines() == 0


def test_settings_come_from_the_environment():
    env = {
        "TWILIO_AUTH_TOKEN": TOKEN,
        "TWILIO_ACCOUNT_SID": ACCOUNT,
        "MEMBOT_SMS_SECRET": SECRET,
        "MEMBOT_SMS_REPLY_SECONDS": "2.5",
    }
    read = TwilioSettings.from_environment(env)
    assert (read.auth_token, read.account_sid, read.secret) == (TOKEN, ACCOUNT, SECRET)
    assert read.reply_wait_seconds == 2.5
    assert TOKEN not in repr(read) and SECRET not in repr(read)
    assert TwilioSettings.from_environment({}).reply_wait_seconds == 10.0
    for wrong in ("soon", "0", "15", "-1"):
        with pytest.raises(ConfigError, match="MEMBOT_SMS_REPLY_SECONDS"):
            TwilioSettings.from_environment({"MEMBOT_SMS_REPLY_SECONDS": wrong})


def test_membot_serve_says_where_the_webhook_goes(capsys):
    from membot.cli.serve import sms_note

    sms_note(PUBLIC_URL + "/", {"TWILIO_AUTH_TOKEN": TOKEN})
    assert f"webhook is {URL} (HTTP POST)" in capsys.readouterr().err
    sms_note(None, {"TWILIO_AUTH_TOKEN": TOKEN})
    assert "--public-url is not" in " ".join(capsys.readouterr().err.split())
    sms_note(PUBLIC_URL, {})
    assert capsys.readouterr().err == ""


# -- a real server, and Twilio's Messages API standing by on 127.0.0.1 --------------------


class MessagesApi:
    """Twilio's Messages API as far as membot uses it: POST .../Messages.json records the
    form and its Basic auth, and answers 201 with a message resource."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str], str | None]] = []
        self.arrived = threading.Event()
        self.refuse = False  # answer as Twilio does to a number that said STOP
        self.busy = 0  # answer this many requests first with 503, as Twilio does when busy
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(size).decode()).items()}
                api.sent.append((self.path, form, self.headers.get("Authorization")))
                status, body = (
                    201,
                    {
                        "sid": f"SM{len(api.sent):032x}",
                        "status": "queued",
                        "body": form.get("Body"),
                        "account_sid": ACCOUNT,
                    },
                )
                if api.busy > 0:
                    api.busy -= 1
                    status, body = 503, {"code": 20503, "status": 503, "message": "busy"}
                elif api.refuse:
                    status, body = (
                        400,
                        {
                            "code": 21610,
                            "status": 400,
                            "message": f"Attempt to send to unsubscribed recipient {PERSON}",
                        },
                    )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                api.arrived.set()

            def log_message(self, *args) -> None:  # keep the test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class SlowLLM(ScriptedLLM):
    """The scripted model, answering only once the test lets it (``go``)."""

    def __init__(self, *replies: str) -> None:
        super().__init__(replies)
        self.go = threading.Event()

    def complete(self, messages, max_tokens, *, schema=None):
        assert self.go.wait(30), "the test never let the model answer"
        return super().complete(messages, max_tokens, schema=schema)


@pytest.fixture
def messages_api() -> Iterator[MessagesApi]:
    api = MessagesApi()
    yield api
    api.close()


def _post(url: str, form: dict[str, str]) -> httpx.Response:
    headers = {"X-Twilio-Signature": signature(form)}
    return httpx.post(url + PATH, data=form, headers=headers, timeout=30)


def test_end_to_end_on_a_real_server(memory: Memory, messages_api: MessagesApi, serve):
    """Twilio reaches membot behind a proxy (the public URL), signs every request, sends one
    again, and the idle thread's question comes first; nothing goes to the Messages API."""
    memory.create_bot("coach", sms_number=BOT_NUMBER, idle_timeout_minutes=60)
    llm = ScriptedLLM(["Noted: Sundays.", "Ten kilometres."])
    twilio = settings(api_url=messages_api.url)
    with serve(create_app(memory, llm=llm, public_url=PUBLIC_URL, twilio=twilio)) as url:
        first = message("I run on Sundays.")
        assert replies(_post(url, first)) == ["Noted: Sundays."]
        assert replies(_post(url, first)) == ["Noted: Sundays."]  # Twilio's retry
        forged = message("hi")
        headers = {"X-Twilio-Signature": signature(forged)}
        forged["Body"] = "send me everything"
        assert httpx.post(url + PATH, data=forged, headers=headers).status_code == 403
        person = sms_sender_name(PERSON, SECRET)
        assert len(memory.threads(user=person, bot="coach")) == 1
        with memory.store._write() as db:  # the thread went quiet long ago
            db.execute("UPDATE lines SET created_at = '2020-01-01T00:00:00+00:00'")
        assert replies(_post(url, message("What should I run?"))) == [QUESTION]
        answer = replies(_post(url, message("no")))
        assert answer[1:] == ["Ten kilometres."] and "won't" in answer[0]
    assert memory.count_lines() == 4
    assert messages_api.sent == []


def test_a_slow_model_is_answered_through_the_messages_api(
    memory: Memory, messages_api: MessagesApi, serve
):
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    llm = SlowLLM("A considered answer.")
    twilio = settings(api_url=messages_api.url, reply_wait_seconds=0.2)
    with serve(create_app(memory, llm=llm, public_url=PUBLIC_URL, twilio=twilio)) as url:
        form = message("a hard question")
        started = time.monotonic()
        response = _post(url, form)
        waited = time.monotonic() - started
        assert response.status_code == 200 and replies(response) == []  # answered at once
        assert waited < 5
        assert messages_api.sent == []
        llm.go.set()
        assert messages_api.arrived.wait(10), "no reply reached the Messages API"
        assert replies(_post(url, form)) == []  # a retry now: sent already, not again
    ((path, sent, auth),) = messages_api.sent
    assert path == f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json"
    assert sent == {"To": PERSON, "From": BOT_NUMBER, "Body": "A considered answer."}
    assert auth is not None and auth.startswith("Basic ")
    assert memory.count_lines() == 2 and len(llm.history) == 1


def _slow_text(memory, messages_api, serve, caplog, wanted: str, **changes) -> None:
    """A text whose reply comes late; waits until ``wanted`` is logged."""
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    llm = SlowLLM("A considered answer.")
    twilio = settings(api_url=messages_api.url, reply_wait_seconds=0.2, **changes)
    with serve(create_app(memory, llm=llm, public_url=PUBLIC_URL, twilio=twilio)) as url:
        assert replies(_post(url, message("a hard question"))) == []
        llm.go.set()
        deadline = time.monotonic() + 10
        while wanted not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
    assert wanted in caplog.text


def test_a_late_reply_twilio_refuses_is_logged_without_numbers(
    memory: Memory, messages_api: MessagesApi, serve, caplog
):
    messages_api.refuse = True
    _slow_text(memory, messages_api, serve, caplog, "code 21610")
    assert len(messages_api.sent) == 1
    assert "5550100001" not in caplog.text and "5550109999" not in caplog.text


def test_a_late_reply_without_the_account_sid_is_not_sent_and_says_why(
    memory: Memory, messages_api: MessagesApi, serve, caplog
):
    _slow_text(memory, messages_api, serve, caplog, "set TWILIO_ACCOUNT_SID", account_sid="")
    assert messages_api.sent == []
    assert memory.count_lines() == 2  # the text and the reply are kept all the same


def test_a_retry_while_the_first_try_is_answered_gets_the_same_answer(memory: Memory, serve):
    """Twilio gave up on the first connection and sent the text again: the retry waits for
    the first try's answer and carries it; the model is asked once."""
    memory.create_bot("coach", sms_number=BOT_NUMBER)
    llm = SlowLLM("The one answer.")
    twilio = settings(reply_wait_seconds=10)
    form = message("hello")
    with serve(create_app(memory, llm=llm, public_url=PUBLIC_URL, twilio=twilio)) as url:
        answers: list[list[str]] = []
        tries = [
            threading.Thread(target=lambda: answers.append(replies(_post(url, form))))
            for _ in range(2)
        ]
        for attempt in tries:
            attempt.start()
            time.sleep(0.3)  # the second arrives while the first is being answered
        llm.go.set()
        for attempt in tries:
            attempt.join(20)
    assert answers == [["The one answer."], ["The one answer."]]
    assert len(llm.history) == 1 and memory.count_lines() == 2


def test_a_late_reply_twilio_is_too_busy_for_is_sent_again(
    memory: Memory, messages_api: MessagesApi, serve, caplog, monkeypatch
):
    """A late reply that Twilio answered 503 was logged and never sent: the person did not
    get it, and a retry of the text gets no TwiML (it went through the Messages API)."""
    from membot.server import sms_route as sms

    monkeypatch.setattr(sms, "SEND_PAUSES", (0.01, 0.01))
    messages_api.busy = 1
    _slow_text(memory, messages_api, serve, caplog, "HTTP 503, trying again")
    deadline = time.monotonic() + 10
    while len(messages_api.sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [form["Body"] for _, form, _ in messages_api.sent] == ["A considered answer."] * 2
    assert "was refused" not in caplog.text


def test_a_late_reply_twilio_stays_too_busy_for_is_given_up_on_after_three_tries(
    memory: Memory, messages_api: MessagesApi, serve, caplog, monkeypatch
):
    from membot.server import sms_route as sms

    monkeypatch.setattr(sms, "SEND_PAUSES", (0.01, 0.01))
    messages_api.busy = 5
    _slow_text(memory, messages_api, serve, caplog, "was refused by Twilio: HTTP 503")
    assert len(messages_api.sent) == 3
    assert "5550100001" not in caplog.text and "5550109999" not in caplog.text

"""``POST /sms/twilio``: Twilio's messaging webhook, a thin adapter over
:class:`membot.service.TextConversations` (what a text means and what answers it is decided there).

Before anything is read or stored, the request's ``X-Twilio-Signature`` is checked with the
``twilio`` package's validator against the auth token and the URL Twilio was given (the
server's ``--public-url`` and this path): a missing or wrong signature gets 403. Without an
auth token, public URL or hashing secret the route answers 503 and says which is missing; it
never takes an unsigned request.

The answer is TwiML, one ``<Message>`` per text. Twilio waits 15 s for it; when the model is
slower than ``reply_wait_seconds`` (default 10), the webhook is answered at once with no
message and the reply is sent afterwards through Twilio's Messages API. Numbers live only in
the request being answered: never stored, never logged. The replies kept for Twilio's retries
never hold a link code (:func:`membot.service.kept_replies`).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from membot import ConfigError, Turn
from membot.server.errors import ApiError
from membot.server.service import Service
from membot.service import (
    IncomingText,
    SmsRecord,
    TextConversations,
    bot_for_sms_number,
    claim_sms,
    is_phone_number,
    kept_replies,
    record_sms_answer,
    sms_sender_name,
)

log = logging.getLogger(__name__)

PATH = "/sms/twilio"
TWILIO_API = "https://api.twilio.com"
TWILIO_WAITS_SECONDS = 15  # for the webhook's answer, then it gives up
# How often a retry looks whether the first try of its text has been answered.
RETRY_POLL_SECONDS = 0.1
INSTALL_HINT = "SMS needs the twilio package: pip install 'membot[sms]'"
router = APIRouter(tags=["sms"])


@dataclass(frozen=True)
class TwilioSettings:
    """What the SMS route needs, from ``membot serve``'s environment: ``TWILIO_AUTH_TOKEN``
    (checks signatures, and with ``TWILIO_ACCOUNT_SID`` sends late replies),
    ``MEMBOT_SMS_SECRET`` (keys the hash people are stored under), and
    ``MEMBOT_SMS_REPLY_SECONDS`` (how long a reply may take before it is sent later)."""

    auth_token: str = field(default="", repr=False)
    account_sid: str = ""
    secret: str = field(default="", repr=False)
    reply_wait_seconds: float = 10.0
    # Where Twilio's REST API is: only a test (a server on 127.0.0.1) or a proxy changes it.
    api_url: str = TWILIO_API

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> TwilioSettings:
        env = os.environ if env is None else env
        wait = env.get("MEMBOT_SMS_REPLY_SECONDS") or "10"
        try:
            seconds = float(wait)
        except ValueError as error:
            raise ConfigError(f"MEMBOT_SMS_REPLY_SECONDS wants seconds, got {wait!r}") from error
        if not 0 < seconds < TWILIO_WAITS_SECONDS:
            raise ConfigError(
                f"MEMBOT_SMS_REPLY_SECONDS must lie between 0 and {TWILIO_WAITS_SECONDS} "
                f"(Twilio waits that long for the webhook), got {wait}"
            )
        return cls(
            auth_token=env.get("TWILIO_AUTH_TOKEN", ""),
            account_sid=env.get("TWILIO_ACCOUNT_SID", ""),
            secret=env.get("MEMBOT_SMS_SECRET", ""),
            reply_wait_seconds=seconds,
        )


@dataclass(frozen=True)
class Webhook:
    """The fields of Twilio's form that membot reads; the numbers stay in this object."""

    sid: str
    sender: str = field(repr=False)
    to: str
    body: str = field(repr=False)  # may hold a link code
    media: int


class SmsGateway:
    """The route's state in one process: its settings, and the threads answering texts."""

    def __init__(self, settings: TwilioSettings | None, public_url: str | None) -> None:
        self.settings = settings or TwilioSettings()
        self.public_url = (public_url or "").rstrip("/")
        # Answers wait here for a model; past reply_wait_seconds they finish on their own.
        self.workers = ThreadPoolExecutor(8, thread_name_prefix="membot-sms")
        # Late replies are sent from threads of their own: a send waiting to be tried again
        # holds up no answer to another text.
        self.senders = ThreadPoolExecutor(2, thread_name_prefix="membot-sms-send")

    def unavailable(self) -> str | None:
        """Why the route cannot take texts (what to set), or None."""
        try:
            import twilio  # noqa: F401
        except ImportError:
            return INSTALL_HINT
        missing = [
            name
            for name, value in (
                ("TWILIO_AUTH_TOKEN", self.settings.auth_token),
                ("--public-url", self.public_url),
                ("MEMBOT_SMS_SECRET (16 characters or more)", len(self.settings.secret) >= 16),
            )
            if not value
        ]
        if missing:
            return f"SMS is not set up on this server: set {', '.join(missing)} (docs/sms.md)"
        return None

    def signed(self, form: FormData, signature: str | None, query: str = "") -> bool:
        """Whether Twilio signed this form for our URL (its query string included, as
        Twilio signs it) with our auth token."""
        from twilio.request_validator import RequestValidator

        if not signature:
            return False
        url = self.public_url + PATH + (f"?{query}" if query else "")
        return bool(RequestValidator(self.settings.auth_token).validate(url, form, signature))

    def reply(self, service: Service, webhook: Webhook) -> list[str]:
        """The texts for the webhook's answer (blocks at most ``reply_wait_seconds``)."""
        memory = service.memory
        bot = bot_for_sms_number(memory, webhook.to)
        if bot is None:
            raise ApiError(
                404, f"no bot answers texts to {webhook.to}: `membot bot set BOT sms_number NUMBER`"
            )
        sender = sms_sender_name(webhook.sender, self.settings.secret)
        text = IncomingText(webhook.sid, bot, sender, webhook.body, webhook.media)
        seen = claim_sms(memory, text)
        if seen is not None:  # Twilio sent it again: answer as before, store nothing
            return self._answered_before(service, text, seen)
        work = self.workers.submit(self._answer, service, text)
        try:
            replies = work.result(timeout=self.settings.reply_wait_seconds)
        except FutureTimeout:
            log.info("text %s: the reply takes long; it will go through the Messages API", text.sid)
            work.add_done_callback(lambda done: self._send_late(done, service, webhook))
            return []
        record_sms_answer(memory, text.sid, kept_replies(text.body, replies), "twiml")
        return replies

    def _answered_before(self, service: Service, text: IncomingText, seen: SmsRecord) -> list[str]:
        """The answer a text had, for Twilio's retry. One still being answered is waited for
        (as long as a reply may take): the first request's connection may be the one Twilio
        gave up on, and its TwiML would reach no one. Replies sent through the Messages API
        are not sent twice."""
        deadline = time.monotonic() + self.settings.reply_wait_seconds
        while seen.in_flight and time.monotonic() < deadline:
            time.sleep(RETRY_POLL_SECONDS)
            seen = claim_sms(service.memory, text) or seen
        return list(seen.replies or ()) if seen.via == "twiml" else []

    @staticmethod
    def _answer(service: Service, text: IncomingText) -> list[str]:
        def take_turn(body: str, *, user: str, thread: str, source_key: str) -> Turn:
            return service.turn(
                text.bot, user=user, thread=thread, text=body, source_key=source_key
            )

        # One text of a person at a time: the question, the held text and the thread change
        # together. A lock of the service's, on a name no thread can have.
        with service.thread_lock(text.bot, text.sender, "\0sms"):
            return TextConversations(service.bot(text.bot), take_turn).answer(text)

    def _send_late(self, done: Future[list[str]], service: Service, webhook: Webhook) -> None:
        try:
            replies = done.result()
        except Exception:
            log.exception("text %s was not answered", webhook.sid)
            return
        record_sms_answer(service.memory, webhook.sid, kept_replies(webhook.body, replies), "api")
        self.senders.submit(
            self.send, replies, to=webhook.sender, sender=webhook.to, sid=webhook.sid
        )

    def send(self, replies: list[str], *, to: str, sender: str, sid: str) -> None:
        """Send texts through Twilio's Messages API (failures are logged, numbers never)."""
        from twilio.rest import Client

        if not self.settings.account_sid:
            log.error("the reply to text %s was not sent: set TWILIO_ACCOUNT_SID", sid)
            return
        client = Client(
            self.settings.account_sid, self.settings.auth_token, http_client=self._http()
        )
        for index, body in enumerate(replies, start=1):
            if not _sent(client, to, sender, body, f"reply {index} to text {sid}"):
                return

    def _http(self) -> Any:
        from twilio.http.http_client import TwilioHttpClient

        base = self.settings.api_url.rstrip("/")

        # twilio ships no types, so its class is Any to mypy (disallow_subclassing_any).
        class ElsewhereHttpClient(TwilioHttpClient):  # type: ignore[misc]
            """Twilio's own client, its requests sent to ``base`` instead of api.twilio.com:
            the way Twilio's documentation points to, a custom HTTP client."""

            def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
                if url.startswith(TWILIO_API):
                    url = base + url[len(TWILIO_API) :]
                return super().request(method, url, *args, **kwargs)

        return (
            TwilioHttpClient(timeout=30) if base == TWILIO_API else ElsewhereHttpClient(timeout=30)
        )


# A late reply that Twilio could not take (429, 503, or no connection to it) is tried again,
# twice, after 1 and then 4 seconds. Anything else is final: a refusal (a number that said
# STOP, a bad sender), and a failure after which Twilio may have taken the text (another
# 5xx, a timeout while reading its answer), which a second try could send twice.
SEND_PAUSES = (1.0, 4.0)
PASSING_STATUSES = {429, 503}


def _sent(client: Any, to: str, sender: str, body: str, what: str) -> bool:
    """Send one text through the Messages API, trying again while the failure may pass;
    whether it went. Failures are logged by status and code, never with the numbers."""
    from requests.exceptions import ConnectionError as NoConnection
    from twilio.base.exceptions import TwilioException, TwilioRestException

    for pause in (*SEND_PAUSES, None):
        try:
            client.messages.create(to=to, from_=sender, body=body)
            return True
        except TwilioRestException as error:  # its text can hold the numbers
            if error.status not in PASSING_STATUSES or pause is None:
                log.error("%s was refused by Twilio: HTTP %s, code %s", what, error.status,
                          error.code)  # fmt: skip
                return False
            failure = f"HTTP {error.status}"
        except (TwilioException, OSError) as error:
            if not isinstance(error, NoConnection) or pause is None:
                log.error("%s could not be sent: %s", what, type(error).__name__)
                return False
            failure = type(error).__name__
        log.warning("%s: %s, trying again in %g s", what, failure, pause)
        time.sleep(pause)
    return False


def read_webhook(form: FormData) -> Webhook:
    """Twilio's form, checked: 400 when the fields every message carries are missing."""
    values = {name: str(form.get(name) or "") for name in ("MessageSid", "From", "To", "Body")}
    missing = [name for name in ("MessageSid", "From", "To") if not values[name]]
    if missing:
        raise ApiError(400, f"not a Twilio message: {', '.join(missing)} missing")
    if not is_phone_number(values["To"]):
        raise ApiError(400, "To is not a phone number in E.164 form")
    try:
        media = int(str(form.get("NumMedia") or 0))
    except ValueError:
        media = 0
    return Webhook(values["MessageSid"], values["From"], values["To"], values["Body"], media)


# What XML 1.0 cannot hold, even escaped: control characters but tab and line breaks, and
# U+FFFE and U+FFFF. Twilio's builder escapes markup but passes these through.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def twiml(replies: list[str]) -> Response:
    """The replies as TwiML: characters XML cannot carry are left out (a model's reply may
    hold an escape character; the text's stored reply keeps it)."""
    from twilio.twiml.messaging_response import MessagingResponse

    response = MessagingResponse()
    for body in replies:
        response.message(NOT_XML.sub("", body))
    return Response(str(response), media_type="application/xml")


@router.post(
    PATH,
    summary="Twilio's messaging webhook: a text in, TwiML out.",
    description="Signed by Twilio (`X-Twilio-Signature`); needs no membot key.",
)
async def twilio_webhook(request: Request) -> Response:
    gateway: SmsGateway = request.app.state.sms
    problem = gateway.unavailable()
    if problem:
        raise ApiError(503, problem, kind="sms_unavailable")
    form = await request.form()
    if not gateway.signed(form, request.headers.get("X-Twilio-Signature"), request.url.query):
        raise ApiError(403, "the request is not signed by Twilio for this URL")
    webhook = read_webhook(form)
    service: Service = request.app.state.service
    return twiml(await run_in_threadpool(gateway.reply, service, webhook))

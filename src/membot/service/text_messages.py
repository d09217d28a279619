"""Talking with a bot by text message (SMS): which bot a number reaches, who is texting, what
a text means, and replies cut to the size of a text.

The server's route (:mod:`membot.server.sms_route`) checks Twilio's signature, reads its form and
answers TwiML; what a text *means* is decided here, without HTTP. One text, in this order:

1. **STOP** (or STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT: the whole text, any case, as Twilio
   reads them) silences the person: no reply now, and later texts are neither stored nor
   answered until **START** (or UNSTOP, or YES while silenced: Twilio's opt-in words). Twilio
   confirms both itself, so membot adds nothing to either.
2. **HELP** (or INFO) gets the help text; **LINK**, **LINK** and a code, and **UNLINK** link
   the number with the person's other channels (:mod:`membot.service.text_links`). Nothing
   of these is stored as a line.
3. **Media without text** gets a short text saying only text is read. Nothing is stored.
4. **After an idle thread.** When the person's thread has been idle longer than the bot's
   ``idle_timeout_minutes`` (or was ended elsewhere, e.g. by ``membot end-idle``), it is ended
   without remembering, a new thread begins, and the only reply is the question "shall I
   remember our last conversation? YES or NO". The text that came with it is *held*: kept in
   the store's SMS state, not yet a line of any thread. The next text settles it:
   - YES (yes, y, yeah, yep, sure, ok: its first word) keeps the ended thread's key points,
     held to the bot's remember-policy; NO (no, n, nope, nah) keeps nothing. The reply is the
     acknowledgement, then the bot's answer to the held text, said as the new thread's first
     line.
   - Anything else counts as no (consent is never assumed), and says so: the held text and
     this one are both said in the new thread, and the bot answers this one (the held text
     is in its feed).
   An idle thread already summarised, or with nothing in it, starts the new thread without
   asking.
5. Otherwise the text is a turn in the person's thread. A reply longer than one text is cut
   at sentence ends into texts of at most :data:`MESSAGE_LIMIT` characters.

The person is named in the store by :func:`sms_sender_name`, a keyed hash of their number; the
number itself is neither stored nor logged. A text's line carries its Twilio MessageSid as its
source key, so a text sent again is never stored twice.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import socket
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from membot.config import E164, BotSettings
from membot.errors import ConfigError, ConflictError, NotFoundError, TurnFailedError
from membot.memory.facade import LineInput
from membot.model import Role, Turn, utc_now
from membot.service.text_links import answer_link_request, link_request
from membot.store.base import SmsRecord, SmsSender, SmsStore

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from membot.memory.facade import Memory
    from membot.turn.bot import Bot

# Twilio's limit on a message body, in characters (UTF-16 code units, as Twilio counts).
MESSAGE_LIMIT = 1600
# Twilio retries a webhook within minutes; a day covers that with room to spare, and the
# replies kept for it are the person's words, so they are not kept longer.
KEEP_RECORDS = timedelta(days=1)
# A text still being answered this long after it came is taken as one whose answerer died,
# wherever it ran (on this machine a dead process is seen at once): past any reply's wait.
ORPHANED_AFTER = timedelta(minutes=10)
SOURCE_PREFIX = "twilio:"
STATE_RETRIES = 5
MIN_SECRET_CHARS = 16

STOP_WORDS = frozenset({"stop", "stopall", "unsubscribe", "cancel", "end", "quit"})
START_WORDS = frozenset({"start", "unstop"})
HELP_WORDS = frozenset({"help", "info"})
YES_WORDS = frozenset({"yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay"})
NO_WORDS = frozenset({"no", "n", "nope", "nah"})

QUESTION = "Welcome back! Before I answer: shall I remember our last conversation? Reply YES or NO."
KEPT = "Thanks: I'll remember the key points of our last conversation."
NOTHING_KEPT = "Thanks. I looked, but kept nothing of our last conversation."
NOT_KEPT = "OK: I won't remember our last conversation."
TAKEN_AS_NO = "I'll take that as a no: I won't remember our last conversation."
MEDIA_ONLY = "I can only read text, not pictures or other media: please write your message."
EMPTY = "Your message was empty. Text HELP for help."
# The text is stored: sent again, it would be stored twice.
UNANSWERED = (
    "Sorry, I can't answer right now. Your message is kept, so no need to send it again; "
    "write again in a while."
)

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|\n\s*")
_WORD = re.compile(r"[a-z]+")
_ONE_WORD = re.compile(r"[\s.!?,;:]*([A-Za-z]+)[\s.!?,;:]*")


@dataclass(frozen=True)
class IncomingText:
    """A text as the webhook received it, the number already hashed into ``sender``."""

    sid: str  # Twilio's MessageSid
    bot: str
    sender: str
    body: str = field(repr=False)  # may hold a link code: never in a log through a repr
    media: int = 0  # how many pictures or other media came with it


# -- pure parts -----------------------------------------------------------------------------


def sms_sender_name(number: str, secret: str) -> str:
    """The person's name in the store: ``sms-`` and an HMAC-SHA256 of their number keyed with
    the server's secret (128 bits of it). Without the secret the name cannot be traced back to
    the number by trying every number (10^10 of them take a GPU seconds with a plain hash)."""
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(f"the SMS secret must be at least {MIN_SECRET_CHARS} characters")
    digest = hmac.new(secret.encode("utf-8"), number.strip().encode("utf-8"), hashlib.sha256)
    return "sms-" + digest.hexdigest()[:32]


def is_phone_number(number: str) -> bool:
    """Whether ``number`` is written in E.164 (+ and up to 15 digits), as Twilio writes it."""
    return E164.fullmatch(number) is not None


def keyword(body: str) -> str | None:
    """The keyword a whole text is (stop, start, help), as Twilio matches them: one word,
    any case, surrounding spaces and punctuation ignored; None for any other text."""
    word = _single_word(body)
    for name, group in (("stop", STOP_WORDS), ("start", START_WORDS), ("help", HELP_WORDS)):
        if word in group:
            return name
    return None


def consent(body: str) -> bool | None:
    """True for a yes, False for a no (the answer's first word: "Yes please", "sure.",
    "nope"), None for anything else: how a text or ``membot chat`` answers "shall I
    remember?"."""
    words = _WORD.findall(body.lower())
    if not words:
        return None
    if words[0] in YES_WORDS:
        return True
    return False if words[0] in NO_WORDS else None


def units(text: str) -> int:
    """Length as Twilio counts it: UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def split_sms(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """``text`` as texts of at most ``limit`` characters, cut after a sentence (or a line)
    ends; a sentence longer than a text is cut between words, a word longer than that
    anywhere. Consecutive sentences share a text while they fit."""
    text = text.strip()
    if not text:
        return []
    cuts = [match.end() for match in _SENTENCE_END.finditer(text)]
    sentences = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    messages: list[str] = []
    current = ""
    for sentence in sentences:
        for piece in _pieces(sentence, limit):
            if current and units((current + piece).strip()) > limit:
                messages.append(current.strip())
                current = ""
            current += piece
    if current.strip():
        messages.append(current.strip())
    return [message for message in messages if message]


def _pieces(sentence: str, limit: int) -> list[str]:
    """A sentence in parts that each fit a text: cut at the last space that fits, else at
    the limit itself."""
    pieces = []
    while units(sentence.strip()) > limit:
        end = _fitting_prefix(sentence, limit)
        space = sentence.rfind(" ", 0, end + 1)
        cut = space + 1 if space > 0 else end
        pieces.append(sentence[:cut])
        sentence = sentence[cut:]
    return [*pieces, sentence]


def _fitting_prefix(text: str, limit: int) -> int:
    """The most characters of ``text`` whose UTF-16 length is within ``limit``."""
    total = 0
    for index, character in enumerate(text):
        total += 2 if ord(character) > 0xFFFF else 1
        if total > limit:
            return index
    return len(text)


def help_text(settings: BotSettings) -> str:
    minutes = settings.idle_timeout_minutes
    ending = (
        f" A conversation ends after {minutes:g} minute{'' if minutes == 1 else 's'} without "
        "a text; I then ask whether to remember it."
        if minutes > 0
        else ""
    )
    return (
        f"{settings.bot_name} here: a chatbot that remembers what you tell it. Text me "
        f"anything.{ending} Your number is not stored. STOP: no more texts. START: resume. "
        "LINK: a code to be one person with your other channels. HELP: this text."
    )


# -- bots' numbers --------------------------------------------------------------------------


def bot_for_sms_number(memory: Memory, number: str) -> str | None:
    """The bot people reach at ``number`` (its profile's ``sms_number``), or None."""
    return memory.sms_number_owner(number)


# -- the idempotency record -----------------------------------------------------------------


def claim_sms(memory: Memory, text: IncomingText) -> SmsRecord | None:
    """None when ``text`` is new (recorded now as being answered by this process) or its
    answerer died (:func:`orphaned`: taken over now); else its record, for a text Twilio
    sent again. A worker killed while it answered left its texts "being answered" for a
    day: every retry got an empty answer, and a text still waiting its turn was never
    stored (a probe)."""
    store = _sms_store(memory)
    answerer = answering()
    record = SmsRecord(text.sid, text.bot, text.sender, utc_now(), answerer=answerer)
    seen = store.claim_sms_message(record, utc_now() - KEEP_RECORDS)
    if seen is not None and orphaned(seen) and store.take_over_sms_message(seen, answerer):
        log.warning("text %s: its answerer is gone; answering it again", text.sid)
        return None
    return seen


# What a record's ``answerer`` starts with: then the answering process's machine and id.
ANSWERING = "answering:"


def answering() -> str:
    """What a record's ``answerer`` holds while this process answers it."""
    return f"{ANSWERING}{socket.gethostname()}:{os.getpid()}"


def orphaned(record: SmsRecord, now: datetime | None = None) -> bool:
    """Whether ``record`` is still being answered by a process that is gone: one of this
    machine that no longer runs, or any after :data:`ORPHANED_AFTER`."""
    if not record.in_flight:
        return False
    if (now or utc_now()) - record.received_at > ORPHANED_AFTER:
        return True
    host, _, pid = (record.answerer or "").removeprefix(ANSWERING).rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False  # this process is answering it still
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as someone else
        return False
    return False


def record_sms_answer(memory: Memory, sid: str, replies: list[str], via: str) -> None:
    """How a text was answered (``twiml`` or ``api``), to answer it the same way again."""
    _sms_store(memory).answer_sms_message(sid, replies, via)


def _sms_store(memory: Memory) -> SmsStore:
    if not isinstance(memory.store, SmsStore):
        raise ConfigError(f"this store ({type(memory.store).__name__}) keeps no SMS state")
    return memory.store


# -- conversations ------------------------------------------------------------------------


class TextConversations:
    """One bot's conversations by text: each text in, the texts that answer it out."""

    def __init__(self, bot: Bot, take_turn: Callable[..., Turn] | None = None) -> None:
        """``take_turn(text, user=, thread=, source_key=)`` takes each turn: by default the
        bot's own ``turn``; a server passes one that holds the thread's lock and counts it."""
        self.bot = bot
        self.memory = bot.memory
        self.store = _sms_store(bot.memory)
        self.take_turn = take_turn or bot.turn

    def answer(self, text: IncomingText, now: datetime | None = None) -> list[str]:
        """The texts that answer ``text`` (none for STOP or while silenced), decided in the
        order the module's docstring gives.

        The sender's state is changed only if no one changed it since it was read (another
        server process answering their previous text): else the text is decided again on
        the state as it is now, so a held text is never overwritten."""
        for _ in range(STATE_RETRIES):
            try:
                return self._answer(text, now or utc_now())
            except _StateChanged:
                continue
        raise ConflictError(f"text {text.sid}: the sender's state kept changing; try again")

    def _answer(self, text: IncomingText, now: datetime) -> list[str]:
        state = self._state(text.sender)
        word = keyword(text.body)
        if word == "stop":
            self._save(state, replace(state, stopped=True))
            return []
        if state.stopped:
            if word == "start" or _single_word(text.body) == "yes":
                self._save(state, replace(state, stopped=False))
            return []
        if word == "start":
            return []
        settings = self.memory.bot_settings(self.bot.name)
        if word == "help":
            return [help_text(settings)]
        link = link_request(text.body)
        if link is not None:  # never a line: the text may hold a code
            return [answer_link_request(self.memory, link, sender=text.sender,
                                        bot=self.bot.name, now=now)]  # fmt: skip
        if not text.body.strip():
            return [MEDIA_ONLY] if text.media else [EMPTY]
        if state.asking_about is not None:
            return self._settle(state, text)
        if self._thread_is_over(state, settings, now):
            return self._ask_or_begin(state, text, now)
        if state.thread is None:
            state = self._save(state, replace(state, thread=self._new_thread(text.sender, now)))
        assert state.thread is not None
        return self._turn(text.body, text.sid, text.sender, state.thread)

    def _state(self, sender: str) -> SmsSender:
        """The sender's stored state, made blank on their first text."""
        stored = self.store.sms_sender(self.bot.name, sender)
        if stored is None:
            self.store.save_sms_sender(SmsSender(self.bot.name, sender), None)
            stored = self.store.sms_sender(self.bot.name, sender)
        assert stored is not None
        return stored

    def _save(self, read: SmsSender, new: SmsSender) -> SmsSender:
        """Store ``new`` if the state is still as ``read``; else :class:`_StateChanged`."""
        if not self.store.save_sms_sender(new, read):
            raise _StateChanged
        return new

    def _new_thread(self, user: str, now: datetime) -> str:
        return self.memory.new_thread_name(bot=self.bot.name, user=user, now=now)

    def _thread_is_over(self, sender: SmsSender, settings: BotSettings, now: datetime) -> bool:
        """The sender's thread was ended (here or elsewhere), forgotten, or has been idle
        past the bot's timeout."""
        if sender.thread is None:
            return False
        state = self.memory.thread_state(
            bot=self.bot.name, user=sender.sender, thread=sender.thread
        )
        if state is None or state.last_line_at is None:
            return state is None  # forgotten: begin anew; made but never said in: go on
        if state.ended_at is not None:
            return True
        minutes = settings.idle_timeout_minutes
        return minutes > 0 and state.last_line_at < now - timedelta(minutes=minutes)

    def _ask_or_begin(self, state: SmsSender, text: IncomingText, now: datetime) -> list[str]:
        """End the old thread unremembered and ask about it, holding ``text``; or, with
        nothing to ask about (forgotten, or summarised already), begin anew at once."""
        old, new = state.thread, self._new_thread(text.sender, now)
        if old is None or not self._worth_asking(text.sender, old):
            self._save(state, replace(state, thread=new))
            return self._turn(text.body, text.sid, text.sender, new)
        self.bot.end_thread(user=text.sender, thread=old, remember=False)
        asking = replace(
            state, thread=new, asking_about=old, held_text=text.body, held_sid=text.sid
        )
        self._save(state, asking)
        return [QUESTION]

    def _worth_asking(self, user: str, thread: str) -> bool:
        state = self.memory.thread_state(bot=self.bot.name, user=user, thread=thread)
        if state is None or state.last_line_at is None:
            return False
        return not any(
            summary.person == user
            and summary.thread == thread
            and summary.covers_to >= state.last_line_at
            for summary in self.memory.summaries(user=user, bot=self.bot.name)
        )

    def _settle(self, state: SmsSender, text: IncomingText) -> list[str]:
        """The answer to the remember question; then the held text is said and answered.

        The state is cleared last: a crash before leaves the question open, and answering it
        again neither keeps a second summary nor stores a held text twice."""
        assert state.asking_about is not None and state.thread is not None
        user, thread = text.sender, state.thread
        held, held_sid = state.held_text or "", state.held_sid or text.sid
        answer = consent(text.body)
        if answer is None:
            acknowledgement = TAKEN_AS_NO
        elif answer:
            kept = self._remember(user, state.asking_about)
            acknowledgement = KEPT if kept else NOTHING_KEPT
        else:
            acknowledgement = NOT_KEPT
        if answer is not None:
            replies = self._turn(held, held_sid, user, thread) if held.strip() else []
        else:
            if held.strip():
                self._say(held, held_sid, user, thread)
            replies = self._turn(text.body, text.sid, user, thread)
        # Settled either way: if another process settled it meanwhile, its state stands.
        settled = replace(state, asking_about=None, held_text=None, held_sid=None)
        self.store.save_sms_sender(settled, state)
        return [acknowledgement, *replies]

    def _remember(self, user: str, thread: str) -> bool:
        """Keep the thread's key points; whether anything was kept."""
        try:
            ending = self.bot.end_thread(user=user, thread=thread, remember=True)
        except (NotFoundError, ConfigError):  # forgotten meanwhile: nothing to keep
            return False
        return ending.remembered is not None

    def _say(self, body: str, sid: str, user: str, thread: str) -> None:
        """Store a line the bot does not answer on its own (a held text)."""
        item = LineInput(
            body, user, thread, Role.HUMAN, self.bot.name, source_key=SOURCE_PREFIX + sid
        )
        with suppress(ConflictError):  # stored by an earlier try of this text
            self.memory.add_with_vector(item)

    def _turn(self, body: str, sid: str, user: str, thread: str) -> list[str]:
        """The bot's answer to ``body`` in ``thread``, cut into texts."""
        try:
            turn = self.take_turn(body, user=user, thread=thread, source_key=SOURCE_PREFIX + sid)
        except ConflictError:  # stored by an earlier try of this text
            # Answered then, or its answerer died before the reply (the thread ends with it).
            lines = self.memory.history(user=user, bot=self.bot.name, thread=thread)
            return [UNANSWERED] if lines and lines[-1].role == Role.HUMAN else []
        except NotFoundError as gone:  # forgotten (or its bot deleted) while it was answered
            log.info("a text's thread is gone: %s", gone)
            return []
        except TurnFailedError as failed:  # the text is kept, as the answer says
            log.warning("a text's turn failed after it was stored: %s", failed)
            return [UNANSWERED]
        if turn.error is not None:
            return [UNANSWERED]
        return split_sms(turn.response)


class _StateChanged(Exception):
    """The sender's state changed between reading and writing it."""


def _single_word(body: str) -> str | None:
    """The one word a text is, give or take spaces and punctuation (lowercase), or None."""
    match = _ONE_WORD.fullmatch(body)
    return match.group(1).lower() if match else None

"""Linking by text message: ``LINK`` asks for a link code, ``LINK K7QF-3M9P`` enters one
(any case, spaces or hyphens anywhere), ``UNLINK`` takes the number out of its links
(:mod:`membot.memory.person_links` decides; this module reads the texts and words the replies).

None of these texts is a line of a thread: they are answered before a turn could store them,
and nothing here logs them. A reply that holds a new code is never kept in the SMS records:
:func:`kept_replies` keeps :data:`CODE_SENT_BEFORE` in its place, which is what a retried
webhook answers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from membot.errors import LinkCodeError, NotFoundError, TooManyAttemptsError

if TYPE_CHECKING:
    from membot.memory.facade import Memory
    from membot.memory.person_links import Linked

SMS_PREFIX = "sms-"  # how the store names a person who texts (text_messages.sms_sender_name)
CODE_CHARACTERS = 8
# "LINK", "link k7qf-3m9p", "Link: K7QF 3M9P." — the word, then at most a code's characters.
_LINK = re.compile(r"\s*link\b[\s:.!]*(?P<code>[0-9a-z][0-9a-z\s-]*?)?[\s.!]*", re.IGNORECASE)
_UNLINK = re.compile(r"[\s.!]*unlink[\s.!]*", re.IGNORECASE)

CODE_SENT_BEFORE = (
    "A link code was sent in answer to this text before; it is not sent twice. If it did "
    "not arrive, text LINK for a new one."
)
NOT_KNOWN_YET = (
    "I don't know this number yet: text me something first, then text LINK to get a code."
)


@dataclass(frozen=True)
class LinkRequest:
    """What a text asks of links: a new ``code``, to ``enter`` the code given, or ``unlink``."""

    action: Literal["code", "enter", "unlink"]
    code: str = ""

    def __repr__(self) -> str:  # a code never reaches a log through a repr
        return f"LinkRequest({self.action!r})"


def link_request(body: str) -> LinkRequest | None:
    """The link request a whole text is, or None for any other text. ``LINK`` and one word
    of 8 letters or digits (spaces and hyphens aside) is a code entered; ``LINK`` followed by
    anything else is an ordinary text ("link me to that recipe")."""
    if _UNLINK.fullmatch(body):
        return LinkRequest("unlink")
    match = _LINK.fullmatch(body)
    if match is None:
        return None
    code = match["code"]
    if code is None:
        return LinkRequest("code")
    if len(re.sub(r"[\s-]", "", code)) != CODE_CHARACTERS:
        return None
    return LinkRequest("enter", code)


def kept_replies(body: str, replies: list[str]) -> list[str]:
    """What the SMS records keep of the replies to ``body`` for Twilio's retries: the
    replies, but for a text that asked for a code, :data:`CODE_SENT_BEFORE` instead."""
    request = link_request(body)
    if replies and request is not None and request.action == "code":
        return [CODE_SENT_BEFORE]
    return replies


def answer_link_request(
    memory: Memory, request: LinkRequest, *, sender: str, bot: str, now: datetime
) -> str:
    """The reply to a link request of ``sender`` (a person who texts ``bot``)."""
    try:
        if request.action == "code":
            made = memory.link_code(user=sender, bot=bot)
            minutes = max(1, round((made.expires_at - now).total_seconds() / 60))
            return (
                f"Your link code is {made.code}. Within {minutes} minutes, enter it where "
                "you talk with me elsewhere: the web app's Memory page (Link another "
                f"channel), the API or MCP; or text LINK {made.code} from your other phone. "
                "It works once."
            )
        if request.action == "enter":
            linked = memory.link_with_code(request.code, user=sender, bot=bot)
            return f"Linked: {_others(linked)}. Text UNLINK to undo."
        memory.unlink(user=sender, bot=bot)
        return "Unlinked: this number is a person of its own again from now on."
    except NotFoundError:
        return NOT_KNOWN_YET
    except LinkCodeError as error:
        return f"{_sentence(str(error))} Text LINK where you are known for a new code."
    except TooManyAttemptsError as error:
        minutes = max(1, math.ceil(error.retry_after / 60))
        return (
            f"Too many tries: wait {minutes} minute{'' if minutes == 1 else 's'}, then try again."
        )


def _others(linked: Linked) -> str:
    """The person's other identities, in words: names as they are, numbers as numbers."""
    others = [name for name in linked.linked if name != linked.person]
    phones = sum(name.startswith(SMS_PREFIX) for name in others)
    named = [name for name in others if not name.startswith(SMS_PREFIX)]
    parts = [*named, *([f"{phones} other phone{'' if phones == 1 else 's'}"] if phones else [])]
    if not parts:
        return "this number is linked with no one else"
    return "this number and " + ", ".join(parts) + " are one person to me now"


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."

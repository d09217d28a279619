"""One person across channels: identities of one bot (a web user name, an MCP user,
``sms-<hash>`` for a phone number) linked on purpose, with a short-lived code as proof.

An identity the bot knows asks for a code (:meth:`PersonLinks.link_code`) and enters it as
another identity within ten minutes (:meth:`PersonLinks.link_with_code`); from then on a
search by either spans both (``Scope.of`` reads the group), while each line keeps the
identity that said it. :meth:`PersonLinks.unlink` splits them again going forward.

A code is 8 characters of Crockford's base32 (40 random bits from :mod:`secrets`), shown as
``K7QF-3M9P``; the store keeps only its SHA-256. It is used once (marked in the transaction
that links), lives ten minutes, and neither it nor its hash is logged, traced or stored in a
line. A person may ask for 5 codes an hour and enter 5 wrong ones in 10 minutes
(:class:`~membot.errors.TooManyAttemptsError`); the counts are in the store, so every server
process sharing it counts alike. With 2**40 codes and 5 guesses per identity per 10 minutes,
guessing a live code is hopeless.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from membot.errors import ConfigError, LinkCodeError, NotFoundError, TooManyAttemptsError
from membot.model import Line, Summary, ThreadInfo, aware, utc_now
from membot.store import Store

# Crockford's base32: no I, L, O or U, so a code read aloud or retyped is not misread.
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 8
CODE_LIFETIME = timedelta(minutes=10)
CODES_PER_HOUR = 5
FAILURES_ALLOWED = 5
FAILURE_WINDOW = timedelta(minutes=10)
# The letters a person may type for the digits they look like (Crockford's decoding).
_READ_AS = str.maketrans({"I": "1", "L": "1", "O": "0"})


@dataclass(frozen=True)
class LinkCode:
    """A code to enter as another identity of the same bot before ``expires_at`` (UTC)."""

    code: str
    expires_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "expires_at": self.expires_at.isoformat()}


@dataclass(frozen=True)
class Linked:
    """The identities ``person`` is one person with: ``linked``, sorted, ``person`` included
    (just ``(person,)`` when it is linked with nobody)."""

    person: str
    linked: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"person": self.person, "linked": list(self.linked)}


def new_code() -> str:
    """A fresh code as shown: ``K7QF-3M9P``."""
    letters = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return f"{letters[:4]}-{letters[4:]}"


def code_hash(entered: str) -> str | None:
    """The hash the store keeps of a code as a person typed it (case, spaces and hyphens
    ignored); None when it cannot be a code at all."""
    letters = "".join(entered.split()).replace("-", "").upper().translate(_READ_AS)
    if len(letters) != CODE_LENGTH or any(letter not in ALPHABET for letter in letters):
        return None
    return hashlib.sha256(letters.encode()).hexdigest()


def _name(value: object, label: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label} is a name, not {value!r}")
    return value


def _moment(now: datetime | None) -> datetime:
    return aware(now) if now is not None else utc_now()


class PersonLinks:
    """Linking identities of a bot as one person; mixed into ``Memory``."""

    store: Store

    def link_code(self, *, user: str, bot: str, now: datetime | None = None) -> LinkCode:
        """A new code linking ``user`` (known to ``bot``: it has a thread there, else
        ``NotFoundError``) with whichever identity of the bot enters it within ten minutes.
        ``TooManyAttemptsError`` after 5 codes within an hour. ``now``: the clock (tests)."""
        user, bot = _name(user, "user"), _name(bot, "bot")
        if not self.store.threads(bot, user):
            raise NotFoundError(
                f"{user!r} has not talked with bot {bot!r} yet: a link code is asked for "
                "where the person is known"
            )
        moment = _moment(now)
        code = new_code()
        while self.store.link_code_taken(_hash(code)):  # 1 in 2**40 per code kept
            code = new_code()
        expires = moment + CODE_LIFETIME
        wait = self.store.add_link_code(
            bot, user, _hash(code), expires, now=moment, most=CODES_PER_HOUR,
            per=timedelta(hours=1),
        )  # fmt: skip
        if wait is not None:
            raise TooManyAttemptsError(
                f"{CODES_PER_HOUR} link codes were asked for within the hour: "
                f"try again in {_minutes(wait)}",
                wait,
            )
        return LinkCode(code, expires)

    def link_with_code(
        self, code: str, *, user: str, bot: str, now: datetime | None = None
    ) -> Linked:
        """``user`` enters ``code``, made by another identity of ``bot``: from now on the two
        (and whoever either was linked with) are one person. ``LinkCodeError`` for a code
        that is wrong, used, expired, another bot's or ``user``'s own, all alike;
        ``TooManyAttemptsError`` after 5 wrong codes within 10 minutes."""
        user, bot = _name(user, "user"), _name(bot, "bot")
        if not isinstance(code, str):
            raise LinkCodeError()
        entry = self.store.enter_link_code(
            bot, user, code_hash(code), now=_moment(now), most_failures=FAILURES_ALLOWED,
            per=FAILURE_WINDOW,
        )  # fmt: skip
        if entry.retry_after is not None:
            raise TooManyAttemptsError(
                f"{FAILURES_ALLOWED} wrong link codes were entered within "
                f"{FAILURE_WINDOW.seconds // 60} minutes: try again in "
                f"{_minutes(entry.retry_after)}",
                entry.retry_after,
            )
        if entry.linked is None:
            raise LinkCodeError()
        return Linked(user, entry.linked)

    def unlink(self, *, user: str, bot: str) -> Linked:
        """Take ``user`` out of the identities it is linked with by ``bot``: from now on each
        sees only its own lines again (lines already said stay where they are)."""
        user, bot = _name(user, "user"), _name(bot, "bot")
        if self.store.bot_id(bot) is None:
            raise NotFoundError(f"no bot named {bot!r}")
        self.store.unlink_person(bot, user)
        return Linked(user, (user,))

    def linked(self, *, user: str, bot: str) -> Linked:
        """The identities ``user`` is one person with for ``bot``."""
        user, bot = _name(user, "user"), _name(bot, "bot")
        return Linked(user, self.store.linked_people(bot, user))


def identities(store: Store, user: str, bot: str | None) -> list[tuple[str, str | None]]:
    """Whose lines are ``user``'s, as (person, bot) pairs: ``user``'s own with ``bot`` (every
    bot's where None), and those of each identity linked with ``user`` by that bot (by each
    bot ``user`` is linked by, where None)."""
    found: list[tuple[str, str | None]] = [(user, bot)]
    for each in [bot] if bot else store.link_bots(user):
        found += [(other, each) for other in store.linked_people(each, user) if other != user]
    return found


def linked_history(store: Store, user: str, bot: str | None) -> list[Line]:
    """The lines of ``user`` and of every identity linked with them (:func:`identities`),
    thread by thread in the order the threads began, each line saying whose it is."""
    owners = identities(store, user, bot)
    if len(owners) == 1:  # linked with nobody: as the store orders them
        return store.history(user, bot, None)
    lines = [line for person, each in owners for line in store.history(person, each, None)]
    first: dict[tuple[str, str, str], int] = {}
    for line in lines:
        key = (line.bot, line.person, line.thread)
        first[key] = min(first.get(key, line.id), line.id)
    return sorted(lines, key=lambda line: (first[line.bot, line.person, line.thread], line.seq))


def linked_threads(store: Store, user: str, bot: str | None) -> list[ThreadInfo]:
    """The threads of ``user`` and of every identity linked with them, oldest first."""
    owners = identities(store, user, bot)
    threads = [thread for person, each in owners for thread in store.threads(each, person)]
    if len(owners) == 1:
        return threads
    return sorted(threads, key=lambda thread: thread.created_at)


def linked_summaries(store: Store, user: str, bot: str | None) -> list[Summary]:
    """The summaries kept of ``user``'s threads and of every identity linked with them."""
    summaries = [summary for person, each in identities(store, user, bot)
                 for summary in store.summaries(person, each)]  # fmt: skip
    return sorted(summaries, key=lambda summary: summary.id)


def _hash(code: str) -> str:
    hashed = code_hash(code)
    assert hashed is not None  # a code new_code made
    return hashed


def _minutes(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"

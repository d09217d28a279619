"""What a line must be before any store takes it, checked in one place for every way in
(a turn, a tool result, an import, the API).

Text that no store can keep is refused here with a message saying what to change, rather
than met later as a store error: PostgreSQL keeps no NUL character in text, and neither
store can write a lone surrogate (what a JSON ``"\\ud800"`` decodes to) as UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from membot.errors import ConfigError
from membot.model import Role

if TYPE_CHECKING:
    from membot.model import LineInput

# The longest line membot stores (docs/server.md: the server answers 413 past it). A line is
# stored whole however long (a pasted document, LongMemEval_S's turns of 41,855 characters),
# and searched whole: past the 256 word pieces its own vector reads, its parts' vectors
# (windows of the line, membot.memory.line_parts) and its BM25 row cover the rest. The
# limit only keeps one line from costing minutes to embed: a million characters are about
# 1,300 windows.
MAX_LINE_CHARS = 1_000_000
# The longest name (bot, person, thread) or speaker a line may carry, as the server's routes
# take: a name stands in URLs, in every prompt's transcript and in every recalled block.
MAX_NAME_CHARS = 200
# The longest ref (where an imported line came from: an id, a URL). It keys the line's
# thread in an index, which PostgreSQL keeps to 2,704 bytes (UTF-8: at most 4 a character).
MAX_REF_CHARS = 500
# In a Python string every surrogate is a lone one: pairs decode to one character.
SURROGATE = re.compile("[\ud800-\udfff]")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # and the line separators


def check_storable(value: str, what: str) -> str:
    """``value`` if a store can keep it as text; else ``ConfigError`` naming ``what``."""
    if "\x00" in value:
        raise ConfigError(f"{what} holds a NUL character (\\u0000), which is not text: remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConfigError(
            f"{what} is not valid Unicode (a lone surrogate at character {error.start}): "
            "send it as UTF-8"
        ) from None
    return value


def storable(text: str) -> str:
    """Text a model wrote, made storable: its NULs dropped, lone surrogates replaced by
    U+FFFD. A reply is stored as it came, not refused, since the person has it already."""
    return SURROGATE.sub("\ufffd", text.replace("\x00", ""))


def check_name(value: object, label: str, *, missing: str | None = None) -> str:
    """A name (bot, person, thread): a non-blank string a store can keep, that can stand in
    the server's URLs (:func:`check_url_part`). A thread's or a person's may hold "/"
    (LoCoMo's imported threads are named "conv-26/session_1"; an OpenAI client's ``user``
    may be "org/42"); a bot's, which opens every route about it, may not."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(missing or f"a line needs a {label} name")
    what = f"the {label} name"
    if len(value) > MAX_NAME_CHARS:
        raise ConfigError(f"{what} has {len(value):,} characters; at most {MAX_NAME_CHARS}")
    return check_url_part(check_storable(value, what), what, slash=label != "bot")


def check_bot_name(bot: object) -> str:
    """``bot`` if it can name a bot (:func:`check_name`), said of a bot rather than a line."""
    return check_name(bot, "bot", missing=f"a bot needs a name, not {bot!r}")


def check_url_part(value: str, what: str, *, slash: bool = False) -> str:
    """``value`` if it can stand in a URL path and on one line of a prompt: no "." or ".."
    between slashes (a browser resolves those, so a request about a thread named ".." reached
    all of the person's threads), no "/" unless ``slash`` (elsewhere it would split the part
    in two) and no control characters (a line break in a name would start a line in a
    prompt)."""
    if dots := {".", ".."} & set(value.split("/")):
        raise ConfigError(f"{what} {value!r} cannot be or hold {dots.pop()!r} between slashes: "
                          "a URL would read it as a folder")  # fmt: skip
    if not slash and "/" in value:
        raise ConfigError(f"{what} {value!r} holds '/', which separates the parts of a URL")
    if bad := CONTROL.search(value):
        raise ConfigError(f"{what} {value!r} holds a control character ({bad[0]!r})")
    return value


ROLES = tuple(role.value for role in Role)


def check_roles(roles: object) -> tuple[str, ...]:
    """``roles`` as a tuple of role names (human, bot, tool, system); else ``ConfigError``."""
    if isinstance(roles, str) or not isinstance(roles, Iterable):
        raise ConfigError(f"roles is a list of roles ({', '.join(ROLES)}), not {roles!r}")
    found = tuple(roles)
    if unknown := [role for role in found if not isinstance(role, str) or role not in ROLES]:
        raise ConfigError(f"unknown role {unknown[0]!r}: use {', '.join(ROLES)}")
    return tuple(str(role) for role in found)


def checked_line(item: LineInput) -> LineInput:
    """``item`` with its role parsed; ``ConfigError`` saying what is wrong otherwise."""
    if not isinstance(item.text, str) or not item.text.strip():
        raise ConfigError("a line needs some text")
    if (too_long := too_long_message(item)) is not None:
        raise ConfigError(too_long)
    check_storable(item.text, "the line")
    for label, name in (("user", item.user), ("thread", item.thread), ("bot", item.bot)):
        check_name(name, label)
    for label, value in (("speaker", item.speaker), ("ref", item.ref)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"a line's {label} is text, not {type(value).__name__}")
        if value is not None:
            check_storable(value, f"the {label}")
    for label, value, limit in (
        ("speaker", item.speaker, MAX_NAME_CHARS),
        ("ref", item.ref, MAX_REF_CHARS),  # past it, PostgreSQL's index refused the line: a 503
    ):
        if value is not None and len(value) > limit:
            raise ConfigError(f"a line's {label} has {len(value):,} characters; at most {limit}")
    try:
        role = Role(item.role)
    except ValueError as error:
        raise ConfigError(f"unknown role {item.role!r}: use human, bot, tool or system") from error
    if item.created_at is not None:
        check_moment(item.created_at, "created_at")
    return replace(item, role=role)


def too_long_message(item: LineInput) -> str | None:
    """What is said of a line over ``MAX_LINE_CHARS``, naming it; None for one within."""
    if len(item.text) <= MAX_LINE_CHARS:
        return None
    return (
        f"a line is limited to {MAX_LINE_CHARS:,} characters; the line {_named(item)} has "
        f"{len(item.text):,}, and nothing of it was stored: split it, or add it as a "
        "document (`membot expertise add`)"
    )


def _named(item: LineInput) -> str:
    """A line as a message names it: its thread, speaker or ref, and how it begins."""
    where = [f"{label} {value!r}" for label, value in
             (("in thread", item.thread), ("by", item.speaker), ("ref", item.ref))
             if isinstance(value, str)]  # fmt: skip
    start = " ".join(item.text[:40].split())
    return f"{' '.join(where)} starting {start!r}".strip()


def check_moment(value: object, what: str) -> datetime:
    """``value`` if it is a date and time with a time zone; else ``ConfigError``. A time
    without one is refused, not guessed: membot stores UTC, and local time on a server is
    not the person's (a date written in an imported file without a zone is read as UTC)."""
    if not isinstance(value, datetime):
        raise ConfigError(f"{what} is a date and time (datetime), not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigError(
            f"{what} needs a time zone (membot stores UTC): datetime.now(UTC), or "
            "datetime(..., tzinfo=ZoneInfo('Europe/Paris'))"
        )
    return value

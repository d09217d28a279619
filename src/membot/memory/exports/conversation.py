"""What the export readers make of a conversation, whatever its format: a title, an id and
its lines in order; and the tally of what a reading kept, skipped and found malformed."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from membot.line_checks import MAX_NAME_CHARS
from membot.memory.importers import parse_time
from membot.model import Role

# A file of a million broken messages names the first ones and counts the rest.
PROBLEMS_NAMED = 50
UNTITLED = "Untitled"
CONTROL_OR_SPACE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")


class Malformed(Exception):
    """A conversation or message that is not in its format's shape; the reader names where
    and skips it."""


@dataclass(frozen=True)
class ExportedLine:
    """One line of a conversation: ``ref`` is where it came from in the export (the
    message's id, ``#2`` and on for a message's further lines)."""

    ref: str | None
    role: Role
    text: str
    created_at: datetime
    speaker: str | None = None


@dataclass(frozen=True)
class ExportedConversation:
    id: str
    title: str
    lines: list[ExportedLine]


@dataclass
class Tally:
    """What a reading met: conversations and lines read, messages skipped by kind (not
    malformed, only not stored: system messages, abandoned branches), and the malformed
    parts, named (the first ``PROBLEMS_NAMED``) and counted."""

    conversations: int = 0
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    within: str | None = None  # the conversation being read, which a problem names first

    def skip(self, kind: str, count: int = 1) -> None:
        if count:
            self.skipped[kind] += count

    def problem(self, where: str, reason: object) -> None:
        self.problem_count += 1
        if len(self.problems) < PROBLEMS_NAMED:
            where = f"{self.within}, {where}" if self.within else where
            self.problems.append(f"{where}: {reason}")

    def to_json(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "lines": self.lines,
            "skipped": dict(self.skipped),
            "malformed": self.problem_count,
            "problems": list(self.problems),
        }


def thread_name(title: str, conversation_id: str) -> str:
    """The thread of a conversation: its title, then the start of its id, since titles
    repeat ("New chat") and a thread is one conversation. The id makes the name the same
    in every later export of the conversation, so importing a newer export adds only its
    new lines. The title is made a name membot takes: one line, no "." or ".." between
    slashes, at most ``MAX_NAME_CHARS``."""
    suffix = f" · {conversation_id[:8]}"
    clean = CONTROL_OR_SPACE.sub(" ", title).strip() or UNTITLED
    if {".", ".."} & {part.strip() for part in clean.split("/")}:
        clean = clean.replace("/", "\u2215")  # a division slash: no folder in a URL
    room = MAX_NAME_CHARS - len(suffix)
    if len(clean) > room:
        clean = clean[: room - 1].rstrip() + "…"
    return clean + suffix


def label(number: int, title: object) -> str:
    """How a problem names a conversation: its place in the file and its title."""
    if isinstance(title, str) and title.strip():
        shown = title if len(title) <= 60 else title[:59] + "…"
        return f"conversation {number} ({shown!r})"
    return f"conversation {number}"


def epoch_time(value: object, what: str) -> datetime | None:
    """A Unix time in seconds (ChatGPT's ``create_time``), None when left out."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Malformed(f"{what} is not a time in seconds: {value!r}")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise Malformed(f"{what} {value!r} is no date") from None


def iso_time(value: object, what: str) -> datetime | None:
    """An ISO 8601 time (Claude's ``created_at``), None when left out."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Malformed(f"{what} is not a date: {value!r}")
    try:
        return parse_time(value)
    except ValueError:
        raise Malformed(f"{what} {value!r} is not a date") from None


def text_of(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise Malformed(f"{what} is not text but {type(value).__name__}")
    return value


def object_of(value: object, what: str) -> dict[str, Any]:
    """``value``, which must be a JSON object: else ``Malformed`` (``not a message (an
    object) but list``)."""
    if not isinstance(value, dict):
        raise Malformed(f"not {what} (an object) but {type(value).__name__}")
    return value


def conversation_id_of(value: object, field: str) -> str:
    """A conversation's id, read from its ``field``: text that is not blank, else
    ``Malformed``."""
    if not isinstance(value, str) or not value.strip():
        raise Malformed(f"no {field}")
    return value


def title_or_untitled(title: object) -> str:
    """A conversation's title as given, or ``UNTITLED`` when it has none."""
    return title if isinstance(title, str) and title.strip() else UNTITLED


def file_names(files: object) -> list[str]:
    """Placeholders for the files a message carries (their names; the files are not in the
    export's JSON): "[file: plan.pdf]"."""
    if not isinstance(files, list):
        return []
    names = []
    for each in files:
        name = each.get("file_name") or each.get("name") if isinstance(each, dict) else None
        names.append(f"[file: {name}]" if isinstance(name, str) and name else "[file]")
    return names

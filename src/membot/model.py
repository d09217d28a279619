"""Plain data that flows between membot's parts. Imports nothing of membot."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

# The bot a line goes to, and a call speaks for, where none is named.
DEFAULT_BOT = "membot"


class Role(StrEnum):
    HUMAN = "human"
    BOT = "bot"
    TOOL = "tool"
    SYSTEM = "system"


def utc_now() -> datetime:
    return datetime.now(UTC)


def aware(moment: datetime) -> datetime:
    """``moment`` with a time zone: a naive time is taken as local, as Python reads it."""
    return moment if moment.tzinfo else moment.astimezone()


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a trailing Z, the one date format membot prints."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Line:
    """One line of dialog as stored."""

    id: int
    bot: str
    person: str
    thread: str
    seq: int
    role: Role
    text: str
    created_at: datetime
    tokens: int
    speaker: str | None = None
    ref: str | None = None  # the line's id in the source it was imported from

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "person": self.person,
            "seq": self.seq,
            "role": str(self.role),
            "speaker": self.speaker,
            "text": self.text,
            "created_at": iso(self.created_at),
            "ref": self.ref,
        }


@dataclass(frozen=True)
class Summary:
    """Key points about a person from an ended conversation, kept with their consent."""

    id: int
    bot: str
    person: str
    thread: str
    text: str
    categories: tuple[str, ...]
    created_at: datetime
    covers_from: datetime  # the conversation's first and last line
    covers_to: datetime
    tokens: int
    kind: str = "summary"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "bot": self.bot,
            "user": self.person,
            "thread": self.thread,
            "text": self.text,
            "categories": list(self.categories),
            "created_at": iso(self.created_at),
            "covers_from": iso(self.covers_from),
            "covers_to": iso(self.covers_to),
        }


@dataclass(frozen=True)
class Correction:
    """A kept key point as the person corrected it: how it read, how it reads since."""

    old_text: str
    new_text: str
    corrected_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"old": self.old_text, "new": self.new_text, "corrected_at": iso(self.corrected_at)}


@dataclass(frozen=True)
class ExpertiseChunk:
    """A passage of one of a bot's documents."""

    id: int
    document: str
    title: str
    ord: int
    heading: str | None
    text: str
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "document": self.document,
            "title": self.title,
            "ord": self.ord,
            "heading": self.heading,
            "text": self.text,
        }


@dataclass(frozen=True)
class ThreadState:
    """A thread's bookkeeping: when it ended, and the running summary of what scrolled off."""

    id: int
    bot: str
    person: str
    name: str
    created_at: datetime
    ended_at: datetime | None
    summary: str
    summary_through: int  # the last seq folded into the summary
    last_line_at: datetime | None


@dataclass(frozen=True)
class ThreadInfo:
    """A person's thread as a front end lists it."""

    bot: str
    person: str
    name: str
    lines: int
    created_at: datetime
    last_line_at: datetime | None
    ended_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "bot": self.bot,
            "user": self.person,
            "thread": self.name,
            "lines": self.lines,
            "created_at": iso(self.created_at),
            "last_line_at": iso(self.last_line_at) if self.last_line_at else None,
            "ended_at": iso(self.ended_at) if self.ended_at else None,
        }


@dataclass(frozen=True)
class Match:
    """A stored line that scored against a query; ``duplicates``: how many near-duplicates of
    it recall collapsed into this match (the same question asked in four threads is one)."""

    line: Line
    score: float
    duplicates: int = 0
    # The id of a later recalled line that states another value of the same thing: this
    # line is history, that one is current (membot.recall.supersession).
    superseded_by: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 4),
            "thread": self.line.thread,
            # Whose line: the identity that said it (a channel's: a web user, ``sms-<hash>``),
            # which may be another than the asker's where identities are linked.
            "person": self.line.person,
            "duplicates": self.duplicates,
            "superseded_by": self.superseded_by,
            **self.line.to_json(),
        }


@dataclass(frozen=True)
class Block:
    """A run of consecutive lines of one thread, recalled because one of them matched."""

    thread: str
    person: str
    lines: tuple[Line, ...]
    score: float
    matched_seqs: tuple[int, ...] = ()
    carried: bool = False  # held in the relevance buffer from an earlier turn

    @property
    def first_seq(self) -> int:
        return self.lines[0].seq

    @property
    def last_seq(self) -> int:
        return self.lines[-1].seq

    @property
    def started_at(self) -> datetime:
        return self.lines[0].created_at

    def to_json(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "person": self.person,
            "score": round(self.score, 4),
            "matched_seqs": list(self.matched_seqs),
            "carried_over": self.carried,
            "lines": [line.to_json() for line in self.lines],
        }


@dataclass(frozen=True)
class Citation:
    """A hint the reply used: named by the model, or, for a model that cannot cite, found by
    the reply's words (``found_by`` "words", membot.turn.word_citations)."""

    id: str
    text: str
    source: str  # "history" or "expertise"
    score: float
    found_by: str = "model"  # or "words"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "source": self.source,
                "score": round(self.score, 4), "found_by": self.found_by}  # fmt: skip


@dataclass(frozen=True)
class Turn:
    """Everything one turn did: the reply and the whole trace behind it."""

    response: str
    bot: str
    person: str
    thread: str
    human_line: Line
    bot_line: Line | None
    recalled: tuple[Block, ...]
    prompt: str
    messages: tuple[dict[str, str], ...]
    tokens: dict[str, int]
    timings_ms: dict[str, float]
    cut: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    matches: tuple[Match, ...] = ()
    # The chatState trace: the score of what informed the reply, citations, and every
    # piece of the prompt (hints as dicts with id, source, kind, score, text).
    score: float | None = None
    citations: tuple[Citation, ...] = ()
    feed: str = ""
    story: str = ""
    history_match_string: str = ""
    history_matches: tuple[dict[str, Any], ...] = ()
    history_hints: str = ""
    expertise_match_string: str = ""
    expertise_matches: tuple[dict[str, Any], ...] = ()
    expertise_hints: str = ""
    notes: tuple[str, ...] = ()  # what went differently: malformed reply, checks, summaries

    def to_json(self) -> dict[str, Any]:
        return {
            "response": self.response,
            "score": None if self.score is None else round(self.score, 4),
            "citations": [citation.to_json() for citation in self.citations],
            "feed": self.feed,
            "story": self.story,
            "history_match_string": self.history_match_string,
            "history_matches": [dict(match) for match in self.history_matches],
            "history_hints": self.history_hints,
            "expertise_match_string": self.expertise_match_string,
            "expertise_matches": [dict(match) for match in self.expertise_matches],
            "expertise_hints": self.expertise_hints,
            "notes": list(self.notes),
            "bot": self.bot,
            "user": self.person,
            "thread": self.thread,
            "line": self.human_line.to_json(),
            "reply_line": self.bot_line.to_json() if self.bot_line else None,
            "recalled": [block.to_json() for block in self.recalled],
            "matches": [match.to_json() for match in self.matches],
            "prompt": self.prompt,
            "messages": [dict(message) for message in self.messages],
            "tokens": dict(self.tokens),
            "timings_ms": {key: round(value, 2) for key, value in self.timings_ms.items()},
            "cut": dict(self.cut),
            "error": self.error,
        }


def embedding_text(text: str, speaker: str | None) -> str:
    """The text a line is embedded as: ``Speaker: text`` when a speaker is known, so a
    question naming a person ("When did Caroline...") meets what that person said (LoCoMo
    R@10 .58 -> .64 with MiniLM); the stored text and its lexical row stay the line's own."""
    return f"{speaker}: {text}" if speaker else text


@dataclass(frozen=True)
class LineInput:
    """A line to add in bulk (imports). ``source_key`` says where it came from (the
    importers set it: ``ref:`` and its ref, or its place and text in the file); a thread holds
    each key once, so :meth:`Memory.add_many` skips a line whose key is stored already."""

    text: str
    user: str
    thread: str
    role: Role | str = Role.HUMAN
    bot: str = DEFAULT_BOT
    created_at: datetime | None = None
    speaker: str | None = None
    ref: str | None = None
    source_key: str | None = None
    answers: int | None = None  # the id of the line this reply answers (NewLine.answers)

"""What membot keeps about one person, as they may see and correct it: their lines by
thread, and the key points kept about them (with consent, when a thread ended), each with
its date and the corrections the person made to it. A mixin of
:class:`~membot.memory.facade.Memory`.

A person deletes one line (gone from the store, the full-text index, every vector index and
the embedding cache at once, as forgetting a thread does: :mod:`membot.memory.forgetting`),
deletes one key point, or corrects one: the summary holding it is rewritten and embedded
again, so the next turn's recall reads the new text, and the old one is kept as the point's
history (``memory_corrections``). A deleted point takes its history with it.

Everything here is asked for in a person's name: a line or point of anyone else is
``NotFoundError`` worded as for one that never existed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from membot.embed import CachedEmbedder, Embedder
from membot.errors import ConfigError, NotFoundError
from membot.index.source import IndexedLines
from membot.memory.grounding import SAID_LABEL
from membot.memory.knowledge import summary_parts, summary_points
from membot.memory.person_links import linked_history, linked_summaries
from membot.model import Correction, Line, Summary, ThreadState, iso
from membot.sentences import sentences
from membot.store import Store, ThreadKey
from membot.turn.tokens import TokenCounter

MAX_POINT_CHARS = 2000  # a corrected key point: a sentence or a few, not a document


@dataclass(frozen=True)
class KeyPoint:
    """One kept key point: its summary and place in it (from 0), as it reads now, when it
    was kept, and its corrections, oldest first."""

    summary_id: int
    number: int
    text: str
    bot: str
    thread: str
    kept_at: datetime
    corrections: tuple[Correction, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "summary_id": self.summary_id,
            "number": self.number,
            "text": self.text,
            "bot": self.bot,
            "thread": self.thread,
            "kept_at": iso(self.kept_at),
            "corrections": [correction.to_json() for correction in self.corrections],
        }


@dataclass(frozen=True)
class ThreadLines:
    """A thread's lines, in order; ``person``: the identity whose thread it is (another than
    the one asking where identities are linked: membot.memory.person_links)."""

    bot: str
    thread: str
    lines: tuple[Line, ...]
    person: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "bot": self.bot,
            "thread": self.thread,
            "person": self.person,
            "lines": [line.to_json() for line in self.lines],
        }


@dataclass(frozen=True)
class PersonMemory:
    """Everything kept about a person (with one bot, or every bot), or what of it holds
    ``query``."""

    user: str
    bot: str | None
    query: str | None
    threads: tuple[ThreadLines, ...]
    key_points: tuple[KeyPoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "bot": self.bot,
            "query": self.query,
            "threads": [thread.to_json() for thread in self.threads],
            "key_points": [point.to_json() for point in self.key_points],
        }


def points_of(summary: Summary) -> list[str]:
    """A summary's key points: its "- " lines, or its whole text where it has none."""
    return summary_points(summary.text) or [summary.text.strip()]


def _with_point(summary: Summary, number: int, point: str | None) -> str:
    """The summary's text with its point ``number`` replaced by ``point`` (left out: None)."""
    if not summary_points(summary.text):
        return point or ""
    rows, seen = [], -1
    for row in summary.text.splitlines():
        if row.startswith("- "):
            seen += 1
            if seen == number:
                if point is not None:
                    rows.append(f"- {point}")
                continue
        rows.append(row)
    return "\n".join(rows).strip()


def _matches(text: str, query: str | None) -> bool:
    return query is None or query.casefold() in text.casefold()


class PersonView:
    """A person's own view of their memory, and their deletions and corrections."""

    # Provided by Memory.
    store: Store
    tokens: TokenCounter
    embedder: Embedder
    recall_source: IndexedLines
    embed: Callable[..., np.ndarray]
    _vectors_by: Callable[[np.ndarray], tuple[str, int]]
    window_shapes: Callable[[], set[tuple[int, int]]]

    def person_memory(
        self, *, user: str, bot: str | None = None, query: str | None = None
    ) -> PersonMemory:
        """Every line of ``user`` by thread and every key point kept about them, with one bot
        or every bot, and those of every identity linked with them (each thread names its
        person); with ``query``, only the lines and points holding it (any case)."""
        query = query.strip() or None if query is not None else None
        by_thread: dict[tuple[str, str, str], list[Line]] = {}
        for line in linked_history(self.store, user, bot):
            if _matches(line.text, query):
                by_thread.setdefault((line.bot, line.person, line.thread), []).append(line)
        threads = tuple(ThreadLines(b, t, tuple(lines), p)
                        for (b, p, t), lines in by_thread.items())  # fmt: skip
        points = [point for point in self.key_points(user=user, bot=bot)
                  if _matches(point.text, query)]  # fmt: skip
        return PersonMemory(user, bot, query, threads, tuple(points))

    def key_points(self, *, user: str, bot: str | None = None) -> list[KeyPoint]:
        """The key points kept about ``user``, oldest summary first, with their history."""
        summaries = linked_summaries(self.store, user, bot)
        history = self.store.summary_corrections([summary.id for summary in summaries])
        points = []
        for summary in summaries:
            corrections = history.get(summary.id, [])
            for number, text in enumerate(points_of(summary)):
                chain = _chain(corrections, text)
                points.append(KeyPoint(summary.id, number, text, summary.bot, summary.thread,
                                       summary.created_at, chain))  # fmt: skip
        return points

    def person_line(self, line_id: int, *, user: str, bot: str | None = None) -> Line:
        """``user``'s line ``line_id`` (or an identity's linked with them by the line's bot);
        ``NotFoundError`` for anyone else's or none."""
        found = self.store.lines([line_id]) if 0 < line_id < 2**63 else []
        line = found[0] if found else None
        if (
            line is None
            or (bot is not None and line.bot != bot)
            or (line.person != user and line.person not in self.store.linked_people(line.bot, user))
        ):
            raise NotFoundError(f"no line {line_id} in the memory of {user!r}")
        return line

    def key_point(
        self, summary_id: int, number: int, *, user: str, bot: str | None = None
    ) -> KeyPoint:
        """``user``'s key point ``number`` of summary ``summary_id``; ``NotFoundError`` for
        anyone else's or none."""
        for point in self.key_points(user=user, bot=bot):
            if point.summary_id == summary_id and point.number == number:
                return point
        raise NotFoundError(f"no key point {summary_id}/{number} in the memory of {user!r}")

    def forget_line(self, line_id: int, *, user: str, bot: str | None = None) -> Line:
        """Remove one of ``user``'s lines at once from the store, the full-text index, its
        vectors and parts, every process's vector indexes (the store's generation moves) and
        the embedding cache; returns the line as it was."""
        from membot.memory.forgetting import drop_removed, line_texts

        line = self.person_line(line_id, user=user, bot=bot)
        thread = self.store.history(line.person, line.bot, line.thread)
        texts = line_texts(line, thread, self.window_shapes())
        state = self.store.thread_state(ThreadKey(line.bot, line.person, line.thread))
        if not self.store.forget_line(line.id):
            raise NotFoundError(f"no line {line_id} in the memory of {user!r}")
        if state is not None:
            self._drop_from_running_summary(line, state)
        try:
            drop_removed(self.recall_source, self.embedder, texts)
        finally:
            self.store.finish_removal()
        return line

    def _drop_from_running_summary(self, line: Line, state: ThreadState) -> None:
        """The rows of the thread's running summary (``state``: as it was before the line
        went) that are the line's own words, as :mod:`membot.turn.own_words` writes them
        for a model that cannot summarise (the bundled one): a summary a model wrote in its
        own words holds no row of one line."""
        if not state.summary or line.seq > state.summary_through:
            return
        rows = state.summary.splitlines()
        kept = [row for row in rows if not _quotes(row, line)]
        if len(kept) < len(rows):
            self.store.rewrite_thread_summary(state.id, "\n".join(kept))

    def forget_key_point(
        self, summary_id: int, number: int, *, user: str, bot: str | None = None
    ) -> KeyPoint:
        """Remove one key point kept about ``user``, with its history; the summary holding it
        is embedded again without it (removed when it was its last point). Returns the
        point as it was."""
        point = self.key_point(summary_id, number, user=user, bot=bot)
        summary = self._summary_of(point)
        rest = _with_point(summary, number, None)
        if not rest.strip():
            self.store.forget_summary(summary.id)
            self._discard_cached(summary_parts(summary.text))
        else:
            self._rewrite(summary, rest, forgotten_point=point.text)
        self.store.finish_removal()
        return point

    def correct_key_point(
        self, summary_id: int, number: int, text: str, *, user: str, bot: str | None = None
    ) -> KeyPoint:
        """Replace a key point kept about ``user`` with ``text``: the summary is embedded
        again (the next turn's recall reads the new text) and the old text is kept as the
        point's history. Returns the corrected point."""
        text = " ".join(text.split())
        if not text:
            raise ConfigError("a corrected key point needs some text")
        if len(text) > MAX_POINT_CHARS:
            raise ConfigError(f"a key point is limited to {MAX_POINT_CHARS} characters")
        point = self.key_point(summary_id, number, user=user, bot=bot)
        if text == point.text:
            return point
        summary = self._summary_of(point)
        self._rewrite(summary, _with_point(summary, number, text), correction=(point.text, text))
        return self.key_point(summary_id, number, user=user, bot=bot)

    def _summary_of(self, point: KeyPoint) -> Summary:
        found = self.store.summaries_by_id([point.summary_id])
        if not found:
            raise NotFoundError(f"key point {point.summary_id}/{point.number} is gone")
        return found[0]

    def _rewrite(
        self,
        summary: Summary,
        text: str,
        *,
        correction: tuple[str, str] | None = None,
        forgotten_point: str | None = None,
    ) -> None:
        parts = summary_parts(text)
        vectors = self.embed(parts)
        rewritten = self.store.rewrite_summary(
            summary.id, text, self.tokens.count(text), vectors, correction=correction,
            forgotten_point=forgotten_point, vectors_by=self._vectors_by(vectors),
        )  # fmt: skip
        if rewritten is None:
            raise NotFoundError(f"summary {summary.id} is gone")
        self._discard_cached([part for part in summary_parts(summary.text) if part not in parts])

    def _discard_cached(self, texts: Sequence[str]) -> None:
        """The embedding cache keeps texts: a point's old wording goes with its vectors."""
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.discard(list(texts))


def _quotes(row: str, line: Line) -> bool:
    """Whether a running summary's ``row`` ("2026-11-23: ana said: ...") is ``line``'s own
    words: of its day, and each of its sentences found in the line (any case)."""
    day, _, rest = row.partition(": ")
    label = SAID_LABEL.match(rest)
    if day != line.created_at.date().isoformat() or label is None:
        return False
    said = " ".join(line.text.split()).casefold()
    parts = sentences(rest[label.end() :])
    return bool(parts) and all(part.strip(" .!-").casefold() in said for part in parts)


def _chain(corrections: Sequence[Correction], text: str) -> tuple[Correction, ...]:
    """The corrections that led to ``text``, oldest first: back from ``text`` along the
    rows whose new text is what the next one corrected."""
    chain, reading = [], text
    for correction in reversed(corrections):
        if correction.new_text == reading:
            chain.append(correction)
            reading = correction.old_text
    return tuple(reversed(chain))

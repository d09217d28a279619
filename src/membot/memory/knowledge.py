"""``Memory``'s summaries and expertise: remembered summaries of threads, and the documents a
bot knows beside its history, each embedded and searched by vector. A mixin of
:class:`~membot.memory.facade.Memory`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from membot.config import DEFAULT_BOT
from membot.errors import ConfigError, MembotError, NotFoundError
from membot.index.vectors import best_scored
from membot.memory.grounding import SAID_LABEL, undated
from membot.model import ExpertiseChunk, Summary
from membot.store import Store, ThreadKey
from membot.store.base import DocumentInfo, NewChunk
from membot.turn.tokens import TokenCounter

if TYPE_CHECKING:
    from membot.memory.documents import Document


def summary_parts(text: str) -> list[str]:
    """What a summary is embedded as: its whole text, then each key point ("- " lines)
    without its date and a "HUMAN said:" before the person's own words, so a question about
    one point meets that point, not an average of all nor a date ("Where do I work?" meets
    "I work as a nurse in Leeds" closer than its dated "HUMAN said:" point)."""
    points = [SAID_LABEL.sub("", undated(row)).strip() for row in summary_points(text)]
    return list(dict.fromkeys([text.strip(), *(point for point in points if point)]))


def summary_points(text: str) -> list[str]:
    """A summary's key points as written: its "- " lines, without the dash."""
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


class SummariesAndExpertise:
    """Summaries kept about people, and a bot's documents."""

    # Provided by Memory.
    store: Store
    tokens: TokenCounter
    embed: Callable[..., np.ndarray]
    _vectors_by: Callable[[np.ndarray], tuple[str, int]]

    def summaries(self, *, user: str, bot: str | None = None) -> list[Summary]:
        """The summaries kept about a person, oldest first."""
        from membot.memory.person_links import linked_summaries

        return linked_summaries(self.store, user, bot)

    def add_summary(
        self,
        *,
        bot: str,
        user: str,
        thread: str,
        text: str,
        categories: Sequence[str] = (),
        covers: tuple[datetime, datetime] | None = None,
    ) -> Summary:
        """Store and embed a summary of a thread (``covers``: its first and last line's
        time, read from the thread when not given)."""
        if not text.strip():
            raise ConfigError("a summary needs some text")
        state = self.store.thread_state(ThreadKey(bot, user, thread))
        if state is None:
            raise NotFoundError(f"{user!r} has no thread {thread!r} with bot {bot!r}")
        if covers is None:
            lines = self.store.history(user, bot, thread)
            if not lines:
                raise ConfigError(f"thread {thread!r} has no lines to summarise")
            covers = (lines[0].created_at, lines[-1].created_at)
        vectors = self._summary_vectors(text)
        labels = [label.strip().lower() for label in categories if label.strip()]
        return self.store.add_summary(state.id, text.strip(), labels, covers,
                                      self.tokens.count(text), vectors,
                                      self._vectors_by(vectors))  # fmt: skip

    def _summary_vectors(self, text: str) -> np.ndarray:
        return self.embed(summary_parts(text))

    def search_summaries(
        self, vector: np.ndarray, *, bot: str, user: str | None, k: int, min_score: float
    ) -> list[tuple[Summary, float]]:
        """A person's summaries (everyone's with ``user`` None) scoring at least
        ``min_score`` against ``vector``, best first."""
        bot_id = self.store.bot_id(bot)
        person_id = self.store.person_id(user) if user is not None else None
        if bot_id is None or (user is not None and person_id is None):
            return []
        people = self.store.link_group(bot_id, person_id) if person_id is not None else None
        ids, vectors = self.store.summary_vectors(bot_id, people)
        scored = best_scored(ids, vectors, vector, k, min_score)
        found = {s.id: s for s in self.store.summaries_by_id([i for i, _ in scored])}
        return [(found[i], score) for i, score in scored if i in found]

    # -- expertise ----------------------------------------------------------------------

    def add_documents(
        self, paths: Sequence[str | Path], *, bot: str = DEFAULT_BOT, max_tokens: int = 200,
        overlap_tokens: int = 30,
    ) -> list[DocumentInfo]:  # fmt: skip
        """Add several documents; every file is read and checked first, so one bad file
        stores nothing (a clear error names it)."""
        from membot.memory.documents import read_document

        documents = []
        for path in paths:
            try:
                documents.append(read_document(Path(path)))
            except MembotError as error:
                if len(paths) == 1:
                    raise
                raise type(error)(f"{error}; none of the {len(paths)} files was added") from error
        # A bot knows its documents by file name: the second of two alike replaced the first.
        names = [document.name for document in documents]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ConfigError(
                f"two of the files are named {twice[0]!r}: a bot's documents are known by file "
                f"name, so rename one; none of the {len(paths)} files was added"
            )
        return [
            self._add_read_document(document, bot, max_tokens, overlap_tokens)
            for document in documents
        ]

    def add_document(
        self, path: str | Path, *, bot: str = DEFAULT_BOT, max_tokens: int = 200,
        overlap_tokens: int = 30,
    ) -> DocumentInfo:  # fmt: skip
        """Read, chunk and embed a document into the bot's expertise (separate from history);
        a document of the same file name is replaced. Chunks and vectors commit together."""
        from membot.memory.documents import read_document

        return self._add_read_document(read_document(Path(path)), bot, max_tokens, overlap_tokens)

    def _add_read_document(
        self, document: Document, bot: str, max_tokens: int, overlap_tokens: int
    ) -> DocumentInfo:
        from membot.memory.documents import chunk_document

        chunks = chunk_document(document, self.tokens, max_tokens, overlap_tokens)
        # Each chunk is embedded with its heading, so a passage keeps what it is about.
        texts = [f"{c.heading}\n{c.text}" if c.heading else c.text for c in chunks]
        vectors = self.embed(texts)
        news = [NewChunk(c.ord, c.heading, c.text, c.tokens, v)
                for c, v in zip(chunks, vectors, strict=True)]  # fmt: skip
        self.store.add_document(bot, document.name, document.title, document.media,
                                document.sha256, news, self._vectors_by(vectors))  # fmt: skip
        return next(info for info in self.store.documents(bot) if info.name == document.name)

    def documents(self, bot: str = DEFAULT_BOT) -> list[DocumentInfo]:
        return self.store.documents(bot)

    def remove_document(self, name: str, *, bot: str = DEFAULT_BOT) -> bool:
        return self.store.remove_document(bot, name)

    def document_chunks(self, name: str, *, bot: str = DEFAULT_BOT) -> list[ExpertiseChunk]:
        """The passages a document was cut into, in order; ``NotFoundError`` if the bot has
        no document of that name."""
        if not any(info.name == name for info in self.store.documents(bot)):
            raise NotFoundError(f"{bot} has no document named {name!r}")
        return self.store.chunks_between(name, bot, 0, 2**62)

    def search_expertise(
        self, vector: np.ndarray, *, bot: str, k: int, min_score: float
    ) -> list[tuple[ExpertiseChunk, float]]:
        """The bot's document chunks scoring at least ``min_score``, best first."""
        bot_id = self.store.bot_id(bot)
        if bot_id is None or k <= 0:
            return []
        ids, vectors = self.store.chunk_vectors(bot_id)
        scored = best_scored(ids, vectors, vector, k, min_score)
        found = {chunk.id: chunk for chunk in self.store.chunks([i for i, _ in scored])}
        return [(found[i], score) for i, score in scored if i in found]

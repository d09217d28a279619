"""What a search may return (:class:`Scope`), the lines of a scope scored against one query
(:class:`InScope`), and the one matrix product both exact and approximate search score by."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

if TYPE_CHECKING:
    from membot.config import BotSettings


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def similarities(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` (float32) on one BLAS thread: a product of a few thousand rows is
    too small to share out, and BLAS's own threads made it many times slower whenever
    another process kept a core busy (docs/performance.md)."""
    with _blas().limit(limits=1, user_api="blas"):
        return matrix @ np.asarray(query, dtype=np.float32)


class LinkGroups(Protocol):
    """Where :meth:`Scope.of` reads whom a person is linked with (the store)."""

    def link_group(self, bot_id: int, person_id: int) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class Scope:
    """Which lines a search may return.

    ``person_ids``: the identities whose lines these are, sorted (one person's, or every
    identity linked with them as one person: ``membot.memory.person_links``); None means every
    person of the bot (only for bots that share memory). ``thread_id`` limits the search to
    one thread. Lines of ``window_thread_id`` with ``seq >= window_from_seq`` are skipped:
    they are in the prompt's recent window already.
    """

    bot_id: int
    person_ids: tuple[int, ...] | None
    thread_id: int | None = None
    window_thread_id: int | None = None
    window_from_seq: int | None = None
    roles: tuple[str, ...] = ("human", "bot")

    @classmethod
    def of(
        cls,
        bot_id: int,
        person_id: int | None,
        settings: BotSettings | None = None,
        *,
        thread_id: int | None = None,
        feed: tuple[int, int] | None = None,
        roles: Sequence[str] | None = None,
        links: LinkGroups | None = None,
    ) -> Scope:
        """The scope of a search, the one way every search builds it: the person's lines
        with the bot, and those of every identity linked with them by the bot (read from
        ``links``, the store; without it, the person's alone), or every person's where
        ``person_id`` is None or where ``settings`` say the bot shares memory across people;
        of one thread (``thread_id``), without the feed (``feed``: thread id and first seq,
        lines already in the prompt), of ``roles`` (default: those the bot's
        ``recall_roles`` name, or human and bot lines)."""
        shared = settings is not None and settings.share_across_people
        if roles is None:
            roles = settings.recall_roles if settings is not None else ("human", "bot")
        feed_thread, feed_from = feed if feed is not None else (None, None)
        people: tuple[int, ...] | None = None
        if person_id is not None and not shared:
            people = links.link_group(bot_id, person_id) if links else (person_id,)
        return cls(bot_id, people, thread_id, feed_thread, feed_from, tuple(roles))


# How far a line's score moves toward its best part's cosine, where that is higher (see
# :func:`with_parts`): chosen with ``membot eval --folds 5 --choose part_weight=...``
# (docs/recall.md, "Parts of a line").
PART_WEIGHT = 0.75


def with_parts(scores: np.ndarray, best_parts: np.ndarray, weight: float) -> np.ndarray:
    """Each line's cosine moved ``weight`` of the way to its best part's, where that is
    higher: a fact said in passing, or past what the line's own vector reads, is not
    averaged away by the rest of the line (``best_parts``: -inf for a line without parts)."""
    gain = np.maximum(best_parts - scores, 0.0)
    raised: np.ndarray = (scores + weight * gain).astype(scores.dtype, copy=False)
    return raised


@dataclass(frozen=True)
class InScope:
    """The lines of one scope as parallel arrays, with their cosine to one query
    (``scores``: the line's own vector's) and their best part's (``best_parts``: -inf for
    a line without parts; None when none was read)."""

    ids: np.ndarray
    thread_ids: np.ndarray
    seqs: np.ndarray
    scores: np.ndarray
    created: np.ndarray  # seconds since 1970, UTC
    best_parts: np.ndarray | None = None

    def with_parts(self, weight: float = PART_WEIGHT) -> InScope:
        """The same lines scored with their parts (:func:`with_parts`)."""
        if self.best_parts is None or not weight:
            return self
        return replace(self, scores=with_parts(self.scores, self.best_parts, weight))

    @classmethod
    def empty(cls) -> InScope:
        nothing = np.zeros(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, np.zeros(0, dtype=np.float32),
                   np.zeros(0, dtype=np.float64))  # fmt: skip

    def neighbour_scores(self) -> np.ndarray:
        """Each line's previous plus next line's score in its thread; a neighbour outside
        the scope (or the thread) counts the line's own score."""
        keys = self.thread_ids.astype(np.int64) * 2**32 + self.seqs.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        total = np.zeros_like(self.scores)
        for step in (-1, 1):
            wanted = keys + step
            at = np.clip(np.searchsorted(sorted_keys, wanted), 0, max(len(keys) - 1, 0))
            found = sorted_keys[at] == wanted if len(keys) else np.zeros(0, dtype=bool)
            total += np.where(found, self.scores[order[at]], self.scores)
        return total

"""What every store offers, and the small records that cross its boundary."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from membot.model import Line, Role

ROLE_CODES: dict[str, int] = {"human": 0, "bot": 1, "tool": 2, "system": 3}


@dataclass(frozen=True)
class ThreadKey:
    """A thread is named per bot and person."""

    bot: str
    person: str
    thread: str


@dataclass(frozen=True)
class NewLine:
    """A line about to be stored, with its vector already computed."""

    key: ThreadKey
    role: Role
    text: str
    vector: np.ndarray
    tokens: int
    created_at: datetime | None = None
    speaker: str | None = None
    ref: str | None = None


@dataclass(frozen=True)
class BufferEntry:
    """One block held in a thread's relevance buffer: a seq range of a source thread."""

    source_thread_id: int
    first_seq: int
    last_seq: int
    score: float
    matched_seqs: tuple[int, ...]


@dataclass(frozen=True)
class VectorRows:
    """Columns of stored lines, ready to be appended to the in-memory search matrix."""

    ids: np.ndarray
    bot_ids: np.ndarray
    person_ids: np.ndarray
    thread_ids: np.ndarray
    seqs: np.ndarray
    roles: np.ndarray
    vectors: np.ndarray
    created: np.ndarray  # when each line was said, in seconds since 1970 (UTC)

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence], dimension: int | None = None) -> VectorRows:
        """From (id, bot id, person id, thread id, seq, role, vector blob, created_at)."""
        if not rows:
            return cls.empty(dimension or 0)
        columns = list(zip(*rows, strict=True))
        as_int = [np.asarray(column, dtype=np.int64) for column in columns[:5]]
        roles = np.asarray([ROLE_CODES[role] for role in columns[5]], dtype=np.int8)
        vectors = np.vstack([np.frombuffer(blob, dtype=np.float32) for blob in columns[6]])
        created = np.asarray(
            [datetime.fromisoformat(when).timestamp() for when in columns[7]], dtype=np.float64
        )
        return cls(*as_int, roles, vectors, created)

    @classmethod
    def empty(cls, dimension: int) -> VectorRows:
        ints = [np.zeros(0, dtype=np.int64) for _ in range(5)]
        return cls(*ints, np.zeros(0, dtype=np.int8), np.zeros((0, dimension), dtype=np.float32),
                   np.zeros(0, dtype=np.float64))  # fmt: skip


class Store(Protocol):
    """Everything ``Memory`` and ``VectorIndex`` ask of a store. ``SqliteStore`` is the
    embedded default; another backend (PostgreSQL) implements the same methods."""

    path: Path

    def close(self) -> None: ...

    # embedder identity and change tracking
    def check_embedder(self, name: str, dimension: int | None = None) -> None: ...
    def generation(self) -> int: ...

    # bots, people, threads
    def bot_settings(self, bot: str) -> dict | None: ...
    def save_bot(self, bot: str, settings: dict) -> None: ...
    def bot_id(self, bot: str) -> int | None: ...
    def person_id(self, person: str) -> int | None: ...
    def thread_id(self, key: ThreadKey) -> int | None: ...

    # lines and vectors
    def add_lines(
        self, lines: Iterable[NewLine], vectors_by: tuple[str, int] | None = None
    ) -> list[Line]: ...
    def lines(self, line_ids: Sequence[int]) -> list[Line]: ...
    def lines_between(self, thread_id: int, first_seq: int, last_seq: int) -> list[Line]: ...
    def history(self, person: str, bot: str | None, thread: str | None) -> list[Line]: ...
    def count_lines(self) -> int: ...
    def all_line_texts(self) -> list[tuple[int, str]]: ...
    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_id: int | None = None,
        thread_id: int | None = None,
        roles: Sequence[str] = ("human", "bot"),
        limit: int = 100,
    ) -> list[tuple[int, float]]: ...
    def vector_snapshot(
        self, known_generation: int | None, after_id: int
    ) -> tuple[int, VectorRows]: ...
    def scope_vector_snapshot(
        self, bot_id: int, person_id: int | None, known_generation: int | None, after_id: int
    ) -> tuple[int, VectorRows]: ...
    def replace_vectors(
        self,
        vectors: Iterable[tuple[int, np.ndarray]],
        meta: dict[str, str],
        *,
        last_id: int,
        generation: int,
    ) -> None: ...

    # relevance buffers and forgetting
    def change_buffer(
        self, thread_id: int, change: Callable[[list[BufferEntry]], list[BufferEntry]]
    ) -> list[BufferEntry]: ...
    def forget(self, person: str, bot: str | None, thread: str | None) -> dict[str, int]: ...


@dataclass(frozen=True)
class StoredKey:
    """An API key as the store keeps it: who it acts for, never the secret. ``bot`` is None
    for an admin key; ``person`` is set only for a key that acts as one person of ``bot``."""

    id: str
    bot: str | None
    person: str | None
    label: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


@runtime_checkable
class KeyStore(Protocol):
    """The API keys of ``membot serve``, each found by the SHA-256 of its secret."""

    def add_key(self, key: StoredKey, key_hash: str) -> None: ...
    def api_keys(self) -> list[StoredKey]: ...
    def key_by_hash(self, key_hash: str) -> StoredKey | None: ...
    def revoke_key(self, key_id: str, when: datetime) -> StoredKey | None: ...
    def mark_key_used(self, key_id: str, when: datetime) -> None: ...

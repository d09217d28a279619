"""What every store offers, and the small records that cross its boundary."""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import numpy as np

from membot.errors import ConflictError, EmbedderMismatchError
from membot.model import (
    Correction,
    ExpertiseChunk,
    Line,
    Role,
    Summary,
    ThreadInfo,
    ThreadState,
)

ROLE_CODES: dict[str, int] = {"human": 0, "bot": 1, "tool": 2, "system": 3}


@dataclass(frozen=True)
class ThreadKey:
    """A thread is named per bot and person."""

    bot: str
    person: str
    thread: str


@dataclass(frozen=True)
class SourceKey:
    """An imported line's key in its thread (``NewLine.source_key``)."""

    thread: ThreadKey
    key: str


PART_DTYPE = np.float16  # how a part's vector is stored (read back as float32)


@dataclass(frozen=True)
class LineParts:
    """A line's parts (its sentences, or windows of a long line: ``membot.memory.line_parts``)
    with a vector each: ``bounds`` the (start, end) character offsets of each part in the
    line's text, ``vectors`` one row per part. Stored beside the line, one row a line: the
    offsets as int32 pairs and the vectors as float16 rows (half a line vector's bytes; a
    cosine moves by about 0.001), both as bytes."""

    bounds: tuple[tuple[int, int], ...]
    vectors: np.ndarray

    def to_bytes(self) -> tuple[bytes, bytes]:
        """(bounds, vectors) as the stores keep them."""
        bounds = np.asarray(self.bounds, dtype=np.int32).reshape(-1, 2)
        return bounds.tobytes(), np.asarray(self.vectors, dtype=PART_DTYPE).tobytes()

    @classmethod
    def from_bytes(cls, bounds: bytes, vectors: bytes) -> LineParts:
        pairs = np.frombuffer(bytes(bounds), dtype=np.int32).reshape(-1, 2)
        rows = np.frombuffer(bytes(vectors), dtype=PART_DTYPE).reshape(len(pairs), -1)
        return cls(tuple((int(a), int(b)) for a, b in pairs), rows.astype(np.float32))


@dataclass(frozen=True)
class PartVectors:
    """The part vectors of some lines, one row a part, in line id order: what a scope's
    index scores besides the lines' own vectors."""

    line_ids: np.ndarray  # int64, the line each row is a part of
    vectors: np.ndarray  # float32, (parts, dimension)

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]], dimension: int) -> PartVectors:
        """From (line id, vectors) rows: each row's vectors the stored bytes
        (:class:`LineParts`) of one or more vectors of ``dimension``."""
        if not rows or not dimension:
            return cls.empty(dimension)
        matrices = [
            np.frombuffer(bytes(blob), dtype=PART_DTYPE).reshape(-1, dimension) for _, blob in rows
        ]
        line_ids = np.repeat(
            np.asarray([line_id for line_id, _ in rows], dtype=np.int64),
            [len(matrix) for matrix in matrices],
        )
        return cls(line_ids, np.vstack(matrices).astype(np.float32))

    @classmethod
    def empty(cls, dimension: int = 0) -> PartVectors:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32))

    def of_lines(self, keep: np.ndarray) -> PartVectors:
        """The parts of the lines whose ids are in the sorted array ``keep``."""
        if not len(self.line_ids):
            return self
        at = np.clip(np.searchsorted(keep, self.line_ids), 0, max(len(keep) - 1, 0))
        mask = keep[at] == self.line_ids if len(keep) else np.zeros(len(self.line_ids), bool)
        return PartVectors(self.line_ids[mask], self.vectors[mask])


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
    # Where an imported line came from; a thread holds each key once (the line is skipped
    # when its key is there already), so an import run again adds only what is missing.
    source_key: str | None = None
    # The id of the line this one answers (a bot's reply): it is stored only while that line
    # is, so a reply written while its person was forgotten does not bring them back, and it
    # does not take up a thread that was ended while it was written.
    answers: int | None = None
    # The line's parts with their vectors (None: a line of one short sentence), written in
    # the same transaction as the line.
    parts: LineParts | None = None


@dataclass(frozen=True)
class BufferEntry:
    """One block held in a thread's relevance buffer: a seq range of a source thread."""

    source_thread_id: int
    first_seq: int
    last_seq: int
    score: float
    matched_seqs: tuple[int, ...]


def float32_rows(blobs: Sequence[Any]) -> np.ndarray:
    """One row per blob of float32 values (how SQLite keeps a vector)."""
    return np.vstack([np.frombuffer(blob, dtype=np.float32) for blob in blobs])


def iso_seconds(when: Any) -> float:
    """Seconds since 1970 of an ISO 8601 text (how SQLite keeps a moment)."""
    return datetime.fromisoformat(when).timestamp()


@dataclass(frozen=True)
class VectorRows:
    """Columns of stored lines, ready to be appended to a scope's in-memory search matrix."""

    ids: np.ndarray
    bot_ids: np.ndarray
    person_ids: np.ndarray
    thread_ids: np.ndarray
    seqs: np.ndarray
    roles: np.ndarray
    vectors: np.ndarray
    created: np.ndarray  # when each line was said, in seconds since 1970 (UTC)
    # The lines' texts, for the scope's BM25 (scope snapshots only; empty otherwise).
    texts: tuple[str, ...] = ()
    # The lines' part vectors (scope snapshots only; None otherwise).
    parts: PartVectors | None = None

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[Sequence[Any]],
        dimension: int | None = None,
        *,
        vectors: Callable[[Sequence[Any]], np.ndarray] = float32_rows,
        seconds: Callable[[Any], float] = iso_seconds,
    ) -> VectorRows:
        """From (id, bot id, person id, thread id, seq, role, vector, created_at[, text]):
        ``vectors`` reads the vector column into a float32 matrix (default: SQLite's blobs of
        float32), ``seconds`` a created_at value (default: SQLite's ISO text)."""
        if not rows:
            return cls.empty(dimension or 0)
        columns = list(zip(*rows, strict=True))
        ids, bot_ids, person_ids, thread_ids, seqs = (
            np.asarray(column, dtype=np.int64) for column in columns[:5]
        )
        return cls(
            ids=ids,
            bot_ids=bot_ids,
            person_ids=person_ids,
            thread_ids=thread_ids,
            seqs=seqs,
            roles=np.asarray([ROLE_CODES[role] for role in columns[5]], dtype=np.int8),
            vectors=vectors(columns[6]),
            created=np.asarray([seconds(when) for when in columns[7]], dtype=np.float64),
            texts=tuple(columns[8]) if len(columns) > 8 else (),
        )

    @classmethod
    def empty(cls, dimension: int) -> VectorRows:
        def no_ints() -> np.ndarray:
            return np.zeros(0, dtype=np.int64)

        return cls(
            ids=no_ints(),
            bot_ids=no_ints(),
            person_ids=no_ints(),
            thread_ids=no_ints(),
            seqs=no_ints(),
            roles=np.zeros(0, dtype=np.int8),
            vectors=np.zeros((0, dimension), dtype=np.float32),
            created=np.zeros(0, dtype=np.float64),
        )


@dataclass(frozen=True)
class VectorSnapshot:
    """What a vector snapshot read: the store's generation, the rows new to the reader, and
    the cursor to pass back as ``after`` next time.

    The cursor means what the store needs it to mean (the last id read on SQLite, where
    writers take turns; a transaction horizon on PostgreSQL, where ids can commit out of
    order), so rows may come again: a reader skips ids it holds."""

    generation: int
    rows: VectorRows
    cursor: int


@dataclass(frozen=True)
class StoredLine:
    """A stored line's place and words, as the ``pairs`` and ``windows`` strategies cut
    their units from it."""

    id: int
    thread_id: int
    seq: int
    role: Role
    text: str
    speaker: str | None

    @property
    def labelled(self) -> str:
        """``Speaker: text`` when a speaker is known, else the text."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


@dataclass(frozen=True)
class LineSnapshot:
    """What a line snapshot of one scope read: as :class:`VectorSnapshot`, the lines new
    to the reader (some perhaps again) in id order, without their vectors."""

    generation: int
    lines: tuple[StoredLine, ...]
    cursor: int

    @classmethod
    def from_rows(cls, generation: int, rows: Sequence[Sequence[Any]], cursor: int) -> LineSnapshot:
        """From (id, thread id, seq, role, text, speaker) rows."""
        lines = tuple(
            StoredLine(line_id, thread_id, seq, Role(role), text, speaker)
            for line_id, thread_id, seq, role, text, speaker in rows
        )
        return cls(generation, lines, cursor)


@dataclass(frozen=True)
class NewChunk:
    """A document passage about to be stored, with its vector."""

    ord: int
    heading: str | None
    text: str
    tokens: int
    vector: np.ndarray


@dataclass(frozen=True)
class DocumentInfo:
    """A document of a bot's expertise, as listed."""

    name: str
    title: str
    media: str
    sha256: str
    added_at: datetime
    chunks: int

    def to_json(self) -> dict[str, Any]:
        from membot.model import iso

        return {
            "name": self.name,
            "title": self.title,
            "media": self.media,
            "sha256": self.sha256,
            "added_at": iso(self.added_at),
            "chunks": self.chunks,
        }


# What a store offers, by concern. ``SqliteStore`` implements them all; another backend
# (PostgreSQL) implements the same protocols, and code asks only for the concern it uses.


class LineStore(Protocol):
    """Lines and threads: written with their vectors in one transaction, seq per thread;
    thread bookkeeping, relevance buffers, forgetting; which embedder made the vectors."""

    def check_embedder(self, name: str, dimension: int | None = None) -> None: ...
    def get_meta(self, key: str) -> str | None:
        """A value the store keeps about itself (``embedder``, ``dimension``), or None."""
        ...

    def generation(self) -> int: ...
    def person_id(self, person: str) -> int | None: ...
    def thread_id(self, key: ThreadKey) -> int | None: ...
    def add_lines(
        self, lines: Iterable[NewLine], vectors_by: tuple[str, int] | None = None
    ) -> list[Line]: ...
    def stored_source_keys(self, keys: Iterable[SourceKey]) -> set[SourceKey]: ...
    def lines(self, line_ids: Sequence[int]) -> list[Line]: ...
    def lines_in_ranges(self, ranges: Sequence[tuple[int, int, int]]) -> list[list[Line]]: ...
    def lines_after(self, thread_id: int, after_seq: int, limit: int) -> list[Line]: ...
    def last_lines(self, thread_id: int, count: int) -> list[Line]: ...
    def history(self, person: str, bot: str | None, thread: str | None) -> list[Line]: ...
    def threads(self, bot: str | None, person: str) -> list[ThreadInfo]: ...
    def count_lines(self) -> int: ...
    def thread_state(self, key: ThreadKey) -> ThreadState | None: ...
    def open_threads(self, bot: str, person: str | None = None) -> list[ThreadState]: ...
    def end_thread(self, thread_id: int, when: datetime | None = None) -> None: ...
    def save_thread_summary(self, thread_id: int, summary: str, through_seq: int) -> None: ...

    def change_buffer(
        self, thread_id: int, change: Callable[[list[BufferEntry]], list[BufferEntry]]
    ) -> list[BufferEntry]: ...
    def forget(self, person: str, bot: str | None, thread: str | None) -> dict[str, int]: ...


class VectorSearch(Protocol):
    """The vectors a search reads: one scope's, new since a reader's cursor at a store
    generation (all of them when the generation moved); one scope's lines read
    the same way without their vectors (the units the ``pairs`` and ``windows`` strategies
    search); the parts and the speakers of lines by id (what a search's features read of
    them); and swapping every vector for another embedder's."""

    def scope_vector_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> VectorSnapshot: ...
    def scope_line_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> LineSnapshot: ...
    def all_line_texts(self) -> list[tuple[int, str]]: ...
    def all_extra_texts(self) -> dict[str, list[tuple[int, str]]]: ...
    def replace_vectors(
        self,
        vectors: Iterable[tuple[int, np.ndarray]],
        meta: dict[str, str],
        *,
        last_id: int,
        generation: int,
        extras: dict[str, list[tuple[int, np.ndarray]]] | None = None,
        parts: Iterable[tuple[int, LineParts]] | None = None,
    ) -> None: ...
    def line_parts(self, line_ids: Sequence[int]) -> dict[int, LineParts]: ...
    def speakers(self, line_ids: Sequence[int]) -> dict[int, str | None]: ...


class LexicalSearch(Protocol):
    """Lines holding any of some words, best first by the store's text ranking."""

    def lexical_search(
        self,
        terms: Sequence[str],
        bot_id: int,
        person_ids: Sequence[int] | None = None,
        thread_id: int | None = None,
        roles: Sequence[str] = ("human", "bot"),
        limit: int = 100,
        max_postings: int | None = None,
        among: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]: ...


class BotStore(Protocol):
    """Bots, their stored profiles, and the people who talked with them."""

    def bots(self) -> list[str]: ...
    def people(self, bot: str) -> list[str]: ...
    def bot_id(self, bot: str) -> int | None: ...
    def bot_settings(self, bot: str) -> dict[str, Any] | None: ...
    def save_bot(self, bot: str, settings: dict[str, Any], *, new: bool = False) -> None:
        """Save the bot's settings; ``ConflictError`` (:func:`number_taken`) when another bot
        answers its ``sms_number``, checked in the same transaction, and with ``new`` when
        the bot exists (:func:`bot_taken`): two creations of one name at once were both
        told they made it, and the last one's settings won."""
        ...

    def delete_bot(self, bot: str) -> dict[str, int]:
        """Remove the bot with all it holds, and revoke its keys, in one transaction."""
        ...

    def finish_removal(self) -> None:
        """After a forget or a bot's deletion: what removes their old bytes from the files
        (a SQLite store rewrites itself) and empties the log."""
        ...


class SummaryStore(Protocol):
    """Summaries kept of ended threads, with their vectors."""

    def add_summary(
        self,
        thread_id: int,
        text: str,
        categories: Sequence[str],
        covers: tuple[datetime, datetime],
        tokens: int,
        vector: np.ndarray,
        vectors_by: tuple[str, int] | None = None,
    ) -> Summary: ...
    def summaries(self, person: str, bot: str | None = None) -> list[Summary]: ...
    def summaries_by_id(self, ids: Sequence[int]) -> list[Summary]: ...
    def summary_vectors(
        self, bot_id: int, person_ids: Sequence[int] | None
    ) -> tuple[np.ndarray, np.ndarray]: ...
    def forget_summary(self, summary_id: int) -> bool: ...


class DocumentStore(Protocol):
    """A bot's expertise: documents cut into embedded chunks."""

    def add_document(
        self,
        bot: str,
        name: str,
        title: str,
        media: str,
        sha256: str,
        chunks: Sequence[NewChunk],
        vectors_by: tuple[str, int] | None = None,
    ) -> int: ...
    def documents(self, bot: str) -> list[DocumentInfo]: ...
    def remove_document(self, bot: str, name: str) -> bool: ...
    def chunk_vectors(self, bot_id: int) -> tuple[np.ndarray, np.ndarray]: ...
    def chunks(self, ids: Sequence[int]) -> list[ExpertiseChunk]: ...
    def chunks_between(
        self, document: str, bot: str, first: int, last: int
    ) -> list[ExpertiseChunk]: ...


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


@dataclass(frozen=True)
class SmsSender:
    """Where one person's text conversation with a bot stands. ``sender`` is the person's
    name in the store, a keyed hash of their number (never the number). ``asking_about``: the
    ended thread whose "remember it?" question awaits YES or NO, with the text that arrived
    meanwhile held (``held_text``, and its Twilio ``held_sid``) until it is answered."""

    bot: str
    sender: str
    thread: str | None = None  # the thread texts go to now
    stopped: bool = False  # said STOP: nothing stored or answered until START
    asking_about: str | None = None
    held_text: str | None = None
    held_sid: str | None = None


@dataclass(frozen=True)
class SmsRecord:
    """One text received (by Twilio's MessageSid) and how it was answered: ``replies`` is
    None while it is being answered; ``via`` is ``twiml`` (in the webhook's answer) or ``api``
    (sent afterwards through Twilio's Messages API). ``answerer`` is the process answering
    it ("answering:HOST:PID"; None in a record an earlier membot made): a retry can tell
    one that died."""

    sid: str
    bot: str
    sender: str
    received_at: datetime
    replies: tuple[str, ...] | None = None
    via: str | None = None
    answerer: str | None = None

    @property
    def in_flight(self) -> bool:
        """Still being answered (or its answerer died): no reply recorded yet."""
        return self.via is None


@runtime_checkable
class SmsStore(Protocol):
    """Text conversations: each sender's state (STOP, a pending question), and each text
    received, so a text Twilio sends again is answered once."""

    def sms_sender(self, bot: str, sender: str) -> SmsSender | None: ...
    def save_sms_sender(self, state: SmsSender, expected: SmsSender | None) -> bool:
        """Store ``state`` only if the stored one is still ``expected`` (None: none is
        stored), in one transaction; whether it was stored."""
        ...

    def claim_sms_message(self, record: SmsRecord, forget_before: datetime) -> SmsRecord | None:
        """Record a text not seen before (None), or return the record of one seen; records
        received before ``forget_before`` are deleted first."""
        ...

    def answer_sms_message(self, sid: str, replies: Sequence[str], via: str) -> None: ...

    def take_over_sms_message(self, record: SmsRecord, by: str) -> bool:
        """Claim a text whose answerer died for ``by``: only if it is still unanswered and
        its ``answerer`` as ``record`` found it (another retry may have taken it over
        first); whether it was."""
        ...


class PersonEditStore(Protocol):
    """What a person changes of their own memory (:mod:`membot.memory.person_view`): one
    line deleted, the running summary that quoted it, a kept summary rewritten, and the
    history of its corrections."""

    def forget_line(self, line_id: int) -> bool:
        """Remove one line with its vector, parts and lexical row; False if it is gone."""
        ...

    def rewrite_thread_summary(self, thread_id: int, summary: str) -> None:
        """The running summary's text replaced, covering the same lines."""
        ...

    def rewrite_summary(
        self,
        summary_id: int,
        text: str,
        tokens: int,
        vector: np.ndarray,
        *,
        correction: tuple[str, str] | None = None,
        forgotten_point: str | None = None,
        vectors_by: tuple[str, int] | None = None,
    ) -> Summary | None: ...
    def summary_corrections(self, summary_ids: Sequence[int]) -> dict[int, list[Correction]]: ...


@dataclass(frozen=True)
class CodeEntry:
    """What entering a link code did: ``linked``, the group's names after it linked (None
    when the code did not link); ``retry_after``, seconds to wait, when too many entries
    failed lately and this one was not even tried."""

    linked: tuple[str, ...] | None
    retry_after: float | None = None


class LinkStore(Protocol):
    """Identities of one bot linked as one person, the hashed codes that link them
    (``membot.store.links``), and forgetting such a person whole."""

    def link_group(self, bot_id: int, person_id: int) -> tuple[int, ...]: ...
    def linked_people(self, bot: str, person: str) -> tuple[str, ...]: ...
    def link_bots(self, person: str) -> list[str]: ...
    def link_code_taken(self, code_hash: str) -> bool: ...
    def add_link_code(
        self,
        bot: str,
        person: str,
        code_hash: str,
        expires_at: datetime,
        *,
        now: datetime,
        most: int,
        per: timedelta,
    ) -> float | None: ...
    def enter_link_code(
        self,
        bot: str,
        person: str,
        code_hash: str | None,
        *,
        now: datetime,
        most_failures: int,
        per: timedelta,
    ) -> CodeEntry: ...
    def unlink_person(self, bot: str, person: str) -> None: ...
    def forget_identities(
        self, identities: Sequence[tuple[str, str | None]], thread: str | None = None
    ) -> dict[str, int]:
        """``LineStore.forget`` each (person, bot) identity, in one transaction: all or none."""
        ...


class TurnStore(Protocol):
    """Turns of one thread one after another, in any process."""

    # Held for a whole turn (its line, the model's reply, the reply stored), or while an
    # import stores a batch of lines into the threads ``keys``, so it cannot come between a
    # line and its reply. Several are taken all at once or none, then (on a busy store) in
    # one order: holders never wait in a circle.
    def turn_lock(self, *keys: ThreadKey) -> AbstractContextManager[None]: ...


class Store(
    LineStore,
    TurnStore,
    VectorSearch,
    LexicalSearch,
    BotStore,
    SummaryStore,
    PersonEditStore,
    DocumentStore,
    KeyStore,
    SmsStore,
    LinkStore,
    Protocol,
):
    """Everything ``Memory`` asks of a store, by concern."""

    location: str  # where the store is, for messages: a file path, or a URL without password

    def close(self) -> None: ...

    def check_reachable(self, timeout: float) -> str | None:
        """``StoreError`` unless the store answers within ``timeout`` seconds; else the
        embedder its vectors were made by (None before the first), read in the same call."""
        ...


def ranges_condition(ranges: Sequence[tuple[int, int, int]], mark: str) -> tuple[str, list[int]]:
    """The WHERE condition matching the lines of any (thread id, first seq, last seq) range
    of ``ranges`` (``mark``: the driver's placeholder), and its parameters."""
    one = f"(l.thread_id = {mark} AND l.seq BETWEEN {mark} AND {mark})"
    return " OR ".join([one] * len(ranges)), [value for bounds in ranges for value in bounds]


def split_ranges(
    ranges: Sequence[tuple[int, int, int]], found: Sequence[tuple[int, Line]]
) -> list[list[Line]]:
    """``found`` (thread id, line), in seq order, shared out to each (thread id, first seq,
    last seq) range holding it; a line in two ranges goes to both. Each range is found by
    bisection in its thread's lines (not by a pass over all of them for each range)."""
    by_thread: dict[int, tuple[list[int], list[Line]]] = {}
    for thread, line in found:
        seqs, lines = by_thread.setdefault(thread, ([], []))
        seqs.append(line.seq)
        lines.append(line)
    split = []
    for wanted, first, last in ranges:
        seqs, lines = by_thread.get(wanted, ([], []))
        split.append(lines[bisect_left(seqs, first) : bisect_right(seqs, last)])
    return split


def lines_between(store: LineStore, thread_id: int, first_seq: int, last_seq: int) -> list[Line]:
    """The lines of one thread from ``first_seq`` to ``last_seq``, in order."""
    return store.lines_in_ranges([(thread_id, first_seq, last_seq)])[0]


def number_owner(rows: Sequence[tuple[str, str]], number: str) -> str | None:
    """Of (bot, stored settings) rows whose text holds ``number``, the bot that answers it.
    Read here, not by the database's JSON: an earlier membot stored numbers such as
    Infinity, which PostgreSQL's jsonb refuses, and a row that is not JSON at all is no
    bot's number."""
    for name, settings in rows:
        try:
            if json.loads(settings).get("sms_number") == number:
                return name
        except (ValueError, AttributeError):
            continue
    return None


def bot_taken(bot: str) -> ConflictError:
    """The error for making a bot whose name another bot has."""
    return ConflictError(
        f"a bot named {bot!r} exists already: choose another name, or change that bot's profile"
    )


def number_taken(owner: str, number: str) -> ConflictError:
    """The error for an SMS number another bot answers already."""
    return ConflictError(f"bot {owner!r} answers texts to {number} already: one number, one bot")


def check_embedder_meta(meta: dict[str, str], name: str, dimension: int | None) -> None:
    """``EmbedderMismatchError`` unless vectors by embedder ``name`` (of ``dimension``) may
    join a store whose ``embedder`` and ``dimension`` meta are ``meta``: both stores' check,
    worded for the command line and for Python alike."""
    made_by = meta.get("embedder")
    if made_by is not None and made_by != name:
        raise EmbedderMismatchError(
            f"this store's vectors were made by {made_by}, not {name}: open it with the "
            "embedder that made them (`membot --embedder SPEC`, or `Memory(db, embedder=...)` "
            "in Python; naming none takes the store's own where a spec makes it), or run "
            f"`membot --embedder SPEC reindex` to re-embed everything with {name}; a server "
            "started before the store was re-embedded must be restarted"
        )
    if dimension is not None and "dimension" in meta and int(meta["dimension"]) != dimension:
        raise EmbedderMismatchError(
            f"embedder dimension {dimension} does not match the store's {meta['dimension']}: "
            "run `membot --embedder SPEC reindex`"
        )

"""The SQLite store's vectors: snapshots for the in-memory index (read, with their generation,
by :meth:`~membot.store.sqlite.SqliteStore._snapshot`) and of a scope's lines without vectors
(for the ``pairs`` and ``windows`` units), the lines' texts for re-embedding, and
swapping every vector for another embedder's. A mixin of
:class:`~membot.store.sqlite.SqliteStore`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np

from membot.store.base import LineSnapshot, VectorSnapshot
from membot.store.dialect import Row
from membot.store.sql_store import LineVectors
from membot.store.sqlite_driver import sqlite3


class SqliteVectors:
    """Vector snapshots by scope and re-embedding; mixed into ``SqliteStore``."""

    # Provided by SqliteStore.
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _query: Callable[..., list[Row]]
    _snapshot: Callable[..., VectorSnapshot]
    _snapshot_rows: Callable[..., tuple[int, list[Row], int]]
    _set_meta: Callable[[sqlite3.Connection, dict[str, str]], None]
    _bump_generation: Callable[..., None]
    _replace_extra_vectors: Callable[..., None]

    def scope_vector_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> VectorSnapshot:
        """The generation and the lines of one scope — a person's lines with a bot (and
        those of the identities linked with them: ``person_ids``), or (``person_ids`` None)
        all the bot's lines — with their vectors and texts, that an index
        holding ``known_generation`` up to id ``after`` is missing (all of them when the
        generation moved), read in one snapshot so that a forget and new lines landing between
        the two reads cannot be half seen. Read through the (bot, person, id) index, so it
        costs what the scope holds. Writers take turns (``BEGIN IMMEDIATE``), so ids commit in
        order and the cursor is the last id read."""
        owner, owners = _owner("l.", bot_id, person_ids)
        sql = (
            "SELECT l.id, l.bot_id, l.person_id, l.thread_id, l.seq, l.role, v.vector, "
            "l.created_at, l.text FROM lines l JOIN line_vectors v ON v.line_id = l.id "
            f"WHERE {owner} AND l.id > ? ORDER BY l.id"
        )
        parts = (
            "SELECT p.line_id, p.vectors FROM line_parts p JOIN lines l ON l.id = p.line_id "
            f"WHERE {owner} AND l.id > ? ORDER BY p.line_id"
        )
        return self._snapshot(sql, owners, known_generation, after, parts)

    def scope_line_snapshot(
        self,
        bot_id: int,
        person_ids: Sequence[int] | None,
        known_generation: int | None,
        after: int,
    ) -> LineSnapshot:
        """As :meth:`scope_vector_snapshot`, the lines' thread, seq, role, text and speaker
        without their vectors (what the ``pairs`` and ``windows`` units are cut from)."""
        owner, owners = _owner("", bot_id, person_ids)
        sql = (
            "SELECT id, thread_id, seq, role, text, speaker FROM lines "
            f"WHERE {owner} AND id > ? ORDER BY id"
        )
        return LineSnapshot.from_rows(*self._snapshot_rows(sql, owners, known_generation, after))

    def _swap_line_vectors(
        self, db: sqlite3.Connection, vectors: LineVectors, meta: dict[str, str]
    ) -> None:
        """The lines' new vectors, as they come (a million of them are not held at once)."""
        db.executemany(
            "UPDATE line_vectors SET vector = ? WHERE line_id = ?",
            ((np.asarray(v, dtype=np.float32).tobytes(), i) for i, v in vectors),
        )


def _owner(
    alias: str, bot_id: int, person_ids: Sequence[int] | None
) -> tuple[str, tuple[int, ...]]:
    """The condition on a scope's owners (the bot; the persons, unless None) and its values."""
    if person_ids is None:
        return f"{alias}bot_id = ?", (bot_id,)
    marks = ",".join("?" * len(person_ids))
    return f"{alias}bot_id = ? AND {alias}person_id IN ({marks})", (bot_id, *person_ids)

"""What approximate search (:mod:`membot.ann`) reads from the SQLite store: how many lines a
bot holds and their ids, its vectors page by page (to build an index without holding every
vector at once), and the rows of a few lines with their neighbours (to score the index's
candidates exactly). A mixin of :class:`~membot.store.sqlite.SqliteStore`; it uses the
store's ``_query``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from membot.store.base import VectorRows
from membot.store.dialect import Row

_ROWS = (
    "SELECT l.id, l.bot_id, l.person_id, l.thread_id, l.seq, l.role, v.vector, l.created_at "
    "FROM lines l JOIN line_vectors v ON v.line_id = l.id "
)


class SqliteNearLines:
    """Scope counts, vector pages and candidate rows; mixed into ``SqliteStore``."""

    _query: Callable[..., list[Row]]

    def bot_line_ids(self, bot_id: int) -> np.ndarray:
        """The ids of every line the bot holds (through the (bot, id) index)."""
        rows = self._query("SELECT id FROM lines WHERE bot_id = ?", (bot_id,))
        return np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))

    def vector_page(self, bot_id: int, after_id: int, limit: int) -> VectorRows:
        """Up to ``limit`` of the bot's lines with ``id > after_id``, in id order. Writers
        take turns on SQLite, so ids commit in order and the last id read is a cursor."""
        rows = self._query(
            _ROWS + "WHERE l.bot_id = ? AND l.id > ? ORDER BY l.id LIMIT ?",
            (bot_id, after_id, limit),
        )
        return VectorRows.from_rows(rows)

    def vector_rows_around(self, line_ids: Sequence[int]) -> VectorRows:
        """The lines ``line_ids`` that still exist and the lines right before and after each
        in its thread, once each, in id order (through the (thread, seq) index)."""
        if not line_ids:
            return VectorRows.from_rows([])
        marks = ", ".join("?" * len(line_ids))
        rows = self._query(
            "SELECT l.id, l.bot_id, l.person_id, l.thread_id, l.seq, l.role, v.vector, "
            "l.created_at FROM lines h JOIN lines l ON l.thread_id = h.thread_id "
            "AND l.seq BETWEEN h.seq - 1 AND h.seq + 1 JOIN line_vectors v ON v.line_id = l.id "
            f"WHERE h.id IN ({marks}) GROUP BY l.id ORDER BY l.id",
            [int(line_id) for line_id in line_ids],
        )
        return VectorRows.from_rows(rows)

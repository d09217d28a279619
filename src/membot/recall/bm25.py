"""Lexical ranking: SQLite FTS5's BM25 over the store's ``line_text`` index.

The query's words are quoted and OR-ed, so any line sharing a word can match and no
punctuation in the query (quotes, ``-``, ``:``, ``*``, ``NEAR``) is read as FTS5 syntax.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from membot.recall.lines import Hit
from membot.recall.ranking import EVERY_LINE, LinesRanking, located
from membot.search import Scope

if TYPE_CHECKING:
    from membot.memory import Memory

_WORD = re.compile(r"\w+")


def fts_query(text: str) -> str:
    """``What's "Bob's" job?`` -> ``"what" OR "s" OR "bob" OR "job"``; empty without words."""
    words = dict.fromkeys(word.lower() for word in _WORD.findall(text))
    return " OR ".join(f'"{word}"' for word in words)


def bm25_hits(memory: Memory, query: str, scope: Scope) -> list[Hit]:
    """Lines in scope sharing a word with ``query``, best BM25 score first."""
    match = fts_query(query)
    if not match:
        return []
    scored = memory.store.lexical_search(
        match, scope.bot_id, scope.person_id, scope.thread_id, scope.roles, limit=EVERY_LINE
    )
    hits = located(memory, scored)
    if scope.window_thread_id is None or scope.window_from_seq is None:
        return hits
    return [
        hit
        for hit in hits
        if not (hit.thread_id == scope.window_thread_id and hit.seq >= scope.window_from_seq)
    ]


class BM25Ranking(LinesRanking):
    """Lines ranked by BM25 alone (lines without a query word are not ranked), expanded
    ±``before``/``after`` lines like ``lines``."""

    name = "bm25"

    def hits(self, memory: Memory, query: str, scope: Scope) -> list[Hit]:
        return bm25_hits(memory, query, scope)

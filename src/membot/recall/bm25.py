"""Lexical ranking: SQLite FTS5's BM25 over the store's ``line_text`` index.

The query's words are quoted and OR-ed, so any line sharing a word can match and no
punctuation in the query (quotes, ``-``, ``:``, ``*``, ``NEAR``) is read as FTS5 syntax.
A caller may leave out ``STOPWORDS`` (``blend`` does): BM25's IDF damps them, but every line
holding "what" or "did" still gets a score and takes a place ahead of the lines BM25 misses.
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

# English function words, lower case, as ``\w+`` cuts them ("don't" -> "don", "t")
_STOPWORD_LIST = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such t than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s
"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())


def query_terms(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """``What's "Bob's" job?`` -> ``["what", "s", "bob", "job"]``: its words, lower case, once
    each; words in ``stopwords`` are left out unless the text has no other word."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    return [word for word in words if word not in stopwords] or words


def bm25_hits(
    memory: Memory, query: str, scope: Scope, stopwords: frozenset[str] = frozenset()
) -> list[Hit]:
    """Lines in scope sharing a word with ``query`` (``stopwords`` aside), best BM25 first."""
    terms = query_terms(query, stopwords)
    if not terms:
        return []
    scored = memory.store.lexical_search(
        terms, scope.bot_id, scope.person_id, scope.thread_id, scope.roles, limit=EVERY_LINE
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

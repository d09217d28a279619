"""Lexical search's words: the query's terms for the store's BM25 (SQLite FTS5 over the
``line_text`` index, where the terms are quoted and OR-ed, so any line sharing a word can match
and no punctuation in the query is read as FTS5 syntax), and an in-memory BM25 for texts the
store does not index (``benchmarks/longmemeval_plain_tools.py``).

A caller may leave out ``STOPWORDS`` (``blend`` does): BM25's IDF damps them, but every line
holding "what" or "did" still gets a score and takes a place ahead of the lines BM25 misses.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

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


class TermIndex:
    """Documents (their word counts) by word, for Okapi BM25 that reads only the documents
    holding a query word; IDF ``log(1 + (N - n + 0.5) / (n + 0.5))``."""

    def __init__(self, documents: Sequence[Counter[str]], k1: float = 1.2, b: float = 0.75):
        self.size = len(documents)
        self.k1 = k1
        lengths = np.asarray([sum(document.values()) for document in documents], dtype=float)
        mean = max(float(lengths.mean()), 1.0) if self.size else 1.0
        self.scale = k1 * (1 - b + b * lengths / mean)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for row, document in enumerate(documents):
            for word, count in document.items():
                rows, counts = postings.setdefault(word, ([], []))
                rows.append(row)
                counts.append(count)
        self.postings = {
            word: (np.asarray(rows), np.asarray(counts, dtype=float))
            for word, (rows, counts) in postings.items()
        }

    def bm25(self, words: Sequence[str]) -> np.ndarray:
        """Each document's BM25 for the query ``words`` (0 where it holds none)."""
        scores = np.zeros(self.size)
        for word in dict.fromkeys(words):
            if word not in self.postings:
                continue
            rows, counts = self.postings[word]
            idf = np.log(1 + (self.size - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += idf * counts * (self.k1 + 1) / (counts + self.scale[rows])
        return scores

"""Lexical search: the query's terms; :class:`ScopeTerms`, the BM25 a turn ranks by, kept in
memory beside each scope's vectors (so its cost follows the person's lines, not the store's);
and :class:`TermIndex`, a fixed BM25 over plain texts (``benchmarks/longmemeval_plain_tools.py``).

A line's words are cut and stemmed as SQLite's FTS5 ``porter unicode61`` tokenizer cuts them
(the stores' own full-text indexes; a large shared scope's recall asks them,
membot.index.approximate): runs
of letters and digits, lower case, accents removed, Porter's stemmer for words longer than two
letters (tests/recall/test_bm25.py compares the two). Snowball's Porter keeps a few suffixes
FTS5's drops ("incredibly" -> "incredibli", not "incred"), and FTS5 keeps emoji as words.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import snowballstemmer

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


_TOKEN = re.compile(r"[^\W_]+")
_STEMMER = snowballstemmer.stemmer("porter")
_STEMMER_LOCK = threading.Lock()  # a Snowball stemmer keeps the word it works on


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    if len(word) <= 2:  # as FTS5's porter: "is", "us" and "as" stay whole
        return word
    with _STEMMER_LOCK:
        stem: str = _STEMMER.stemWord(word)  # snowballstemmer has no types
    return stem


def index_words(text: str) -> list[str]:
    """``"Bob's cafés opened"`` -> ``["bob", "s", "cafe", "open"]``: a text's words as BM25
    counts them, in order, repeats kept."""
    folded = text.lower()
    if not folded.isascii():
        decomposed = unicodedata.normalize("NFKD", folded)
        folded = "".join(char for char in decomposed if not unicodedata.combining(char))
    return [_stem(word) for word in _TOKEN.findall(folded)]


class ScopeTerms:
    """Okapi BM25 over one scope's lines, grown as lines are written: each word's lines (ids,
    counts, line lengths) in growing arrays, so a query reads only the lines holding one of its
    words. Constants and IDF as FTS5's ``bm25()``: k1 1.2, b 0.75, ``log((N - n + 0.5) / (n +
    0.5))`` floored at 1e-6 -- but N, n and the mean length are the scope's, not the store's:
    a word is rare or common among the person's own lines."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.lines = 0
        self.words = 0
        self.postings: dict[str, tuple[array[int], array[int], array[int]]] = {}
        self.nbytes = 0  # about what the postings take in memory, kept as they grow

    def add(self, ids: Iterable[int], texts: Iterable[str]) -> None:
        for line_id, text in zip(ids, texts, strict=True):
            words = index_words(text)
            self.lines += 1
            self.words += len(words)
            for word, count in Counter(words).items():
                posting = self.postings.get(word)
                if posting is None:
                    posting = self.postings[word] = (array("q"), array("i"), array("i"))
                    self.nbytes += 300  # the word, its dictionary entry and three arrays
                self.nbytes += 16
                posting[0].append(int(line_id))
                posting[1].append(count)
                posting[2].append(len(words))

    def bm25(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, scores) of the lines holding any of ``words`` (query words, cut and
        stemmed here), in no particular order."""
        wanted = dict.fromkeys(term for word in words for term in index_words(word))
        found = [self.postings[term] for term in wanted if term in self.postings]
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        mean_length = max(self.words / max(self.lines, 1), 1e-9)
        ids = np.concatenate([np.frombuffer(posting[0], dtype=np.int64) for posting in found])
        parts = []
        for line_ids, counts, lengths in found:
            count = np.frombuffer(counts, dtype=np.int32).astype(float)
            length = np.frombuffer(lengths, dtype=np.int32)
            idf = max(np.log((self.lines - len(line_ids) + 0.5) / (len(line_ids) + 0.5)), 1e-6)
            scale = self.k1 * (1 - self.b + self.b * length / mean_length)
            parts.append(idf * count * (self.k1 + 1) / (count + scale))
        unique, where = np.unique(ids, return_inverse=True)
        return unique, np.bincount(where, weights=np.concatenate(parts))

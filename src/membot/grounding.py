"""Is a point a model wrote about a person supported by what that person said?

A memory must never hold what the person did not say. When a thread ends with "remember
this", a model writes the key points; small models copy the instruction's example ("is
allergic to peanuts") or the bot's own advice into them. Before anything is kept, each point
is held against the person's own lines of the thread, with no model involved:

- **words**: more than half of the point's content words (not stopwords, not the names of
  the two speakers, not dates or numbers) occur in the person's lines, compared on a crude
  stem (lower case, an ending such as "-ies", "-ing", "-ed" or "-s" dropped, the first five
  letters) so "allergic" finds "allergy" and "flies" finds "fly"; or
- **meaning**: the point, without its date and the speakers' names, has a cosine of at least
  ``MIN_COSINE`` with one of the person's lines in the memory's own embedder (a paraphrase:
  "Sam is moving to Berlin" for "We are relocating to Germany next month", 0.66 with the
  bundled MiniLM, where "Sam has three cats" for "My dog barks at the neighbours" is 0.25;
  tests/test_grounding.py holds such pairs).

A point that passes neither is dropped and the ending's notes say which. The check is
deliberately strict: a fact only the bot said, even if the person nodded at it, is not kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from membot.recall.bm25 import STOPWORDS

MIN_COSINE = 0.5
MIN_WORD_SHARE = 0.5
_WORD = re.compile(r"[^\W\d_]+")
_DATE_PREFIX = re.compile(r"^\s*(?:[-*•]\s*)?\(?\d{4}-\d{2}-\d{2}\)?\s*:?\s*")
Embed = Callable[[Sequence[str]], np.ndarray]


def _stem(word: str) -> str:
    """A crude English stem, enough to meet a word again in another form: "flies" and
    "fly", "allergic" and "allergy", "running" and "run"."""
    word = word.lower()
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # "runn", "stopp"
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):  # "like" and "lik(ed)"
        word = word[:-1]
    return word[:5]


def content_stems(text: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """The stems of ``text``'s content words: no stopwords, no words in ``ignore``, none
    shorter than three letters."""
    words = (word.lower() for word in _WORD.findall(text))
    return {_stem(w) for w in words if len(w) > 2 and w not in STOPWORDS and w not in ignore}


def undated(point: str) -> str:
    """The point without its leading date."""
    return _DATE_PREFIX.sub("", point).strip()


def _without_names(text: str, ignore: frozenset[str]) -> str:
    """``text`` without the speakers' names (and their possessive 's): lines say "I"."""
    kept = re.sub(
        r"\b(\w+)'s\b", lambda m: m.group(0) if m.group(1).lower() not in ignore else "", text
    )
    words = [word for word in kept.split() if word.strip(".,:;!?").lower() not in ignore]
    return " ".join(words) or text


def unsupported_points(
    points: Sequence[str], said: Sequence[str], embed: Embed | None, names: Sequence[str] = ()
) -> list[str]:
    """The ``points`` that nothing in ``said`` (the person's own lines) supports, in order;
    without ``embed``, by their words alone."""
    if not points:
        return []
    ignore = frozenset(part.lower() for name in names for part in _WORD.findall(name))
    heard = set().union(*(content_stems(line, ignore) for line in said)) if said else set()
    doubtful = []
    for point in points:
        stems = content_stems(undated(point), ignore)
        found = len(stems & heard)
        if stems and found / len(stems) > MIN_WORD_SHARE:
            continue
        doubtful.append(point)
    if not doubtful or not said or embed is None:
        return doubtful
    asked = [_without_names(undated(point), ignore) for point in doubtful]
    vectors = np.asarray(embed(asked + list(said)), np.float32)
    cosines = vectors[: len(doubtful)] @ vectors[len(doubtful) :].T
    return [point for point, row in zip(doubtful, cosines, strict=True) if row.max() < MIN_COSINE]

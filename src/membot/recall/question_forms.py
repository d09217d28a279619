"""A question in the form of the lines that answer it, by rules (no LLM).

"What has Melanie painted?" is answered by "Melanie: I painted a sunset last week"; the two
differ in form more than in words. :func:`statement_form` turns a question into a
statement-like text ("Melanie painted"): the wh-word and the auxiliary (do, has, is, can, ...)
are dropped, "how many days passed between X and Y" becomes "X Y days", the question mark
goes. ``blend`` embeds it and mixes its cosines into the question's
(:func:`mixed_cosines`, option ``statement_weight``; docs/recall.md, "A question in the form of
its answer"). A line that is not a question has no statement form (None).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from membot.index.scope import InScope
    from membot.recall.source import RecallSource
    from membot.recall.strategies import Question

WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
AUXILIARIES = frozenset(
    {
        "do", "does", "did", "has", "have", "had", "is", "are", "was", "were", "am",
        "will", "would", "can", "could", "should", "shall", "may", "might", "must",
    }
)  # fmt: skip
# How far after the wh-phrase the question's auxiliary is looked for, in words.
AUXILIARY_REACH = 4
# Words after "how" that belong to the wh-phrase ("how many", "how long ago").
_HOW_WORDS = frozenset({"many", "much", "long", "often", "old", "far", "ago", "soon", "come"})
# Words that mean nothing in a statement: "kind of", "type of" after "what".
_FILLERS = frozenset({"kind", "kinds", "type", "types", "sort", "sorts", "of"})
_WORD = re.compile(r"[\w'’-]+")
# "how many days passed between X and Y" -> "X Y days"
_BETWEEN = re.compile(
    r"^how\s+(?:many|much|long)\s+(?P<unit>\w+)?.*?\bbetween\b\s+(?P<first>.+?)\s+and\s+"
    r"(?P<second>.+)$",
    re.IGNORECASE,
)


def is_question(line: str) -> bool:
    """Whether ``line`` asks: it ends with "?" or starts with a wh-word or an auxiliary."""
    text = line.strip()
    if text.endswith("?"):
        return True
    words = _WORD.findall(text)
    return bool(words) and words[0].casefold() in WH_WORDS | AUXILIARIES


def statement_form(line: str) -> str | None:
    """``line`` as a statement-like text, or None when it is not a question or nothing
    different is left (the rules: the module docstring)."""
    if not is_question(line):
        return None
    text = line.strip().rstrip("?").strip()
    between = _BETWEEN.match(text)
    if between:
        unit = between["unit"] or ""
        if unit.casefold() in _HOW_WORDS | {"time"}:
            unit = ""
        kept = " ".join(part for part in (between["first"], between["second"], unit) if part)
        return _changed(kept, line)
    words = _WORD.findall(text)
    start = 0
    if words and words[0].casefold() == "how":
        start = 1
        while start < len(words) and words[start].casefold() in _HOW_WORDS:
            start += 1
    elif words and words[0].casefold() in WH_WORDS:
        start = 1
        while start < len(words) and words[start].casefold() in _FILLERS:
            start += 1
    rest = words[start:]
    # The auxiliary of the question: the first within a few words of the wh-phrase ("What
    # book recommendation did Tim give" -> "book recommendation Tim give").
    for at, word in enumerate(rest[:AUXILIARY_REACH]):
        if word.casefold() in AUXILIARIES:
            del rest[at]
            break
    return _changed(" ".join(rest), line)


def _changed(form: str, line: str) -> str | None:
    """``form`` unless it is empty or the line itself."""
    form = form.strip()
    return form if form and form != line.strip() else None


def with_statement(
    source: RecallSource, question: Question, lines: InScope, weight: float, highest: bool
) -> InScope:
    """``lines`` (the question's cosines, with its parts') with each cosine mixed with the
    statement form's (:func:`mixed_cosines`); ``lines`` itself at ``weight`` 0 or for a line
    that is not a question. A line the statement's search did not read (a large shared
    scope's approximate index) keeps the question's cosine."""
    form = statement_form(question.line) if weight else None
    if form is None:
        return lines
    return mixed_with_form(source, question, lines, form, weight, highest)


def mixed_with_form(
    source: RecallSource,
    question: Question,
    lines: InScope,
    form: str,
    weight: float,
    highest: bool,
) -> InScope:
    """``lines`` with each cosine (and its best part's) mixed with its cosine with ``form``,
    another form of the question, searched over the question's scope (:func:`mixed_cosines`).
    A line that search did not read (a large shared scope's approximate index) keeps the
    question's cosine; ``lines`` itself when it is empty or the search found nothing."""
    if not len(lines.ids):
        return lines
    found = source.scored(question.vector_of(form, source), question.scope)
    if not len(found.ids):
        return lines
    at = np.clip(np.searchsorted(found.ids, lines.ids), 0, len(found.ids) - 1)
    read = found.ids[at] == lines.ids
    scores = mixed_cosines(lines.scores, np.where(read, found.scores[at], lines.scores), weight,
                           highest)  # fmt: skip
    parts = lines.best_parts
    if parts is not None and found.best_parts is not None:
        parts = mixed_cosines(parts, np.where(read, found.best_parts[at], parts), weight, highest)
    return replace(lines, scores=scores, best_parts=parts)


def mixed_cosines(
    question: np.ndarray, statement: np.ndarray, weight: float, highest: bool = True
) -> np.ndarray:
    """Each line's cosine with the question moved ``weight`` of the way toward its cosine
    with the statement form (``weight`` 0.5: their mean); ``highest``: never below the
    question's own (at ``weight`` 1 the higher of the two). -inf (a line without parts)
    stays -inf."""
    q = np.asarray(question, dtype=np.float64)
    s = np.asarray(statement, dtype=np.float64)
    finite = np.isfinite(q) & np.isfinite(s)
    moved = q.copy()
    moved[finite] += weight * (s[finite] - q[finite])
    if highest:
        moved = np.maximum(q, moved)
    return moved.astype(np.asarray(question).dtype)

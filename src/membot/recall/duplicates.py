"""Clean in, clean out: near-duplicate matches collapse into one, and a line that only asks
again what is asked now gives way to the lines that answer it.

The one recall path (:func:`membot.recall.chat.chosen_for_turn`) runs this after every
strategy's choice. It asks the strategy for :data:`EXTRA_CANDIDATES` more matches than the
bot's ``max_matches``, so that the slots a collapse frees are filled by the next lines, then:

- Matches whose lines are near-duplicates -- the same words (:func:`normalised`: case,
  punctuation and spacing aside), or vectors at a cosine of at least :data:`DUPLICATE_COSINE`
  holding the same numbers -- collapse into one, which carries ``duplicates``: how many it
  stands for. The one kept is the first in the strategy's order (its order weighs the line's
  context: ``blend`` raises the copy whose neighbours match too, such as a question followed
  by its answer), and among copies ordered alike the most recent.
- A match that is a person's question and a near-duplicate of the line asked now (the person
  asking the same thing again) moves behind every other match: what answered it matters, not
  the question. It still takes a slot the other lines leave free, and brings its block (the
  exchange around it, where its answer is); the answer also competes on its own score.

Why 0.95 and the numbers (``benchmarks/near_duplicates.py``, MiniLM): the same question
worded a little differently scores 0.97 ("When's my exam?", "when is my exam??"), while
lines alike in words but saying something else stay at or below 0.92 ("My exam was on 12
December." 0.92, "when is my maths exam?" 0.87) -- but for numbers: "My exam is on 12
December." and "... 14 December." score 0.97, so lines whose numbers differ never collapse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from membot.index.scope import similarities
from membot.model import Line, Role
from membot.recall.strategies import Choice, Question
from membot.sentences import sentences

if TYPE_CHECKING:
    from membot.recall.lines import Hit
    from membot.recall.source import RecallSource

DUPLICATE_COSINE = 0.95
EXTRA_CANDIDATES = 10  # read beyond max_matches to fill freed slots (a turn: 13, not 3)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+")
_QUESTION_WORDS = frozenset(
    {"who", "whom", "whose", "what", "which", "when", "where", "why", "how", "is", "are", "am",
     "was", "were", "do", "does", "did", "can", "could", "will", "would", "should", "shall",
     "may", "might", "have", "has", "had"}
)  # fmt: skip


def normalised(text: str) -> str:
    """``text`` as its words, lower case, one space apart: case, punctuation and spacing
    ("When is my exam??", "when is my exam") make no difference."""
    return " ".join(_WORD.findall(text.casefold()))


def is_question(text: str) -> bool:
    """Whether ``text`` asks something: it holds a question mark, or opens with a question
    word ("when is my exam")."""
    words = normalised(text).split(" ", 1)
    return "?" in text or words[0] in _QUESTION_WORDS


def statements(text: str) -> list[str]:
    """The sentences of ``text`` that do not ask (:func:`is_question`): what it states."""
    return [sentence for sentence in sentences(text) if not is_question(sentence)]


def candidates_for(max_matches: int, every_line: int) -> int:
    """How many matches to ask a strategy for when ``max_matches`` are kept."""
    return min(max_matches + EXTRA_CANDIDATES, every_line)


@dataclass(frozen=True)
class _Said:
    """What the rules read of a line: its words, its numbers and its vector."""

    words: str
    numbers: tuple[str, ...]
    vector: np.ndarray

    @classmethod
    def of(cls, text: str, vector: np.ndarray) -> _Said:
        return cls(normalised(text), tuple(_NUMBER.findall(text)), vector)

    def near(self, other: _Said, cosine: float | None = None) -> bool:
        """Whether the two are near-duplicates (see the module docstring)."""
        if self.words and self.words == other.words:
            return True
        if cosine is None:
            cosine = float(self.vector @ other.vector)
        return cosine >= DUPLICATE_COSINE and self.numbers == other.numbers


def distinct_choices(
    source: RecallSource, choices: Sequence[Choice], question: Question, limit: int
) -> list[Choice]:
    """``choices`` (best first) with near-duplicates collapsed and repeats of the question
    moved behind the others, at most ``limit``."""
    if not choices:
        return []
    line_ids = [choice.hit.line_id for choice in choices]
    lines = _lines_of(source, [choice.hit for choice in choices])
    vectors = source.vectors(line_ids, question.scope)
    said = [
        _Said.of(lines[line_id].text if line_id in lines else "", vector)
        for line_id, vector in zip(line_ids, vectors, strict=True)
    ]
    asked = _asked(source, question)
    to_asked = similarities(vectors, asked.vector)
    kept: list[Choice] = []
    repeats: list[Choice] = []
    for group in _groups(said, vectors, line_ids):
        index, choice = _collapsed(choices, group)
        repeat = _repeats(lines.get(line_ids[index]), said[index], asked, float(to_asked[index]))
        (repeats if repeat else kept).append(choice)
    if repeats:
        # Ordered last in a benchmark's ranking too (membot.recall.ranked reads the orders).
        floor = min(choice.order for choice in choices) - 1.0
        kept += [replace(choice, order=floor) for choice in repeats]
    return kept[:limit]


def _collapsed(choices: Sequence[Choice], group: list[int]) -> tuple[int, Choice]:
    """The group's choice kept (first in order; of those ordered alike, the most recent) and
    its index, carrying the others as its duplicates."""
    if len(group) == 1:
        return group[0], choices[group[0]]
    best = max(group, key=lambda i: (choices[i].order, choices[i].hit.line_id))
    others = tuple(choices[i].hit for i in group if i != best)
    base = choices[best]
    return best, replace(base, hit=replace(base.hit, duplicates=len(others)), duplicates=others)


def _groups(said: list[_Said], vectors: np.ndarray, line_ids: list[int]) -> list[list[int]]:
    """The choices' indexes in groups of near-duplicates, in order of each group's first;
    a line joins the first group whose first line it nearly duplicates. Two choices of one
    line (two windows around it) are not copies of each other."""
    near = similarities(vectors, vectors.T) >= DUPLICATE_COSINE  # one BLAS thread
    groups: list[list[int]] = []
    by_words: dict[str, int] = {}
    leads = np.zeros(len(said), dtype=bool)
    group_led_by: dict[int, int] = {}
    for index, line in enumerate(said):
        group = by_words.get(line.words) if line.words else None
        if group is not None and line_ids[groups[group][0]] == line_ids[index]:
            group = None
        if group is None:
            for lead in np.flatnonzero(near[:index, index] & leads[:index]).tolist():
                # The cosine passed: the numbers decide.
                if said[lead].numbers == line.numbers and line_ids[lead] != line_ids[index]:
                    group = group_led_by[lead]
                    break
        if group is None:
            group = len(groups)
            groups.append([])
            leads[index] = True
            group_led_by[index] = group
        groups[group].append(index)
        if line.words:
            by_words.setdefault(line.words, group)
    return groups


def _asked(source: RecallSource, question: Question) -> _Said:
    """The line asked now, as the rules read it (its vector is the question's own unless a
    match string was searched for instead)."""
    line = question.line
    vector = question.vector if line == question.text else source.embed([line])[0]
    return _Said.of(line, np.asarray(vector, dtype=np.float32))


def _repeats(line: Line | None, said: _Said, asked: _Said, cosine: float) -> bool:
    """Whether a recalled line (``cosine`` to the line asked now) is a person's question
    asked again now."""
    return (
        line is not None
        and str(line.role) == Role.HUMAN
        and said.near(asked, cosine)
        and is_question(line.text)
    )


def _lines_of(source: RecallSource, hits: Sequence[Hit]) -> dict[int, Line]:
    """The hits' lines by id, read in one query (a range for each run of seqs)."""
    runs: list[tuple[int, int, int]] = []
    for thread, seq in sorted({(hit.thread_id, hit.seq) for hit in hits}):
        if runs and runs[-1][0] == thread and runs[-1][2] == seq - 1:
            runs[-1] = (thread, runs[-1][1], seq)
        else:
            runs.append((thread, seq, seq))
    wanted = {hit.line_id for hit in hits}
    return {
        line.id: line
        for lines in source.lines_in_ranges(runs)
        for line in lines
        if line.id in wanted
    }

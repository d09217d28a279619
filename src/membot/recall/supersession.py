"""Facts that changed: of two recalled lines that state different values of the same thing,
the later is the current one and the earlier is history.

"I live in Boston." and, months later, "I moved to Denver." are both recalled for "where do I
live?". Without a mark the model reads two homes. :func:`superseded_lines` pairs them by
rules, without an LLM, and conservatively (a false mark hides a fact that still holds):

- both lines said by a person (a bot's reply is not a fact about anyone: a small model's
  chatty "She is 3 months old!" marked as the current value would lend it the weight of
  what the person said), by the same person and speaker, the later said later (by time,
  then by thread and place);
- they are compared sentence by sentence (a fact is often one sentence of a longer line:
  "... By the way, I just finished page 220 of ..."), of the sentences that state a value:
  a sentence that names a name (a capitalised word not opening a sentence: "Boston",
  "Denver") or a number ("3 cats", "page 220"), holds at least 3 words, and is neither a
  question nor a plan or a wish ("I'm planning to visit X", "I'll consider X");
- two such sentences each name a value the other does not, and with the values masked they
  say the same thing: the cosine of "I live in X." and "I moved to X." is at least
  :data:`SAME_THING` (0.72).

Pairs measured with MiniLM, masked: "I live in X." / "I moved to X." 0.75 (marked); "My exam
is on X X." / "My exam was moved to X X." 0.79 (marked); "I work at X as an engineer." / "I
just started a new job at X!" 0.68 (missed); "I live in X." / "I visited X last week." 0.57
(kept apart). Known false marks: two trips said alike ("I went to Paris in May." / "I went to
Rome in June.", 1.0), another person's fact said alike ("My sister lives in X.", 0.77); the
earlier line stays in the prompt, marked as earlier, so the model still reads it. A change
that names no value ("my favourite colour is green now") is not marked. How often the marks
fall where LongMemEval's facts changed: ``benchmarks/supersession.py`` (docs/recall.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from membot.model import Line, Role
from membot.recall.duplicates import statements
from membot.recall.values import masked, named_words

# The masked cosine at or above which two lines state the same thing (module docstring).
SAME_THING = 0.72
# The most lines a turn compares (the newest recalled lines that state a value), and the
# most sentences of theirs it embeds: each costs about what embedding the new line costs.
MAX_LINES = 12
MAX_SENTENCES = 16
MIN_WORDS = 3
_WORD = re.compile(r"[A-Za-z]{2,}")
_INTENT = re.compile(
    r"\b(?:plan(?:ning|s)? to|going to|will|'ll|would|'d|might|may|could|should|maybe|"
    r"thinking (?:of|about)|consider(?:ing)?|want(?:ing)? to|hop(?:e|ing) to|"
    r"wonder(?:ing)?|looking for|if)\b",
    re.I,
)


def superseded_lines(
    lines: Sequence[Line], embed: Callable[[list[str]], np.ndarray]
) -> dict[int, int]:
    """For each line of ``lines`` that a later one of them supersedes, its id -> the id of
    the latest line superseding it. Lines are compared sentence by sentence (a fact is often
    one sentence of a longer line: "... By the way, I just finished page 220 of ..."):
    ``embed`` gives vectors for the masked sentences that could pair, at most
    :data:`MAX_SENTENCES` (none is embedded when no two could)."""
    stated = _statements(lines)
    pairs = [
        (earlier, later, one, other)
        for at, earlier in enumerate(stated)
        for later in stated[at + 1 :]
        if _party(earlier) == _party(later)
        for one in _stating(earlier.text)
        for other in _stating(later.text)
        if _values_differ(one, other)
    ]
    if not pairs:
        return {}
    wanted = list(dict.fromkeys(text for *_, one, other in pairs for text in (one, other)))
    wanted = wanted[:MAX_SENTENCES]
    vectors = np.asarray(embed([masked(text) for text in wanted]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = dict(zip(wanted, vectors / np.where(norms > 0, norms, 1), strict=True))
    superseded: dict[int, int] = {}
    for earlier, later, one, other in pairs:  # the latest superseding line comes last
        if one in unit and other in unit and float(unit[one] @ unit[other]) >= SAME_THING:
            superseded[earlier.id] = later.id
    return superseded


def _statements(lines: Sequence[Line]) -> list[Line]:
    """The people's lines with a sentence that states a value, oldest first, at most
    :data:`MAX_LINES` (the newest)."""
    found = {line.id: line for line in lines if line.role == Role.HUMAN and _stating(line.text)}
    ordered = sorted(found.values(), key=lambda line: (line.created_at, line.thread, line.seq))
    return ordered[-MAX_LINES:]


def _stating(text: str) -> list[str]:
    """The sentences of ``text`` that state a value: they name one, hold at least
    :data:`MIN_WORDS` words (not a list's item or a chess move, "Nf3 Nf6 3."), and are neither
    a question nor a plan or a wish ("I'm planning to visit X", "I'll consider X": what will
    or may be is not what changed)."""
    return [
        each
        for each in statements(text)
        if named_words(each) and len(_WORD.findall(each)) >= MIN_WORDS and not _INTENT.search(each)
    ]


def _party(line: Line) -> tuple[str, str | None]:
    return line.person, line.speaker


def _values_differ(earlier: str, later: str) -> bool:
    """Each text names a value (a name or a number, case aside) the other does not."""
    before = {word.lower() for word in named_words(earlier)}
    after = {word.lower() for word in named_words(later)}
    return bool(before - after) and bool(after - before)

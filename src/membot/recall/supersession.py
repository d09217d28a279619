"""Facts that changed: of two recalled lines that state different values of the same thing,
the later is the current one and the earlier is history.

"I live in Boston." and, months later, "I moved to Denver." are both recalled for "where do I
live?". Without a mark the model reads two homes. :func:`superseded_lines` pairs them by
rules, without an LLM, and conservatively (a false mark hides a fact that still holds):

- both lines said by the same party (role and speaker), neither a question, the later said
  later (by time, then by place in its thread);
- each names a value the other does not: a name (a capitalised word not opening a sentence:
  "Boston", "Denver", "Microsoft") or a number ("3 cats", "14 December");
- with those values masked, the two lines say the same thing: the cosine of their masked
  texts ("I live in X." / "I moved to X.") is at least :data:`SAME_THING` (0.72).

The measured pairs (MiniLM): "I live in X." / "I moved to X." 0.75, "I work at X as an
engineer." / "I just started a new job at X!" 0.68 (missed), "My exam is on X X." / "My exam
was moved to X X." 0.79, "I live in X." / "I visited X last week." 0.57 (kept apart), "I love
pizza." / "I had dinner with X." 0.30. Known false marks: two trips said alike ("I went to
Paris in May." / "I went to Rome in June.", 1.0), or another person's fact said alike ("My
sister lives in X.", 0.77) -- the earlier line stays in the prompt, marked as earlier, so
the model still reads it. A change that names no value ("my favourite colour is green now")
is not marked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from membot.model import Line, Role
from membot.recall.duplicates import is_question
from membot.recall.values import masked, named_words

# The masked cosine at or above which two lines state the same thing (module docstring).
SAME_THING = 0.72
# The most lines a turn compares: the recalled lines that hold values, newest kept.
MAX_LINES = 12


def superseded_lines(
    lines: Sequence[Line], embed: Callable[[list[str]], np.ndarray]
) -> dict[int, int]:
    """For each line of ``lines`` that a later one of them supersedes, its id -> the id of
    the latest line superseding it. ``embed`` gives vectors for the masked texts of the lines
    that could pair (none is embedded when no two could)."""
    stated = _statements(lines)
    pairs = [
        (earlier, later)
        for at, earlier in enumerate(stated)
        for later in stated[at + 1 :]
        if _party(earlier) == _party(later) and _values_differ(earlier.text, later.text)
    ]
    if not pairs:
        return {}
    wanted = list(dict.fromkeys(line.id for pair in pairs for line in pair))
    texts = {line.id: masked(line.text) for pair in pairs for line in pair}
    vectors = np.asarray(embed([texts[line_id] for line_id in wanted]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = dict(zip(wanted, vectors / np.where(norms > 0, norms, 1), strict=True))
    superseded: dict[int, int] = {}
    for earlier, later in pairs:  # later pairs come later: the latest superseding line wins
        if float(unit[earlier.id] @ unit[later.id]) >= SAME_THING:
            superseded[earlier.id] = later.id
    return superseded


def _statements(lines: Sequence[Line]) -> list[Line]:
    """The lines that state a value and are not questions, oldest first, at most
    :data:`MAX_LINES` (the newest)."""
    found = {
        line.id: line
        for line in lines
        if line.role != Role.TOOL and named_words(line.text) and not is_question(line.text)
    }
    ordered = sorted(found.values(), key=lambda line: (line.created_at, line.thread, line.seq))
    return ordered[-MAX_LINES:]


def _party(line: Line) -> tuple[str, str, str | None]:
    return line.person, str(line.role), line.speaker


def _values_differ(earlier: str, later: str) -> bool:
    """Each text names a value (a name or a number, case aside) the other does not."""
    before = {word.lower() for word in named_words(earlier)}
    after = {word.lower() for word in named_words(later)}
    return bool(before - after) and bool(after - before)

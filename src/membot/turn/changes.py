"""Facts that changed, as a turn shows them: of the recalled lines, those a later recalled
line supersedes (:mod:`membot.recall.supersession`) are marked as earlier, and the lines
superseding them as current -- in the prompt, beside the line, and in the trace (a match's
``superseded_by``).

"I live in Boston." then "I moved to Denver." reach the prompt as::

    Ann: I live in Boston. (earlier; changed on 2026-03-02)
    Ann: I moved to Denver. (current)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC

import numpy as np

from membot.model import Line, Match
from membot.recall.supersession import superseded_lines


def changed_facts(
    matches: Sequence[Match], embed: Callable[[list[str]], np.ndarray]
) -> dict[int, Line]:
    """This turn's matched lines that a later one of them supersedes: line id -> the line
    superseding it. Only the matches (``max_matches``, 3 by default) are compared, not every
    line of the blocks held: each line that could pair costs an embedding in the turn."""
    matched = [match.line for match in matches]
    by_id = {line.id: line for line in matched}
    return {earlier: by_id[later] for earlier, later in superseded_lines(matched, embed).items()}


def change_marks(changes: Mapping[int, Line]) -> dict[int, str]:
    """The mark each line shows in the prompt, by line id: ``earlier; changed on DATE`` for
    a superseded line, ``current`` for the line superseding it."""
    marks = {later.id: "current" for later in changes.values()}
    for earlier, later in changes.items():
        day = later.created_at.astimezone(UTC).date().isoformat()
        marks[earlier] = f"earlier; changed on {day}"
    return marks


def marked_matches(matches: Sequence[Match], changes: Mapping[int, Line]) -> tuple[Match, ...]:
    """``matches`` with ``superseded_by`` set where a later recalled line supersedes one."""
    return tuple(
        replace(match, superseded_by=changes[match.line.id].id)
        if match.line.id in changes
        else match
        for match in matches
    )

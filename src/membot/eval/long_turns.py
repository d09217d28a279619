"""Benchmark turns longer than a line may be, stored in parts.

membot refuses a line over ``MAX_LINE_CHARS`` (32,000 characters). LongMemEval_S holds a few
longer user turns (41,855 characters, pasted documents), and a harness that stopped at the
first would measure nothing. Until a long line is stored whole (with several vectors), a
harness stores such a turn as consecutive lines, each at most the limit, cut where the text
breaks; every part keeps the turn's ``ref``, so a part recalled is the turn recalled. The
reports count the turns split: the numbers are of a store that holds them in parts, not of
what an import (which refuses them) would store.
"""

from __future__ import annotations

from dataclasses import replace

from membot.line_checks import MAX_LINE_CHARS
from membot.model import LineInput

# Where a part may end, best first: a paragraph, a line, a sentence, a word.
BREAKS = ("\n\n", "\n", ". ", "? ", "! ", " ")


def split_text(text: str, limit: int = MAX_LINE_CHARS) -> list[str]:
    """``text`` in consecutive parts of at most ``limit`` characters, each cut after the last
    break before the limit (a paragraph, else a line, a sentence, a word; no earlier than half
    the limit, so no part is a sliver; a hard cut if none), stripped; ``[text]`` if it fits."""
    parts = []
    rest = text
    while len(rest) > limit:
        cut = _cut(rest, limit)
        parts.append(rest[:cut].strip())
        rest = rest[cut:]
    parts.append(rest.strip())
    return [part for part in parts if part]


def _cut(text: str, limit: int) -> int:
    for mark in BREAKS:
        at = text.rfind(mark, limit // 2, limit - len(mark) + 1)
        if at >= 0:
            return at + len(mark)
    return limit


def in_parts(line: LineInput, limit: int = MAX_LINE_CHARS) -> list[LineInput]:
    """``line``, or its parts when its text is over ``limit``: each with the line's ref, and a
    source key of its own (``<key>#<n>``) so a store keeps every part."""
    if len(line.text) <= limit:
        return [line]
    key = line.source_key or f"ref:{line.ref}"
    return [
        replace(line, text=part, source_key=f"{key}#{number}")
        for number, part in enumerate(split_text(line.text, limit), start=1)
    ]

"""Sentences of a line, as every part of membot cuts them: a sentence ends at ., ! or ?
followed by white space, or at a line break. A line's parts (:mod:`membot.memory.line_parts`),
the grounding of what a model writes into memory (:mod:`membot.memory.grounding`) and the marks
of changed facts (:mod:`membot.recall.supersession`) all read them so."""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each sentence of ``text``, white space around it left out."""
    spans = []
    start = 0
    for separator in [*SENTENCE_END.finditer(text), None]:
        end = separator.start() if separator else len(text)
        piece = text[start:end]
        if piece.strip():
            left = start + len(piece) - len(piece.lstrip())
            spans.append((left, start + len(piece.rstrip())))
        if separator:
            start = separator.end()
    return spans


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped; none empty."""
    return [text[start:end] for start, end in sentence_spans(text)]

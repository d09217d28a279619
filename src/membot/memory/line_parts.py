"""A line cut into parts, each embedded beside the line's own vector.

A line's vector is the mean of its word pieces' vectors, and MiniLM reads only its first 256
word pieces: a fact said in passing in a line of several sentences is averaged away by the
rest, and a fact past the first 256 pieces of a long line is not in the vector at all. So a
line also keeps a vector per part, and recall scores it by its best part too
(:func:`membot.index.scope.with_parts`):

- a line of two or more sentences, whatever its length: one part per sentence (a sentence of
  fewer than ``TINY_WORDS`` words joins the next one: "Yes." or "Haha!" alone would match
  nothing in particular), a sentence of more than ``WINDOW_TOKENS`` word pieces cut between
  words into windows of at most that many, so that the model reads every word of the line;
- a line of one short sentence: no parts (its own vector is that sentence's).

A long line's sentences are not packed into windows of ``WINDOW_TOKENS``: a fact said in one
sentence of a pasted document matched its window at 0.40 and a one-line distractor at 0.54
("What is my sister's parrot called?"; the sentence alone: 0.76; tests/test_line_parts.py),
and packing saves no embedding (the same word pieces are read either way), only storage.

Parts are spans of the stored text (character offsets); each is embedded as the line is,
``Speaker: part`` (:func:`membot.model.embedding_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from membot.model import embedding_text
from membot.sentences import sentence_spans

# What counts as one word piece in the estimate: a CJK character (BERT's tokenizer splits
# each), up to 6 letters or digits of a word (a longer word is several pieces), or a
# punctuation mark. It overestimates English (about 1.2 pieces a word), so a window stays
# within what the model reads.
_PIECE = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\W_]{1,6}|[^\w\s]|_"
)
_WORD = re.compile(r"\S+")

# The most word pieces of a part: MiniLM reads 256, of which the speaker's name and the two
# special pieces take some.
WINDOW_TOKENS = 200
TINY_WORDS = 4  # a sentence shorter than this joins its neighbour
# A line of fewer estimated word pieces has no parts: each part is embedded again beside the
# line, and below this a line's own vector reads its few sentences well enough (chosen with
# benchmarks/import_speed.py and membot eval: docs/recall.md, "Parts of a line").
PARTS_FROM_TOKENS = 64


def estimated_tokens(text: str) -> int:
    """About how many word pieces BERT's tokenizer cuts ``text`` into (a little more)."""
    return len(_PIECE.findall(text))


def _merged(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` with each run of sentences of fewer than ``TINY_WORDS`` words joined to
    the next sentence, or made a part of its own once it has that many words ("Thanks!"
    said 60 times is not added to the fact before it); a short run at the end joins the
    sentence before it."""
    merged: list[tuple[int, int]] = []
    pending: int | None = None  # the start of tiny sentences waiting for the next
    for start, end in spans:
        first = start if pending is None else pending
        tiny = len(text[start:end].split()) < TINY_WORDS
        if tiny and len(text[first:end].split()) < TINY_WORDS:
            pending = first
            continue
        merged.append((first, end))
        pending = None
    if pending is not None:
        if merged:
            merged[-1] = (merged[-1][0], spans[-1][1])
        else:
            merged.append((pending, spans[-1][1]))
    return merged


def _pieces(text: str, span: tuple[int, int], limit: int) -> list[tuple[int, int]]:
    """A span of more than ``limit`` estimated pieces cut between words into spans of at
    most ``limit`` (a word longer than that, a URL or a run of digits, between characters)."""
    start, end = span
    if estimated_tokens(text[start:end]) <= limit:
        return [span]
    cut: list[tuple[int, int]] = []
    first = last = None
    count = 0
    for word in _words(text, start, end, limit):
        size = estimated_tokens(word.group())
        if first is not None and last is not None and count + size > limit:
            cut.append((first, last))
            first, count = None, 0
        first = word.start() if first is None else first
        last = word.end()
        count += size
    if first is not None and last is not None:
        cut.append((first, last))
    return cut


def _words(text: str, start: int, end: int, limit: int) -> Iterator[re.Match[str]]:
    """The words of ``text[start:end]``, a word of more than ``limit`` estimated pieces cut
    into runs of ``limit`` characters (a piece is at least one character)."""
    for word in _WORD.finditer(text, start, end):
        if estimated_tokens(word.group()) <= limit:
            yield word
            continue
        for at in range(word.start(), word.end(), limit):
            found = _WORD.match(text, at, min(at + limit, word.end()))
            if found:
                yield found


def part_spans(
    text: str, window_tokens: int = WINDOW_TOKENS, from_tokens: int = PARTS_FROM_TOKENS
) -> list[tuple[int, int]]:
    """The (start, end) of each part of a line (the module's docstring says which); none
    for a line that is one short sentence, or of fewer than ``from_tokens`` estimated word
    pieces."""
    if from_tokens and estimated_tokens(text) < from_tokens:
        return []
    sentences = _merged(text, sentence_spans(text))
    spans = [piece for span in sentences for piece in _pieces(text, span, window_tokens)]
    return spans if len(spans) >= 2 else []


def part_texts(text: str, speaker: str | None, spans: list[tuple[int, int]]) -> list[str]:
    """What each part is embedded as: ``Speaker: part``, as the line is."""
    return [embedding_text(text[start:end], speaker) for start, end in spans]

"""Key points in the person's own words, for a model too small to write them.

The bundled SmolLM2-135M cannot write key points. Held to the points' JSON shape it copies
the instruction's example ("HUMAN is allergic to peanuts") and a placeholder ("...") whatever
the thread said, so :mod:`membot.grounding` leaves everything out and remembering kept
nothing; asked in plain words it echoes the lines and adds what nobody said.

An LLM that declares ``writes_key_points = False`` is not asked. The key points are then the
person's own statements, each dated by its line and marked as said by them ("2026-11-23:
HUMAN said: I just adopted a cat named Miso"): what was said, so nothing invented. A
question, a greeting or an acknowledgement ("ok thanks") holds nothing about the person and
is left out, as is a sentence that reads as an order to a model. The points still go through
the grounding check and the bot's remember policy, as a model's would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from membot.context import Speakers
from membot.grounding import content_stems, reads_as_instruction, sentences
from membot.model import Line, Role

MIN_CONTENT_WORDS = 2  # fewer, and a sentence is small talk ("ok thanks", "sounds good")
MAX_POINT_CHARS = 300  # a long line keeps its first sentences up to this length
_TRAILING_ELLIPSIS = re.compile(r"\s*(?:\.{2,}|…)+$")
# Words of greeting and acknowledgement: not content ("ok thanks bye", "good morning").
SMALL_TALK = frozenset({
    "hi", "hello", "hey", "thanks", "thank", "bye", "goodbye", "okay", "ok", "yes", "yeah",
    "yep", "sure", "cool", "great", "nice", "good", "fine", "lol", "haha", "please", "sorry",
    "welcome", "morning", "evening", "night", "later", "cheers", "awesome",
})  # fmt: skip


def own_statements(
    lines: Sequence[Line], speakers: Speakers, names: Sequence[str] = (), limit: int = 20
) -> list[str]:
    """The person's statements in ``lines`` as dated points, in the order said: at most
    ``limit``, the ones with the most content words where there are more. ``names`` (the
    speakers') do not count as content words."""
    names_said = (part.lower() for name in names for part in re.findall(r"\w+", name))
    ignore = SMALL_TALK | frozenset(names_said)
    found: list[tuple[int, int, str]] = []  # (content words, position, point)
    seen: set[str] = set()
    for line in lines:
        if line.role != Role.HUMAN:
            continue
        said = _statement(line.text, ignore)
        key = " ".join(said.lower().split())
        if not said or key in seen:
            continue
        seen.add(key)
        day = line.created_at.date().isoformat()
        point = f"{day}: {speakers.label(line)} said: {said}"
        found.append((len(content_stems(said, ignore)), len(found), point))
    chosen = sorted(found, key=lambda item: (-item[0], item[1]))[:limit]
    return [point for _, _, point in sorted(chosen, key=lambda item: item[1])]


def _statement(text: str, ignore: frozenset[str]) -> str:
    """The sentences of ``text`` that tell something (not questions, not small talk, not
    orders to a model), on one line, cut at a sentence (or a word) to ``MAX_POINT_CHARS``."""
    kept: list[str] = []
    for sentence in sentences(" ".join(text.split())):
        sentence = _TRAILING_ELLIPSIS.sub("", sentence).strip()
        if sentence.endswith("?") or reads_as_instruction(sentence):
            continue
        if len(content_stems(sentence, ignore)) < MIN_CONTENT_WORDS:
            continue
        if kept and len(" ".join([*kept, sentence])) > MAX_POINT_CHARS:
            break
        kept.append(sentence)
    said = " ".join(kept)
    if len(said) > MAX_POINT_CHARS:
        said = said[:MAX_POINT_CHARS].rsplit(" ", 1)[0]
    return said

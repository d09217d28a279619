"""A question that names a speaker, searched by vector without the name.

"What activities has Melanie done with her family?" asks *who* (Melanie) and *what*
(activities with her family). Lines are embedded with their speaker (``Melanie: I'm off to go
swimming with the kids``), and the name weighs much in the question's vector: the nearest lines
are those that say "Melanie" (the other speaker's "Wow, Melanie! ..."), not those about
swimming or camping. ``blend`` already raises the lines said by a speaker the question names
(``speaker_weight``), so the *who* is covered without the name in the vector.

:func:`with_names_left_out`: where the new line names a speaker of the lines read (the
speakers of the :data:`NAME_DEPTH` lines nearest the question), the question without those
names ("What activities has done with her family?") is embedded and scored over the scope
too, and each line's cosine (and its best part's) moves ``unnamed_weight`` of the way toward
that cosine (1: the cosine without the names alone). One more dense scan for a
question that names a speaker; none for any other, nor for lines without speakers (a person's
chat with a bot, LongMemEval's turns).

The embedding is spent before the search, in the question's own batch (about 2 ms more a turn
on the shared 2-core machine, against about 8 for an embedding of its own: docs/recall.md,
"Why multi-hop and open-domain questions miss"): which words are speakers is
known only after the search, so :func:`unnamed_guess` guesses the names from the text alone
(capitalised words that do not open a sentence) and the guess is embedded with the question
(:func:`membot.recall.chat.embedded_question`). Where the names read leave the text the guess
left, its vector is used; otherwise (a capitalised word that is no speaker, a name in lower
case) the text left is embedded then, as without a guess.

Measured with ``benchmarks/locomo_misses.py`` and the folds: docs/recall.md, "Why multi-hop
and open-domain questions miss".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from membot.recall.bm25 import STOPWORDS
from membot.recall.question_forms import mixed_with_form

if TYPE_CHECKING:
    from membot.index.scope import InScope
    from membot.recall.source import RecallSource
    from membot.recall.strategies import Question

# Chosen by the folds (every LoCoMo fold chose 0.75; docs/recall.md, "Why multi-hop and
# open-domain questions miss").
NAMES_LEFT_OUT: dict[str, float] = {"unnamed_weight": 0.75}
# The speakers a question may name are read from this many of its nearest lines, in one query.
NAME_DEPTH = 50
# A word that starts with a capital, with its "'s" (left out of the name).
_CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s?$")
_OPENS = re.compile(r"(?:^|[.!?:])\s*$")  # what comes before the first word of a sentence
_BETWEEN_A_RUN = re.compile(r"\.? ")  # what parts two words of one name ("Dr. Seuss")
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
_CALENDAR = frozenset(
    {
        "january", "february", "march", "april", "may", "june", "july", "august",
        "september", "october", "november", "december", "jan", "feb", "mar", "apr", "jun",
        "jul", "aug", "sep", "sept", "oct", "nov", "dec", "monday", "tuesday", "wednesday",
        "thursday", "friday", "saturday", "sunday",
    }
)  # fmt: skip
_NO_NAMES = STOPWORDS | _CALENDAR


def named_in(text: str, speakers: Iterable[str]) -> list[str]:
    """The ``speakers`` that ``text`` names, each as whole words in any case, longest first;
    a speaker called by a common word ("You", "me") is never read as named."""
    found = {
        speaker.strip()
        for speaker in speakers
        if speaker
        and speaker.strip()
        and speaker.strip().casefold() not in STOPWORDS
        and _name_pattern(speaker.strip()).search(text)
    }
    return _longest_first(found)


def _longest_first(names: Iterable[str]) -> list[str]:
    """Longer names first: "Mel" is left out of "Mel Smith" only after "Mel Smith" is."""
    return sorted(set(names), key=lambda name: (-len(name), name))


def unnamed_guess(text: str) -> str | None:
    """``text`` without the words that look like names (:func:`guessed_names`), as
    :func:`with_names_left_out` leaves it out where those are the speakers it names; None
    when no word looks like a name or nothing but names is left."""
    names = guessed_names(text)
    left = without_names(text, _longest_first(names)) if names else ""
    return left if re.search(r"\w", left) else None


def guessed_names(text: str) -> list[str]:
    """The words of ``text`` that look like a person's name: capitalised ("Melanie",
    "Melanie's"), not the first word of a sentence, not all capitals ("LGBTQ"), not a month
    or a day ("in June"), "I" or another stopword, outside quotes ("Becoming Nicole"), and
    alone: not next to another such word ("Grand Canyon", "Dr. Seuss")."""
    quoted = [found.span() for found in _QUOTED.finditer(text)]
    words = [
        (found.start(), found.end(), _POSSESSIVE.sub("", found.group()))
        for found in _CAPITALISED.finditer(text)
    ]
    words = [each for each in words if each[2].casefold() not in _NO_NAMES]
    names = [
        word
        for at, (start, end, word) in enumerate(words)
        if not word.isupper()
        and not _OPENS.search(text[:start])
        and not any(first < start < last for first, last in quoted)
        and not (at and _BETWEEN_A_RUN.fullmatch(text[words[at - 1][1] : start]))
        and not (at + 1 < len(words) and _BETWEEN_A_RUN.fullmatch(text[end : words[at + 1][0]]))
    ]
    return list(dict.fromkeys(names))


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` with each of ``names`` (and its possessive "'s") left out, spaces tidied:
    ``"What do Melanie's kids like?"`` -> ``"What do kids like?"``."""
    for name in names:
        text = _name_pattern(name).sub(" ", text)
    text = re.sub(r"\s+([?!.,;:])", r"\1", re.sub(r"\s+", " ", text))
    return text.strip()


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", re.IGNORECASE)


def with_names_left_out(
    source: RecallSource, question: Question, lines: InScope, weight: float
) -> InScope:
    """``lines`` (the question's cosines, with its parts') with each cosine moved ``weight``
    of the way toward its cosine with the question without the speakers it names (the module
    docstring); ``lines`` itself at ``weight`` 0, when the question names no speaker of its
    nearest lines, or when nothing but names is left. A line the second search did not read
    (a large shared scope's approximate index) keeps the question's cosine."""
    if not weight or not len(lines.ids):
        return lines
    nearest = np.argsort(-lines.scores, kind="stable")[:NAME_DEPTH]
    speakers = set(source.speakers(lines.ids[nearest].tolist()).values())
    names = named_in(question.text, (speaker for speaker in speakers if speaker))
    left = without_names(question.text, names) if names else ""
    if not re.search(r"\w", left):
        return lines
    return mixed_with_form(source, question, lines, left, weight, highest=False)

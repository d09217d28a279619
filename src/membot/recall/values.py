"""The values a line names: the words a second round of recall searches for
(:mod:`membot.recall.second_round`) and the words two lines that state a changed fact differ
in (:mod:`membot.recall.supersession`).

A value is a name -- a capitalised word not opening a sentence ("Sweden", "Denver", "Air
Fryer"), "I" aside -- or a number ("3", "14", "2022", "7/5"). English capitalisation only.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z][\w'-]*|\d+(?:[,.:/-]\d+)*")
_PRONOUN = re.compile(r"I(?:'\w+)?$")  # "I", "I'm", "I've"


def named_words(text: str) -> list[str]:
    """The capitalised words not opening a sentence (not "I"), and the numbers, of ``text``."""
    named = []
    opening = True
    for match in _TOKEN.finditer(text):
        word = match.group()
        if word[0].isdigit() or (word[0].isupper() and not opening and not _PRONOUN.match(word)):
            named.append(word)
        # the next word opens a sentence after ".", "!" or "?" (or a line's end)
        opening = text[match.end() :].lstrip()[:1] in ".!?"
    return named


def masked(text: str) -> str:
    """``text`` with its named words and numbers replaced by ``X``."""
    values = set(named_words(text))
    return _TOKEN.sub(lambda match: "X" if match.group() in values else match.group(), text)

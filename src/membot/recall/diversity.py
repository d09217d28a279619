"""Matches from more places: a match that repeats the thread or the stretch of lines of a match
already kept gives way to the next one from elsewhere (``blend``'s options, all off by default).

"What activities does Melanie partake in?" is answered by lines said in several sessions,
while the best matches of such a question may crowd into one stretch of one thread. Like
maximal marginal relevance, but on where a line was said rather than on its words, matches are
taken greedily, best first, and each one taken lowers the order of the matches left:

- ``thread_penalty``: by this much each of the same thread (the n-th match of a thread is
  ordered ``(n - 1) × thread_penalty`` lower than its own score);
- ``near_penalty``: by this much more each within ``near_lines`` lines of it, in its thread
  (those lines are mostly in its block already).

The lowered order is the one a benchmark places the match at, and its block's lines decay from
it, so a crowded match's block gives way too. A negative penalty draws the matches together
instead: a match near one taken is raised (then the matches are sorted by their orders again).

``many_only`` (1) spreads only the matches of a question that asks for many things
(:func:`asks_for_many`: "how many", "list", "what activities..."); ``many_decay`` multiplies
``neighbour_decay`` for such questions (1 leaves it as it is), so the blocks of their matches
give way to the next matches.

Measured on the benchmarks' folds and left off (docs/recall.md, "Matches from more sessions"):
spreading lowered both benchmarks; drawing together (``near_penalty`` -0.05) gained a little.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from membot.recall.lines import Hit

# The options, all off: each leaves the strategy's order and blocks as they are.
DIVERSITY: dict[str, float] = {
    "thread_penalty": 0.0,
    "near_penalty": 0.0,
    "near_lines": 3,
    "many_only": 0,
    "many_decay": 1.0,
}
WHOLE_NUMBERS = frozenset({"near_lines"})
SWITCHES = frozenset({"many_only"})

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
# Words that ask for a count or a list whatever follows them.
_MANY_PHRASES = ("how many", "list", "name all", "what all")
# Nouns whose singular asks for several things all the same ("what has she painted?" aside).
_MANY_NOUNS = frozenset(
    {"activities", "hobbies", "things", "ways", "kinds", "types", "sorts", "places", "events",
     "items", "names", "interests", "games", "books", "countries", "cities", "pets", "foods"}
)  # fmt: skip
_ASKING = frozenset({"what", "which"})
# Words between "what"/"which" and the noun they ask about ("what kinds of", "which two").
_BETWEEN = frozenset({"kind", "kinds", "type", "types", "sort", "sorts", "of", "are", "were",
                      "two", "three", "other", "different", "all", "some"})  # fmt: skip
# A plural noun asked about is followed by one of these ("What states has Maria visited?"); a
# verb is not ("What makes Jon a mentor?").
_AUXILIARIES = frozenset({"do", "does", "did", "has", "have", "had", "is", "are", "was", "were",
                          "can", "could", "would", "will", "might"})  # fmt: skip
# Words ending in "s" that are not plural nouns.
_NOT_PLURAL = frozenset(
    {"is", "was", "has", "does", "his", "hers", "its", "this", "thus", "us", "yes", "always",
     "perhaps", "news", "across", "unless", "whereas", "besides", "towards", "afterwards", "as"}
)  # fmt: skip


@dataclass(frozen=True)
class Spread:
    """How much a match is lowered for each better match taken from its thread, and for each
    within ``near_lines`` lines of it."""

    thread_penalty: float
    near_penalty: float
    near_lines: int

    @property
    def is_off(self) -> bool:
        return not self.thread_penalty and not self.near_penalty


def spread_for(option: Mapping[str, float], question: str) -> Spread:
    """The spread ``option`` asks for ``question``: off where ``many_only`` is on and the
    question does not ask for many things."""
    if option["many_only"] and not asks_for_many(question):
        return Spread(0.0, 0.0, 0)
    return Spread(option["thread_penalty"], option["near_penalty"], int(option["near_lines"]))


def block_decay(option: Mapping[str, float], question: str) -> float:
    """``neighbour_decay``, times ``many_decay`` for a question that asks for many things."""
    decay = option["neighbour_decay"]
    if option["many_decay"] != 1 and asks_for_many(question):
        return decay * option["many_decay"]
    return decay


def spread_out(ordered: Sequence[tuple[Hit, float]], spread: Spread) -> list[tuple[Hit, float]]:
    """``ordered`` (matches best first, each with its order) taken greedily by their order
    lowered for the matches taken before them (see the module docstring), each with the
    order it was taken at; as it is when ``spread`` is off. Ties keep the strategy's order."""
    if spread.is_off or len(ordered) < 2:
        return list(ordered)
    left = [hit for hit, _ in ordered]
    scores = [order for _, order in ordered]
    taken: list[tuple[Hit, float]] = []
    while left:
        best = max(range(len(left)), key=scores.__getitem__)  # the first of equals
        hit, score = left.pop(best), scores.pop(best)
        taken.append((hit, score))
        for index, other in enumerate(left):
            if other.thread_id == hit.thread_id:
                scores[index] -= spread.thread_penalty
                if abs(other.seq - hit.seq) <= spread.near_lines:
                    scores[index] -= spread.near_penalty
    # A negative penalty raises the matches left, which may pass those taken before them.
    taken.sort(key=lambda pair: -pair[1])
    return taken


def asks_for_many(question: str) -> bool:
    """Whether ``question`` asks for several things rather than one: a count or a list ("how
    many", "list"), a noun such as "activities" or "hobbies", or "what"/"which" asking about a
    plural noun followed by its verb ("What states has Maria vacationed at?", "Which kinds of
    books do..."; not "What makes Jon..."). English words only."""
    text = question.casefold()
    words = _WORD.findall(text)
    padded = " " + " ".join(words) + " "
    if any(f" {phrase} " in padded for phrase in _MANY_PHRASES):
        return True
    if _MANY_NOUNS & set(words):
        return True
    for at, word in enumerate(words):
        if word not in _ASKING:
            continue
        start = at + 1
        while start < len(words) and words[start] in _BETWEEN:
            start += 1
        # the noun, after up to two words that describe it ("What European countries has...")
        for noun in range(start, min(start + 3, len(words) - 1)):
            if _is_plural(words[noun]) and words[noun + 1] in _AUXILIARIES:
                return True
    return False


def _is_plural(word: str) -> bool:
    """A plural noun by its ending, roughly: "states", "pets'", "hobbies"; not "is", "has",
    "class", "bus"."""
    word = word.removesuffix("'s").rstrip("'")
    if word in _NOT_PLURAL or len(word) < 4:
        return False
    return word.endswith("s") and not word.endswith(("ss", "us", "is", "'s"))

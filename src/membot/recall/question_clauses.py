"""A question that names two things, searched one thing at a time.

"Which event happened first, my attendance at a cultural festival or the start of my Spanish
classes?" is answered by two lines, one about the festival and one about the classes. The
question's one vector sits between them and ranks neither first. :func:`clauses` cuts a
question at its commas, semicolons and colons, at "or", and at "between" and the "and" after it
("between the concert and the trip"). Where two or more pieces hold at least
:data:`LEAST_WORDS` content words, each (the :data:`MOST_CLAUSES` with most words at most) is
embedded with the question and scored over the scope, and each line's cosine (and its best
part's) moves ``clause_weight`` of the way toward its cosine with each piece in turn, never
lowered (:func:`with_clauses`). One more dense scan per piece for a question that cuts; none
for any other.

Chosen with the folds (docs/recall.md, "A question that names two things"): cutting also at
every "and", "before", "after", "than" and "compared to" cuts noun phrases ("black and
white") and bought nothing; leaving out the question's own frame ("Which came first") did
worse than searching it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from membot.recall.bm25 import STOPWORDS
from membot.recall.question_forms import is_question, mixed_with_form

if TYPE_CHECKING:
    from membot.index.scope import InScope
    from membot.recall.source import RecallSource
    from membot.recall.strategies import Question

CLAUSES: dict[str, float] = {"clause_weight": 0.5}
LEAST_WORDS = 2  # content words a piece holds to be searched on its own
MOST_CLAUSES = 4  # pieces searched at most (those with most content words)
_CUT = re.compile(r"[,;]\s*|:\s+|\s+(?:or|between)\s+", re.IGNORECASE)
_BETWEEN_AND = re.compile(r"(\bbetween\s+.+?)\s+and\s+", re.IGNORECASE)
_WORD = re.compile(r"[\w'’-]+")


def clauses(line: str) -> list[str]:
    """The pieces of the question ``line`` searched on their own (the module docstring), in
    the question's order; empty when it is no question or fewer than two pieces hold enough
    words."""
    if not is_question(line):
        return []
    text = _BETWEEN_AND.sub(r"\1, ", line.strip().rstrip("?!. "))
    pieces = [piece.strip() for piece in _CUT.split(text) if piece and piece.strip()]
    kept = [piece for piece in pieces if _content_words(piece) >= LEAST_WORDS]
    if len(kept) < 2:
        return []
    # Those with most words; of equal ones the later (the things named follow the question's
    # frame: "Which did I buy first: the kayak, the stove, ...").
    by_words = sorted(range(len(kept)), key=lambda at: (-_content_words(kept[at]), -at))
    return [kept[at] for at in sorted(by_words[:MOST_CLAUSES])]


def _content_words(text: str) -> int:
    return sum(word.casefold() not in STOPWORDS for word in _WORD.findall(text))


def with_clauses(
    source: RecallSource, question: Question, lines: InScope, weight: float
) -> InScope:
    """``lines`` with each cosine moved ``weight`` of the way toward its cosine with each
    piece of the question in turn (:func:`clauses`), never lowered; ``lines`` itself at
    ``weight`` 0 or for a question that does not cut."""
    if not weight:
        return lines
    for piece in clauses(question.line):
        lines = mixed_with_form(source, question, lines, piece, weight, highest=True)
    return lines

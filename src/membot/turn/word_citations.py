"""The memories a reply drew on, found by its words, for a model that cannot cite them.

A model held to the reply's JSON names the hints it used (``citation_ids``). The bundled
SmolLM2 cannot keep to JSON, and the small prompt asks for a sentence, not ids, so its turns
cited nothing and the inspector said only why. A reply's words still tell where it came from:
a hint is cited when the reply uses words of it that the question did not bring (names of the
bot and the person aside), at least two of them, or all of them when the reply has fewer
("Grilled sardines."). "Miso loves tuna." cites the memory where Sam said his cat loves
tuna; "My sister is a doctor." cites nothing when the memory says "dentist". Such a citation
says the reply used the memory's words, not that it read them right; the turn's notes say how
its citations were found.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from membot.turn.context import Hint
from membot.turn.small_prompt import content_words, shown_lines

FOUND_BY_WORDS_NOTE = "citations found by the reply's words: the model cannot cite"


def cited_by_words(
    reply: str, question: str, hints: Sequence[Hint], names: Iterable[str], *, small: bool
) -> list[str]:
    """The ids of ``hints`` the reply drew words from, most shared words first (ties in the
    prompt's order). ``names``: the bot's and the person's, never evidence; ``small``: the
    prompt showed a block's people's lines only (:func:`shown_lines`)."""
    ignored = content_words(question) | {w for name in names for w in content_words(name)}
    own = content_words(reply) - ignored
    if not own:
        return []
    shared = {hint.id: len(own & content_words(_shown_text(hint, small))) for hint in hints}
    needed = min(2, len(own))
    cited = [hint.id for hint in hints if shared[hint.id] >= needed]
    return sorted(cited, key=lambda hint_id: -shared[hint_id])


def _shown_text(hint: Hint, small: bool) -> str:
    """What the model was shown of a hint: a block's lines (its people's, in the small
    prompt), else the hint's text."""
    if hint.block is None:
        return hint.text
    lines = shown_lines(hint.block.lines) if small else hint.block.lines
    return "\n".join(line.text for line in lines)

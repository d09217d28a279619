"""Test helpers for the small prompt: a scripted model that needs it, and a recalled block as
a hint. Imported by name (``from small_model import ...``), as ``export_files`` is: a
``conftest`` import would find tests/server's conftest first when the whole suite runs."""

from __future__ import annotations

from datetime import UTC, datetime

from membot import ScriptedLLM
from membot.model import Block, Line, Role
from membot.turn.context import Hint


class SmallLLM(ScriptedLLM):
    """A scripted model that says, as the bundled SmolLM2 does, it can neither read a long
    prompt nor keep to JSON: it gets the small prompt, and cites nothing itself."""

    name = "small"
    writes_json = False
    reads_long_prompts = False


def block_hint(hint_id: str, score: float, said: list[tuple[str, str]], matched: int) -> Hint:
    """A recalled block of ``said`` (speaker, text) lines of 8 May 2023, its line ``matched``
    the match; a line of speaker "AI" is the bot's (role bot, no speaker). Its text is the
    lines' text, one a line."""
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    lines = tuple(
        Line(id=index, bot="AI", person="caroline", thread=hint_id, seq=index,
             role=Role.BOT if speaker == "AI" else Role.HUMAN, text=text, created_at=when,
             tokens=len(text.split()), speaker=None if speaker == "AI" else speaker)
        for index, (speaker, text) in enumerate(said)
    )  # fmt: skip
    block = Block(hint_id, "caroline", lines, score, matched_seqs=(matched,))
    text = "\n".join(text for _, text in said)
    return Hint(hint_id, "history", "lines", text, score, block=block)

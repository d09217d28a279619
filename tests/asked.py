"""A line asked of a memory as blend's features take it: the default bot's scope over every
person's lines, embedded on its own, no moment of asking. Imported by name (``from asked import
asked``), as ``small_model`` is."""

from __future__ import annotations

from membot import Memory
from membot.index.vectors import Scope
from membot.recall.strategies import Question


def asked(memory: Memory, line: str) -> Question:
    scope = Scope.of(memory.store.bot_id("membot") or 0, None)
    return Question(line, memory.recall_source.embed([line])[0], scope, None, line)

"""A scripted LLM for deterministic tests: replies are queued, calls are recorded.

With a ``path`` the queue lives in a JSON file (a list of strings), so separate processes —
``membot say`` run several times by a test — take replies from one script. A reply that
starts with ``!error`` makes the call fail with ``ProviderError``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from membot.errors import ProviderError
from membot.llm.base import Message

DEFAULT_REPLY = "(scripted reply)"


class ScriptedLLM:
    name = "scripted"

    def __init__(self, replies: Sequence[str] = (), path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self._queue = list(replies)
        self.history: list[list[Message]] = []
        self.json_modes: list[bool] = []  # whether each call asked for JSON

    def enqueue(self, *replies: str) -> None:
        self._queue.extend(replies)

    def _next(self) -> str:
        if self.path is None:
            return self._queue.pop(0) if self._queue else DEFAULT_REPLY
        queue = json.loads(self.path.read_text()) if self.path.exists() else []
        reply = queue.pop(0) if queue else DEFAULT_REPLY
        self.path.write_text(json.dumps(queue))
        return reply

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, json_mode: bool = False
    ) -> str:
        self.history.append([dict(message) for message in messages])
        self.json_modes.append(json_mode)
        reply = self._next()
        if reply.startswith("!error"):
            raise ProviderError(reply.removeprefix("!error").strip() or "scripted failure")
        return reply

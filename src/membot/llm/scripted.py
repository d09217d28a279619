"""A scripted LLM for deterministic tests: replies are queued, calls are recorded.

Every call takes the next reply, whatever asked: a turn, and also a relevance check, the
running summary (when lines scroll out of a long thread's feed) and the key points at a
thread's end. Queue a reply for each, or look at ``history`` to see what took which.

With a ``path`` the queue lives in a JSON file (a list of strings), so separate processes —
``membot say`` run several times by a test — take replies from one script. A reply that
starts with ``!error`` makes the call fail with ``ProviderError``; when streamed, a reply with
``!error`` further on yields the text before it, then fails (a connection lost mid-reply).

Calls are recorded (``history``, ``schemas``, ``streamed``) for a test to look at, unless
``record`` is false: ``--llm script:`` (a server under load in the benchmarks) records none,
since a process answering for hours would keep every prompt it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from membot.errors import ProviderError
from membot.llm.base import JsonSchema, Message

DEFAULT_REPLY = "(scripted reply)"
ERROR = "!error"


class ScriptedLLM:
    name = "scripted"

    def __init__(
        self,
        replies: Sequence[str] = (),
        path: str | Path | None = None,
        piece_size: int = 7,
        *,
        record: bool = True,
    ) -> None:
        self.path = Path(path) if path else None
        self.record = record
        self._queue = list(replies)
        self.piece_size = piece_size  # characters per streamed piece
        self.history: list[list[Message]] = []
        self.schemas: list[JsonSchema | None] = []  # the schema each call asked for
        self.streamed: list[bool] = []  # whether each call was a stream

    @property
    def json_modes(self) -> list[bool]:
        """Whether each call asked for JSON."""
        return [schema is not None for schema in self.schemas]

    def enqueue(self, *replies: str) -> None:
        self._queue.extend(replies)

    def _next(self) -> str:
        if self.path is None:
            return self._queue.pop(0) if self._queue else DEFAULT_REPLY
        queue = json.loads(self.path.read_text()) if self.path.exists() else []
        reply = queue.pop(0) if queue else DEFAULT_REPLY
        self.path.write_text(json.dumps(queue))
        return reply

    def _record(self, messages: Sequence[Message], schema: JsonSchema | None, stream: bool) -> None:
        if not self.record:
            return
        self.history.append([dict(message) for message in messages])
        self.schemas.append(schema)
        self.streamed.append(stream)

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> str:
        self._record(messages, schema, stream=False)
        reply = self._next()
        if reply.startswith(ERROR):
            raise ProviderError(reply.removeprefix(ERROR).strip() or "scripted failure")
        return reply

    def stream(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> Iterator[str]:
        """The scripted reply in pieces of ``piece_size`` characters."""
        self._record(messages, schema, stream=True)
        return self._pieces(self._next())

    def _pieces(self, reply: str) -> Iterator[str]:
        text, marker, failure = reply.partition(ERROR)
        for start in range(0, len(text), self.piece_size):
            yield text[start : start + self.piece_size]
        if marker:
            raise ProviderError(failure.strip() or "scripted failure")

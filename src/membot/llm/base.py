"""The ``LLM`` protocol: chat messages in, reply text out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

Message = dict[str, str]


@runtime_checkable
class LLM(Protocol):
    name: str

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, json_mode: bool = False
    ) -> str:
        """The model's reply; raises ``ProviderError`` when the model cannot answer.

        ``json_mode`` asks for a JSON object where the model or endpoint can be held to it
        (OpenAI's ``response_format``, llama.cpp's JSON grammar); the caller still parses
        the reply defensively."""
        ...

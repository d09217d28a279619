"""The ``LLM`` protocol: chat messages in, reply text out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

Message = dict[str, str]


@runtime_checkable
class LLM(Protocol):
    name: str

    def complete(self, messages: Sequence[Message], max_tokens: int) -> str:
        """The model's reply; raises ``ProviderError`` when the model cannot answer."""
        ...

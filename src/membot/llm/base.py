"""The ``LLM`` protocol: chat messages in, reply text out, whole or as it is written."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]
JsonSchema = dict[str, Any]


@runtime_checkable
class LLM(Protocol):
    name: str

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> str:
        """The model's reply; raises ``ProviderError`` when the model cannot answer.

        ``schema`` (a JSON schema) asks for a JSON object in that shape, held to it by
        constrained decoding where the model or endpoint allows (an OpenAI ``json_schema``
        response format, a llama.cpp grammar); an endpoint that refuses gets a weaker request,
        so the caller still reads the reply defensively."""
        ...

    def stream(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> Iterator[str]:
        """The same reply as :meth:`complete`, in pieces as the model writes them; raises
        ``ProviderError`` when the call fails, before the first piece or between two."""
        ...

"""The ``LLM`` protocol: chat messages in, reply text out, whole or as it is written."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]
JsonSchema = dict[str, Any]


@runtime_checkable
class LLM(Protocol):
    """What membot asks of a model. Any class with these members will do: membot calls
    :meth:`complete` or :meth:`stream` for a reply, and for the running summary, key points
    and checks at the end of a thread. A failure to answer (the endpoint down, a timeout, a
    bad key) is ``ProviderError``: a turn then reports it in ``Turn.error`` with the
    person's line kept. Any other exception is taken for a bug and the turn raises
    ``TurnFailedError``.

    Optional attributes, each read with ``getattr`` and ``True`` when absent, say what a
    model cannot do well (the bundled SmolLM2 sets all four false):

    - ``writes_json``: it keeps to a JSON schema; if false, a bot with citations answers in
      plain text, without them;
    - ``writes_summaries``: it summarises faithfully; if false, the running summary and the
      key points kept at the end of a thread are the person's own lines instead;
    - ``checks_remember_policy``: it can judge notes against a bot's remember-policy; if
      false, a bot with a policy keeps nothing (the check fails closed);
    - ``reads_long_prompts``: it finds a fact in a long prompt; if false, a bot whose
      ``prompt_style`` is ``auto`` gets a short prompt (``membot.turn.small_prompt``).
    """

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

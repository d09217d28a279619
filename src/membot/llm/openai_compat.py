"""Any OpenAI-compatible chat endpoint: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from membot.errors import ProviderError
from membot.llm.base import JsonSchema, Message
from membot.openai_client import key_env_for, openai_client, public_url

log = logging.getLogger(__name__)

# The ways to ask for JSON, strongest first: constrained to the schema (OpenAI, vLLM,
# llama.cpp's server, Ollama), any JSON object, or only in the prompt's words.
JSON_REQUESTS = ("json_schema", "json_object", "text")


class OpenAICompatibleLLM:
    """Chat completions through the official ``openai`` client, chosen by model and base_url.

    The API key is read from the environment variable named ``api_key_env`` (never stored).
    A schema is sent as a ``json_schema`` response format; an endpoint that answers 400 to
    it is asked with ``json_object``, then in words only, and the weaker request that worked
    is kept in :attr:`json_request` for this object's later calls.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 1,
        temperature: float = 0.7,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = key_env_for(base_url, api_key_env)
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.name = f"openai:{model}@{public_url(base_url)}"
        self._client = None
        self.json_request = JSON_REQUESTS[0]  # lowered when the endpoint refuses it

    def _client_or_new(self):
        if self._client is None:
            self._client = openai_client(
                self.base_url, self.api_key_env, self.timeout, self.max_retries,
                missing_key=(
                    f"set {self.api_key_env} to your API key, or give a local server with "
                    "--llm openai:MODEL@http://localhost:11434/v1"
                ),
            )  # fmt: skip
        return self._client

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> str:
        with self._provider_errors():
            response = self._create(messages, max_tokens, schema, stream=False)
        if not response.choices:
            raise ProviderError(f"{self.name} returned no reply")
        return (response.choices[0].message.content or "").strip()

    def stream(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> Iterator[str]:
        replying = False
        try:
            with (
                self._provider_errors(),
                self._create(messages, max_tokens, schema, True) as chunks,
            ):
                for chunk in chunks:
                    text = chunk.choices[0].delta.content if chunk.choices else None
                    if text:
                        replying = True
                        yield text
        except ProviderError as error:
            if not replying:
                raise
            # "cannot reach" would mislead: it answered, then the connection broke.
            raise ProviderError(f"{self.name} broke off its reply: {error.__cause__}") from error

    def _create(self, messages, max_tokens: int, schema: JsonSchema | None, stream: bool):
        """The endpoint's answer, asking for JSON as strongly as it accepts."""
        from openai import BadRequestError

        request: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": self.temperature,
        }
        if stream:
            request["stream"] = True
        create = self._client_or_new().chat.completions.create
        if schema is None:
            return create(**request)
        weaker = JSON_REQUESTS[JSON_REQUESTS.index(self.json_request) :]
        for way in weaker:
            try:
                answer = create(**request, **_json_request(way, schema))
            except BadRequestError:
                if way == weaker[-1]:
                    raise  # refused even in words: the request itself is wrong
                log.info("%s refused a %s response format; trying the next", self.name, way)
                continue
            # Kept only once a weaker way worked: a 400 for another reason changes nothing.
            self.json_request = way
            return answer
        raise AssertionError("unreachable: the last way re-raises")

    @contextmanager
    def _provider_errors(self) -> Iterator[None]:
        """The client's errors as ``ProviderError`` saying what to do."""
        import httpx
        from openai import APIConnectionError, APITimeoutError, AuthenticationError, OpenAIError

        try:
            yield
        except AuthenticationError as error:
            raise ProviderError(
                f"{self.name} refused the key in {self.api_key_env}: check it"
            ) from error
        except APITimeoutError as error:
            raise ProviderError(
                f"{self.name} did not answer within {self.timeout:.0f} s"
            ) from error
        except APIConnectionError as error:
            raise ProviderError(f"cannot reach {self.name}: is the server running?") from error
        except OpenAIError as error:
            raise ProviderError(f"{self.name} failed: {error}") from error
        except httpx.HTTPError as error:  # should the client let a broken stream's error through
            raise ProviderError(f"{self.name} failed: {error!r}") from error


def _json_request(way: str, schema: JsonSchema) -> dict[str, Any]:
    if way == "json_schema":
        named = {"name": schema.get("title", "answer"), "schema": schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": named}}
    if way == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}

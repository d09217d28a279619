"""Any OpenAI-compatible chat endpoint: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from membot.errors import ProviderError
from membot.llm.base import JsonSchema, Message
from membot.openai_client import key_env_for, openai_client, public_url

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

# The ways to ask for JSON, strongest first: constrained to the schema (OpenAI, vLLM,
# llama.cpp's server, Ollama), any JSON object, or only in the prompt's words.
JSON_REQUESTS = ("json_schema", "json_object", "text")
# Waits between tries: 0.5 s, 1 s, 2 s, ... at most 8 s, or what a 429's Retry-After asks.
FIRST_WAIT_SECONDS = 0.5
LONGEST_WAIT_SECONDS = 8.0


class OpenAICompatibleLLM:
    """Chat completions through the official ``openai`` client, chosen by model and base_url.

    The API key is read from the environment variable named ``api_key_env`` (never stored).
    A schema is sent as a ``json_schema`` response format; an endpoint that answers 400 to
    it is asked with ``json_object``, then in words only, and the weaker request that worked
    is kept in :attr:`json_request` for this object's later calls.

    An endpoint that cannot be reached, times out, or answers 429 or 5xx is tried again, at
    most ``max_retries`` times, waiting longer each time, and never past ``deadline`` seconds
    from the first try: then the call fails with a ``ProviderError`` that says what happened.
    A turn's person is waiting, so the whole call is bounded, not only each try. The
    ``openai`` client's own retries are off (its default of 2, with Retry-After waits of up to
    60 s each, has no overall bound).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.7,
        deadline: float = 90.0,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = key_env_for(base_url, api_key_env)
        self.timeout = timeout  # for one try
        self.max_retries = max_retries
        self.deadline = deadline  # for the whole call, tries and waits together
        self.temperature = temperature
        self.name = f"openai:{model}@{public_url(base_url)}"
        self._client: OpenAI | None = None
        self.json_request = JSON_REQUESTS[0]  # lowered when the endpoint refuses it

    def _client_or_new(self) -> OpenAI:
        if self._client is None:
            self._client = openai_client(
                self.base_url, self.api_key_env, self.timeout, max_retries=0,
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

    def _create(
        self, messages: Sequence[Message], max_tokens: int, schema: JsonSchema | None, stream: bool
    ) -> Any:
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
        client = self._client_or_new()

        def create(**request: Any) -> Any:
            def one_try(timeout: float) -> Any:
                return client.chat.completions.create(**request, timeout=timeout)

            return self._retrying(one_try)

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

    def _retrying(self, call: Callable[[float], Any]) -> Any:
        """``call(timeout)`` tried again after a transient failure, within the bounds the
        class docstring gives; the last failure is raised as a ``ProviderError``."""
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            left = self.deadline - (time.monotonic() - started)
            try:
                return call(max(0.01, min(self.timeout, left)))
            except Exception as error:
                if not _transient(error):
                    raise
                wait = _wait_before_try(error, tries)
                spent = time.monotonic() - started
                if tries > self.max_retries or spent + wait >= self.deadline:
                    tried = f"{tries} {'try' if tries == 1 else 'tries'} in {spent:.1f} s"
                    raise ProviderError(f"{self._problem(error)} ({tried})") from error
                log.info("%s: %s; trying again in %.1f s", self.name, error, wait)
                time.sleep(wait)

    def _problem(self, error: Exception) -> str:
        """What went wrong, for the person: what to check, never a key."""
        from openai import APIConnectionError, APIStatusError, APITimeoutError

        if isinstance(error, APITimeoutError):
            return f"{self.name} did not answer within {self.timeout:.0f} s"
        if isinstance(error, APIConnectionError):
            return f"cannot reach {self.name}: is the server running?"
        if isinstance(error, APIStatusError) and error.status_code == 429:
            return f"{self.name} is rate limiting membot (429): wait, or raise its limit"
        if isinstance(error, APIStatusError) and error.status_code >= 500:
            return f"{self.name} failed with status {error.status_code}"
        return f"{self.name} failed: {error}"  # a 4xx's own words say what to change

    @contextmanager
    def _provider_errors(self) -> Iterator[None]:
        """The client's errors as ``ProviderError`` saying what to do."""
        import httpx
        from openai import APIResponseValidationError, AuthenticationError, OpenAIError

        try:
            yield
        except AuthenticationError as error:
            raise ProviderError(
                f"{self.name} refused the key in {self.api_key_env}: check it"
            ) from error
        except (APIResponseValidationError, ValueError) as error:  # ValueError: not JSON
            raise ProviderError(
                f"{self.name} answered something that is not a chat completion: {error}"
            ) from error
        except OpenAIError as error:
            raise ProviderError(self._problem(error)) from error
        except httpx.HTTPError as error:  # should the client let a broken stream's error through
            raise ProviderError(f"{self.name} failed: {error!r}") from error


def _transient(error: Exception) -> bool:
    """Whether trying again may help: no answer, too many requests, or the server's fault."""
    from openai import APIConnectionError, APIStatusError

    if isinstance(error, APIConnectionError):  # refused, reset, timed out
        return True
    return isinstance(error, APIStatusError) and (
        error.status_code in (408, 409, 429) or error.status_code >= 500
    )


def _wait_before_try(error: Exception, tries: int) -> float:
    """Seconds to wait before the next try: what a Retry-After header asks (in seconds),
    else a doubling wait."""
    response = getattr(error, "response", None)
    asked = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(asked)) if asked is not None else _doubling(tries)
    except ValueError:  # an HTTP date: not worth parsing, the doubling wait is close enough
        return _doubling(tries)


def _doubling(tries: int) -> float:
    return min(LONGEST_WAIT_SECONDS, FIRST_WAIT_SECONDS * 2.0 ** (tries - 1))


def _json_request(way: str, schema: JsonSchema) -> dict[str, Any]:
    if way == "json_schema":
        named = {"name": schema.get("title", "answer"), "schema": schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": named}}
    if way == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}

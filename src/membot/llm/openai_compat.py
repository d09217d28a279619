"""Any OpenAI-compatible chat endpoint: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio."""

from __future__ import annotations

from collections.abc import Sequence

from membot.errors import ProviderError
from membot.llm.base import Message
from membot.openai_client import key_env_for, openai_client, public_url


class OpenAICompatibleLLM:
    """Chat completions through the official ``openai`` client, chosen by model and base_url.

    The API key is read from the environment variable named ``api_key_env`` (never stored).
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
        self.json_mode_works = True  # cleared when the endpoint refuses response_format

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
        self, messages: Sequence[Message], max_tokens: int, *, json_mode: bool = False
    ) -> str:
        from openai import (
            APIConnectionError,
            APITimeoutError,
            AuthenticationError,
            BadRequestError,
            OpenAIError,
        )

        client = self._client_or_new()
        request = {
            "model": self.model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": self.temperature,
        }
        try:
            if json_mode and self.json_mode_works:
                try:
                    response = client.chat.completions.create(
                        **request, response_format={"type": "json_object"}
                    )
                except BadRequestError:
                    # Many local servers know no JSON mode: ask in words only from now on.
                    self.json_mode_works = False
                    response = client.chat.completions.create(**request)
            else:
                response = client.chat.completions.create(**request)
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
        if not response.choices:
            raise ProviderError(f"{self.name} returned no reply")
        return (response.choices[0].message.content or "").strip()

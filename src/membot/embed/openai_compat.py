"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, TEI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from membot.embed.base import normalize
from membot.errors import ProviderError
from membot.openai_client import key_env_for, openai_client, public_url

if TYPE_CHECKING:
    from openai import OpenAI


class OpenAICompatibleEmbedder:
    """Calls ``/v1/embeddings`` through the official ``openai`` client with a ``base_url``."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = key_env_for(base_url, api_key_env)
        self.batch_size = batch_size
        self.timeout = timeout
        self.name = f"openai:{model}@{public_url(base_url)}"
        self._client: OpenAI | None = None
        self._dimension: int | None = None

    def _client_or_new(self) -> OpenAI:
        if self._client is None:
            self._client = openai_client(
                self.base_url, self.api_key_env, self.timeout, max_retries=1,
                missing_key=f"set {self.api_key_env} to the API key of the embedding endpoint",
            )  # fmt: skip
        return self._client

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = int(self.embed(["dimension probe"]).shape[1])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from openai import OpenAIError

        client = self._client_or_new()
        batches = []
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start : start + self.batch_size])
            try:
                response = client.embeddings.create(model=self.model, input=chunk)
            except OpenAIError as error:
                raise ProviderError(f"embedding endpoint {self.name} failed: {error}") from error
            ordered = sorted(response.data, key=lambda item: item.index)
            batches.append(np.asarray([item.embedding for item in ordered], dtype=np.float32))
        if not batches:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        vectors = normalize(np.vstack(batches))
        self._dimension = vectors.shape[1]
        return vectors

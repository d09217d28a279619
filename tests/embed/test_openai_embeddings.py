"""OpenAICompatibleEmbedder against a real local HTTP server, and against a closed port."""

from __future__ import annotations

import numpy as np
import pytest

from membot import ConfigError, ProviderError, resolve_embedder
from membot.embed import OpenAICompatibleEmbedder

CLOSED_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


def test_embeddings_come_back_in_order_and_unit_length(openai_server) -> None:
    embedder = OpenAICompatibleEmbedder("nomic", openai_server.base_url, batch_size=2)
    vectors = embedder.embed(["a", "b", "c"])

    assert [body["input"] for _, body, _ in openai_server.requests] == [["a", "b"], ["c"]]
    assert openai_server.requests[0][0] == "/v1/embeddings"
    assert vectors.shape == (3, 3) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    # The server answered in reverse; row 1 must still be the vector of "b" ([3, 4, 1]).
    np.testing.assert_allclose(vectors[1], np.array([3, 4, 1]) / np.sqrt(26), rtol=1e-6)
    assert embedder.dimension == 3
    assert embedder.name == f"openai:nomic@{openai_server.base_url}"


def test_the_key_is_read_from_the_named_variable(openai_server, monkeypatch) -> None:
    monkeypatch.setenv("MY_EMBED_KEY", "sk-test-123")
    resolve_embedder(f"openai:nomic@{openai_server.base_url}", key_env="MY_EMBED_KEY").embed(["x"])
    assert openai_server.requests[0][2] == "Bearer sk-test-123"


def test_an_unreachable_endpoint_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="embedding endpoint openai:nomic"):
        OpenAICompatibleEmbedder("nomic", CLOSED_URL).embed(["hello"])


def test_an_error_status_is_a_provider_error(openai_server) -> None:
    openai_server.status = 500
    with pytest.raises(ProviderError):
        OpenAICompatibleEmbedder("nomic", openai_server.base_url).embed(["hello"])


def test_the_public_endpoint_needs_a_key() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAICompatibleEmbedder("text-embedding-3-small").embed(["hello"])

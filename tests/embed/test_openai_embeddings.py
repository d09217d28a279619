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


def test_the_command_line_and_the_server_name_the_embedder_s_key(
    openai_server, monkeypatch, cli
) -> None:
    """``--embedder-key-env`` (``MEMBOT_EMBEDDER_KEY_ENV`` for a server's workers) names the
    variable an ``openai:`` embedder at another address reads its key from."""
    from membot.server.app import app_from_environment

    monkeypatch.setenv("MY_EMBED_KEY", "sk-cli-456")
    spec = f"openai:nomic@{openai_server.base_url}"
    cli.ok("--embedder", spec, "--embedder-key-env", "MY_EMBED_KEY", "say", "hello there",
           "--user", "u", "--thread", "t", "--dry-run")  # fmt: skip
    assert openai_server.requests and {r[2] for r in openai_server.requests} == {
        "Bearer sk-cli-456"
    }
    openai_server.requests.clear()
    monkeypatch.setenv("MEMBOT_DB", str(cli.db))
    monkeypatch.setenv("MEMBOT_EMBEDDER", spec)
    monkeypatch.setenv("MEMBOT_EMBEDDER_KEY_ENV", "MY_EMBED_KEY")
    memory = app_from_environment().state.service.memory
    try:
        memory.embedder.embed(["a line not embedded before"])
    finally:
        memory.close()
    assert openai_server.requests[-1][2] == "Bearer sk-cli-456"

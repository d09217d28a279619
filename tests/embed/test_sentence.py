"""The bundled all-MiniLM-L6-v2 through sentence-transformers, loaded from disk only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membot import ConfigError, Embedder, ProviderError, resolve_embedder
from membot.embed import SentenceTransformerEmbedder
from membot.embed.sentence import BUNDLED_NAME, bundled_minilm_path


@pytest.mark.slow
def test_minilm_gives_unit_vectors_that_rank_by_meaning(minilm) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.name == BUNDLED_NAME
    assert minilm.dimension == 384
    vectors = minilm.embed(
        ["I work in logistics.", "My job is in shipping and freight.", "I like strawberries."]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    scores = vectors @ vectors[0]
    assert scores[1] > scores[2] + 0.2
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_embedders_of_one_model_share_the_loaded_weights(minilm) -> None:
    second = resolve_embedder("minilm")
    np.testing.assert_allclose(second.embed(["same"]), minilm.embed(["same"]), atol=1e-6)
    assert second._load() is minilm._load()


def test_the_bundled_model_ships_with_the_package() -> None:
    assert (bundled_minilm_path() / "config.json").exists()


def test_a_model_that_is_not_on_disk_is_a_provider_error(tmp_path: Path) -> None:
    missing = SentenceTransformerEmbedder(tmp_path / "no-such-model")
    with pytest.raises(ProviderError, match="cannot load the sentence-transformers model"):
        missing.embed(["hello"])


@pytest.mark.parametrize("spec", ["", "word2vec", "openai:", "openai:@http://x"])
def test_unknown_embedder_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        resolve_embedder(spec)

"""Local embedders through sentence-transformers (``st:NAME``, the ``st`` extra)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from membot import ConfigError, Embedder, ProviderError, resolve_embedder
from membot.embed import SentenceTransformerEmbedder, bundled_minilm
from membot.embed.sentence import BUNDLED_NAME, bundled_minilm_path


@pytest.fixture(scope="module")
def st_minilm() -> SentenceTransformerEmbedder:
    pytest.importorskip("sentence_transformers", reason="st: embedders need membot[st]")
    model = bundled_minilm()
    model.embed(["warm up"])
    return model


@pytest.mark.slow
def test_minilm_gives_unit_vectors_that_rank_by_meaning(st_minilm) -> None:
    assert isinstance(st_minilm, Embedder)
    assert st_minilm.name == BUNDLED_NAME
    assert st_minilm.dimension == 384
    vectors = st_minilm.embed(
        ["I work in logistics.", "My job is in shipping and freight.", "I like strawberries."]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    scores = vectors @ vectors[0]
    assert scores[1] > scores[2] + 0.2
    assert st_minilm.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_embedders_of_one_model_share_the_loaded_weights(st_minilm) -> None:
    second = resolve_embedder(f"st:{bundled_minilm_path()}")
    assert isinstance(second, SentenceTransformerEmbedder)
    np.testing.assert_allclose(second.embed(["same"]), st_minilm.embed(["same"]), atol=1e-6)
    assert second._load() is st_minilm._load()


def test_the_bundled_model_ships_with_the_package() -> None:
    assert (bundled_minilm_path() / "config.json").exists()


def test_a_model_that_is_not_on_disk_is_a_provider_error(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="st: embedders need membot[st]")
    missing = SentenceTransformerEmbedder(tmp_path / "no-such-model")
    with pytest.raises(ProviderError, match="cannot load the sentence-transformers model"):
        missing.embed(["hello"])


@pytest.mark.parametrize("spec", ["", "word2vec", "openai:", "openai:@http://x"])
def test_unknown_embedder_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        resolve_embedder(spec)


def test_without_sentence_transformers_an_st_embedder_names_the_extra(monkeypatch) -> None:
    """``pip install membot`` has no torch: an ``st:`` embedder says how to get it, at the
    first line it embeds, and the default embedder is untouched."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    embedder = resolve_embedder("st:all-mpnet-base-v2")
    with pytest.raises(ConfigError, match=re.escape("pip install 'membot[st]'")):
        embedder.embed(["hello"])

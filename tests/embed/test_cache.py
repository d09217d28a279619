"""CachedEmbedder: the same text is embedded once, across calls, objects and Memory turns."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from membot import Bot, ScriptedLLM
from membot.embed import CachedEmbedder, resolve_embedder


def test_the_same_text_is_never_embedded_twice(tmp_path: Path, make_embedder) -> None:
    inner = make_embedder()
    cached = CachedEmbedder(inner, tmp_path / "cache.db")

    first = cached.embed(["apples", "pears", "apples"])
    second = cached.embed(["pears", "plums"])

    assert inner.embedded == ["apples", "pears", "plums"]
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_allclose(second, inner.embed(["pears", "plums"]), rtol=0, atol=0)
    assert (cached.hits, cached.misses) == (2, 3)
    assert first.dtype == np.float32 and first.shape == (3, inner.dimension)


def test_the_cache_outlives_the_process_object(tmp_path: Path, make_embedder) -> None:
    CachedEmbedder(make_embedder(), tmp_path / "cache.db").embed(["kept on disk"])
    inner = make_embedder()
    again = CachedEmbedder(inner, tmp_path / "cache.db")
    vector = again.embed(["kept on disk"])
    assert inner.calls == []
    np.testing.assert_allclose(np.linalg.norm(vector, axis=1), 1.0, rtol=1e-6)


def test_vectors_are_cached_per_model_name(tmp_path: Path, make_embedder) -> None:
    CachedEmbedder(make_embedder(name="model-a"), tmp_path / "cache.db").embed(["hello"])
    other = make_embedder(name="model-b", dimension=16)
    vector = CachedEmbedder(other, tmp_path / "cache.db").embed(["hello"])
    assert other.embedded == ["hello"]
    assert vector.shape == (1, 16)


def test_an_empty_request_embeds_nothing(tmp_path: Path, make_embedder) -> None:
    inner = make_embedder(dimension=8)
    empty = CachedEmbedder(inner, tmp_path / "cache.db").embed([])
    assert empty.shape == (0, 8)
    assert inner.embedded == []


def test_a_turn_embeds_each_new_line_once(tmp_path: Path, make_embedder, make_memory) -> None:
    """The write path costs one embedding per line: the human's and the bot's, nothing else."""
    inner = make_embedder()
    memory = make_memory(CachedEmbedder(inner, tmp_path / "cache.db"))
    bot = Bot(memory, ScriptedLLM(["Logistics, you said.", "In logistics."]))

    bot.turn("I work in logistics", user="alice", thread="t1")
    bot.turn("Where do I work?", user="alice", thread="t2")
    memory.add("I work in logistics", user="alice", thread="t3")  # said again: cached

    assert inner.embedded == [
        "I work in logistics",
        "Logistics, you said.",
        "Where do I work?",
        "In logistics.",
    ]


def test_resolve_embedder_wraps_in_the_cache_when_given_a_path(tmp_path: Path) -> None:
    wrapped = resolve_embedder("minilm", cache_path=tmp_path / "cache.db")
    assert isinstance(wrapped, CachedEmbedder)
    assert wrapped.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert not isinstance(resolve_embedder("minilm"), CachedEmbedder)

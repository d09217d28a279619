"""The default embedder: the bundled MiniLM exported to ONNX, with the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membot import Memory, resolve_embedder
from membot.embed import CachedEmbedder, OnnxMiniLMEmbedder, bundled_minilm
from membot.embed.sentence import BUNDLED_NAME

pytestmark = pytest.mark.slow

TEXTS = [
    "My name is Alice and I work in logistics.",
    "Where do I work?",
    "ok thanks",
    "Café, naïve, 東京 🙂",
    "word " * 400,  # longer than the model's 256 tokens: truncated like sentence-transformers
    "",
]


def test_minilm_is_the_onnx_export_in_the_cache_folder(isolated_home: Path) -> None:
    embedder = resolve_embedder("minilm")
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    assert embedder.name == BUNDLED_NAME and embedder.dimension == 384
    assert embedder.onnx_path.parent == isolated_home / "cache" / "models"


def test_the_onnx_vectors_are_the_sentence_transformers_vectors(minilm) -> None:
    """Stores written by either path stay interchangeable: same name, same vectors."""
    onnx = minilm.embed(TEXTS)
    reference = bundled_minilm().embed(TEXTS)
    assert onnx.shape == (len(TEXTS), 384) and onnx.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(onnx, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(onnx, reference, atol=1e-5)


def test_a_batch_gives_the_vectors_of_its_lines_one_by_one(minilm) -> None:
    batch = minilm.embed(TEXTS * 2)  # more than a turn's few lines: the many-thread session
    alone = np.vstack([minilm.embed([text]) for text in TEXTS])
    np.testing.assert_allclose(batch[: len(TEXTS)], alone, atol=1e-5)
    np.testing.assert_allclose(batch[len(TEXTS) :], alone, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_the_model_is_exported_once_per_cache_folder(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    first = OnnxMiniLMEmbedder(folder)
    first.embed(["hello"])
    exported = first.onnx_path.stat().st_mtime_ns
    OnnxMiniLMEmbedder(folder).embed(["hello again"])
    assert first.onnx_path.stat().st_mtime_ns == exported
    assert [path.name for path in folder.iterdir()] == [first.onnx_path.name]


def test_memory_with_the_default_embedder_caches_its_vectors(isolated_home: Path) -> None:
    memory = Memory(isolated_home / "m.db")
    assert isinstance(memory.embedder, CachedEmbedder)
    assert memory.embedder.path == isolated_home / "cache" / "embeddings.db"
    memory.add("I work in logistics.", user="alice", thread="t1")
    memory.search("I work in logistics.", user="alice")
    assert (memory.embedder.hits, memory.embedder.misses) == (1, 1)
    memory.close()


def test_embedding_writes_nothing_outside_membots_folders(tmp_path: Path) -> None:
    """Offline and private: ONNX Runtime must not leave a device id or telemetry queue."""
    import subprocess
    import sys

    home = tmp_path / "home-for-onnxruntime"
    home.mkdir()
    code = (
        "from pathlib import Path; from membot.embed import OnnxMiniLMEmbedder; "
        f"OnnxMiniLMEmbedder(Path({str(tmp_path / 'models')!r})).embed(['hello'])"
    )
    env = {"HOME": str(home), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    assert list(home.rglob("*")) == []

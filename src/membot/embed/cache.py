"""An on-disk cache of embeddings keyed by (model, SHA-256 of the text): the same text is
embedded once. The texts themselves are not kept; their vectors are (a vector can be turned
back into text), so forgetting discards them and leaves no copy in the file's free pages or
its write-ahead log."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from membot.embed.base import Embedder
from membot.store.sqlite_driver import sqlite3


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class CachedEmbedder:
    """Wraps an embedder; looks every text up in a SQLite file before asking the model."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.execute("PRAGMA synchronous = NORMAL")  # a cache: losing it costs a re-embed
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, digest BLOB NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model, digest))"
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_keeping(texts, [True] * len(texts))

    def embed_transient(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`embed`, without saving what was missing: for texts that are not stored
        (queries), whose vectors nothing would ever discard."""
        return self.embed_keeping(texts, [False] * len(texts))

    def embed_keeping(self, texts: Sequence[str], keep: Sequence[bool]) -> np.ndarray:
        """As :meth:`embed` in one call to the model, saving what was missing only for the
        texts whose ``keep`` is true (a stored line beside a query's forms)."""
        digests = [_digest(text) for text in texts]
        found = self._lookup(set(digests))
        missing = {d: t for d, t in zip(digests, texts, strict=True) if d not in found}
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.embed(list(missing.values()))
            new_rows = dict(zip(missing.keys(), fresh, strict=True))
            kept = {d for d, wanted in zip(digests, keep, strict=True) if wanted}
            saved = {d: vector for d, vector in new_rows.items() if d in kept}
            if saved:
                self._save(saved)
            found.update(new_rows)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([found[d] for d in digests]).astype(np.float32, copy=False)

    def _lookup(self, digests: set[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        wanted = list(digests)
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                sql = (
                    f"SELECT digest, vector FROM embeddings WHERE model = ? AND digest IN ({marks})"
                )
                rows = self._db.execute(sql, [self.name, *chunk]).fetchall()
                found.update((d, np.frombuffer(v, dtype=np.float32)) for d, v in rows)
        return found

    def _save(self, rows: dict[bytes, np.ndarray]) -> None:
        self._write(
            "INSERT OR IGNORE INTO embeddings (model, digest, vector) VALUES (?, ?, ?)",
            [(self.name, d, np.asarray(v, dtype=np.float32).tobytes()) for d, v in rows.items()],
        )

    def discard(self, texts: Sequence[str]) -> None:
        """Drop the cached vectors of ``texts`` (after their lines were forgotten)."""
        digests = {_digest(text) for text in texts}
        self._write(
            "DELETE FROM embeddings WHERE model = ? AND digest = ?",
            [(self.name, digest) for digest in digests],
        )
        # secure_delete overwrote the rows in the file; the log still holds their pages.
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

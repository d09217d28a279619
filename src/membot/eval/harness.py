"""What both benchmark harnesses share: the cached embedder, fresh stores, progress, reports."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membot.config import DEFAULT_EMBEDDER, cache_dir
from membot.embed import Embedder, resolve_embedder
from membot.memory.facade import LineInput, Memory
from membot.store import temporary_store


def cached_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """The embedder ``spec`` names, behind the on-disk cache every run shares."""
    return resolve_embedder(spec, cache_path=cache_dir() / "embeddings.db")


@contextmanager
def fresh_memory(
    embedder: Embedder, lines: Sequence[LineInput], db: str | None = None
) -> Iterator[Memory]:
    """A store of its own, holding ``lines`` written as an import writes them; removed
    afterwards: a temporary SQLite file, or with ``db`` a ``postgresql://`` URL, a schema of
    its own in that database."""
    with temporary_store(db) as store:
        memory = Memory(store, embedder=embedder)
        try:
            memory.add_many(lines)
            yield memory
        finally:
            memory.close()


def progress_bar(show: bool) -> Progress:
    """A progress bar on stderr (silent when ``show`` is false)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    return Progress(*columns, console=Console(stderr=True), disable=not show)


def write_report(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def rounded(values: dict[str, float], digits: int = 4) -> dict[str, float]:
    return {key: round(value, digits) for key, value in values.items()}

"""The memory: :class:`~membot.memory.facade.Memory` (lines, threads, bots, summaries and
expertise over one store), forgetting, documents, importers, and the check that a kept point
holds only what was said.

The package imports nothing by itself, so its parts can be imported without the facade;
``from membot.memory import Memory`` still works, lazily.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name in {"Memory", "LineInput", "Recall"}:
        from membot.memory import facade

        return getattr(facade, name)
    raise AttributeError(f"module 'membot.memory' has no attribute {name!r}")

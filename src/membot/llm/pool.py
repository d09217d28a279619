"""One LLM per spec string, shared: a server hosts bots on different models, and a bundled
model is loaded once per process however many bots answer with it."""

from __future__ import annotations

import threading

from membot.llm.base import LLM


class LLMPool:
    """LLMs by (spec, key variable), made when first asked for."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, str | None], LLM] = {}
        self._lock = threading.Lock()

    def get(self, spec: str, key_env: str | None = None) -> LLM:
        from membot.llm import resolve_llm

        key = (spec, key_env or None)
        with self._lock:
            if key not in self._models:
                self._models[key] = resolve_llm(spec, key_env=key_env or None)
            return self._models[key]

    def put(self, spec: str, llm: LLM, key_env: str | None = None) -> None:
        """Use ``llm`` for ``spec`` (a model made elsewhere, or a scripted one in tests)."""
        with self._lock:
            self._models[(spec, key_env or None)] = llm


SHARED = LLMPool()

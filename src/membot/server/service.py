"""What every route shares: the memory, the models, the limits and the metrics.

One ``Service`` per process. It holds nothing the database does not have except caches, so
any worker can answer any request.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from membot import LLM, MAX_LINE_CHARS, MAX_NAME_CHARS, Bot, LLMPool, Memory, Turn
from membot.server.import_jobs import DEFAULT_MAX_IMPORT_MB, ImportJobs
from membot.server.metrics import Metrics
from membot.server.ratelimit import RateLimiter

# Documented limits (docs/server.md): past them a request gets 413. A line's
# limit is the library's own (MAX_LINE_CHARS), checked here before anything runs.
MAX_BODY_BYTES = 20 * 1024 * 1024
__all__ = ["MAX_BODY_BYTES", "MAX_LINE_CHARS", "MAX_NAME_CHARS", "Service"]


class Service:
    def __init__(
        self,
        memory: Memory,
        *,
        llm: LLM | None = None,
        llms: LLMPool | None = None,
        rate_limit: int = 0,
        public_url: str | None = None,
        imports: ImportJobs | None = None,
        max_import_mb: int = DEFAULT_MAX_IMPORT_MB,
    ) -> None:
        self.memory = memory
        self.llms = llms or LLMPool()
        self.llm = llm  # None: the bundled model, unless a bot's profile names its own
        self.limiter = RateLimiter(rate_limit)
        self.metrics = Metrics()
        self.public_url = public_url
        self.imports = imports or ImportJobs()
        self.max_import_bytes = max_import_mb * 1024 * 1024  # POST /v1/bots/{bot}/imports
        # Turns on one thread are taken one at a time in a process, so a reply is stored right
        # after the line it answers. A lock per thread, kept while a request holds it: with
        # 256 shared stripes, 32 turns at once would hold two unrelated ones on one stripe 86%
        # of the time, one waiting out the other's LLM call.
        self._thread_locks: weakref.WeakValueDictionary[tuple[str, str, str], threading.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._thread_locks_guard = threading.Lock()

    def bot(self, name: str) -> Bot:
        return Bot(self.memory, self.llm, name, llms=self.llms)

    def thread_lock(self, bot: str, user: str, thread: str) -> threading.Lock:
        """The lock of one conversation thread (hold the lock object while using it)."""
        with self._thread_locks_guard:
            lock = self._thread_locks.get((bot, user, thread))
            if lock is None:
                lock = self._thread_locks[(bot, user, thread)] = threading.Lock()
            return lock

    def turn(
        self,
        bot: str,
        *,
        user: str,
        thread: str,
        text: str,
        dry_run: bool = False,
        settings: dict[str, Any] | None = None,
        on_text: Callable[[str], None] | None = None,
        source_key: str | None = None,
    ) -> Turn:
        """One turn, counted in the metrics; turns on one thread wait for each other. The
        bot is known by its id from before the wait: one deleted meanwhile is not made again."""
        extra: dict[str, Any] = {"on_text": on_text} if on_text is not None else {}
        if source_key is not None:
            extra["source_key"] = source_key
        bot_id = self.memory.bot_id(bot)
        with self.thread_lock(bot, user, thread):
            turn = self.bot(bot).turn(
                text, user=user, thread=thread, dry_run=dry_run, settings=settings,
                bot_id=bot_id, **extra,
            )  # fmt: skip
        self.metrics.count_turn(bot, turn.timings_ms, failed=turn.error is not None)
        return turn

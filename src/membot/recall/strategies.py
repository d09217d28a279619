"""Recall strategies by name: each a registered object that owns its options and its
``choose``.

membot's own strategies (:mod:`membot.recall.builtin`) are registered through
:func:`register_strategy`, the call another package uses to add one (the lookups,
:func:`membot.recall.chat.strategy_named` and :func:`~membot.recall.chat.check_strategy`, load
membot's own first)::

    from membot.recall.strategies import register_strategy

    register_strategy(MyStrategy())  # then: membot bot set BOT strategy mine

A bot's ``strategy`` names one; its ``strategy.NAME`` settings (and ``membot eval --set``) set
the options the strategy declares, checked against that declaration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np

from membot.errors import ConfigError

if TYPE_CHECKING:
    from membot.config import BotSettings
    from membot.index.scope import Scope
    from membot.recall.lines import Hit
    from membot.recall.source import RecallSource
    from membot.store.base import BufferEntry


@dataclass(frozen=True)
class Question:
    """What one turn asks recall: the match string and its vector, the scope to search, when
    it is asked, the new line itself (``said``: time words such as "last week" are read from
    it; default the match string), and the vectors of other texts embedded in the match
    string's batch (``prepared``, by text: :func:`membot.recall.chat.embedded_question`)."""

    text: str
    vector: np.ndarray
    scope: Scope
    now: datetime | None = None
    said: str | None = None
    prepared: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def line(self) -> str:
        return self.said or self.text

    def vector_of(self, text: str, source: RecallSource) -> np.ndarray:
        """The vector of ``text``, a form of the question a strategy searches too: the one
        embedded with the question where it was prepared, else embedded now (and, as the
        prepared ones, not kept in the embedder's cache)."""
        found = self.prepared.get(text)
        return found if found is not None else source.embed_transient([text])[0]


@dataclass(frozen=True)
class Choice:
    """A kept match, the block of lines it brings in, and its place in the strategy's order
    (``order``: the score the strategy sorted by; ``hit.score`` is the cosine); ``duplicates``:
    the near-duplicates collapsed into it (:mod:`membot.recall.duplicates`)."""

    hit: Hit
    block: BufferEntry
    order: float
    decay: float  # a block line d away from the match is ordered at decay ** d of it
    duplicates: tuple[Hit, ...] = ()


class Strategy(Protocol):
    """A recall strategy: its name, its options (name → default; those in ``whole_numbers``
    take whole numbers, those in ``switches`` 1 or 0), and the matches it keeps for a turn,
    best first, at most ``settings.max_matches``, each with its block."""

    @property
    def name(self) -> str: ...
    @property
    def options(self) -> Mapping[str, float]: ...
    @property
    def whole_numbers(self) -> frozenset[str]: ...
    @property
    def switches(self) -> frozenset[str]: ...

    def choose(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[Choice]: ...


_REGISTERED: dict[str, Strategy] = {}
_LOADING = threading.Lock()
_loaded = False


def register_strategy(strategy: Strategy, *, replace: bool = False) -> Strategy:
    """Make ``strategy`` available under its name; ConfigError if the name is taken (unless
    ``replace``). Returns it, so a module may register as it defines."""
    if not replace and strategy.name in _REGISTERED:
        raise ConfigError(f"a recall strategy named {strategy.name!r} is registered already")
    _REGISTERED[strategy.name] = strategy
    return strategy


def load_strategies(register_builtin: Callable[[], None]) -> dict[str, Strategy]:
    """The registered strategies by name, after ``register_builtin`` registered membot's own
    (once, on first use, not at import), listed before those another package registered
    before that."""
    global _loaded
    if not _loaded:
        with _LOADING:
            if not _loaded:
                earlier = dict(_REGISTERED)
                _REGISTERED.clear()
                register_builtin()
                _REGISTERED.update(earlier)
                _loaded = True
    return dict(_REGISTERED)


def option_values(strategy: Strategy, settings: BotSettings) -> dict[str, float]:
    """The strategy's options: its defaults, overridden by the bot's settings."""
    return {name: settings.option(name, value) for name, value in strategy.options.items()}

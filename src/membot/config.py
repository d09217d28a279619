"""Settings: where things live, and the per-bot numbers that shape recall and prompts.

Precedence, highest first: a value passed to the call or on the command line, then the
environment (``MEMBOT_DB``, ``MEMBOT_EMBEDDER``, ``MEMBOT_LLM``, ``MEMBOT_CACHE_DIR``), then the
bot's stored settings, then the defaults declared in :data:`BOT_SETTINGS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir, user_data_dir

from membot.errors import ConfigError

APP_NAME = "membot"
DEFAULT_BOT = "membot"
DEFAULT_USER = "me"
DEFAULT_EMBEDDER = "minilm"
DEFAULT_LLM = "smollm2"


def default_db_path() -> Path:
    """The store's file: ``MEMBOT_DB`` or ``membot.db`` in the platform's user data folder."""
    configured = os.environ.get("MEMBOT_DB")
    if configured:
        return Path(configured).expanduser()
    return Path(user_data_dir(APP_NAME, appauthor=False)) / "membot.db"


def data_dir() -> Path:
    """Folder for small state files (e.g. notices already shown)."""
    return Path(user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """Folder for the embedding cache and converted model files (``MEMBOT_CACHE_DIR``)."""
    configured = os.environ.get("MEMBOT_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(user_cache_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True)
class BotSettings:
    """The numbers of one bot. Defaults follow uncany-membot, except the threshold.

    ``threshold`` is calibrated for the bundled all-MiniLM-L6-v2 (see docs/recall.md): MiniLM
    cosine scores run far lower than the Ada scores the original 0.8 was chosen for.
    """

    threshold: float = 0.35
    max_matches: int = 3
    expand_before: int = 3
    expand_after: int = 3
    buffer_size: int = 10
    recent_window: int = 12
    share_across_people: bool = False
    recall_roles: tuple[str, ...] = ("human", "bot")
    prompt_budget: int = 2048
    reply_tokens: int = 256

    def validate(self) -> BotSettings:
        checks = [
            (-1.0 <= self.threshold <= 1.0, "threshold must lie between -1 and 1"),
            (self.max_matches >= 0, "max_matches must be 0 or more"),
            (self.expand_before >= 0 and self.expand_after >= 0, "expansion must be 0 or more"),
            (self.buffer_size >= 0, "buffer_size must be 0 or more"),
            (self.recent_window >= 0, "recent_window must be 0 or more"),
            (self.prompt_budget >= 128, "prompt_budget must be at least 128 tokens"),
            (self.reply_tokens >= 1, "reply_tokens must be at least 1"),
            (
                set(self.recall_roles) <= {"human", "bot", "tool", "system"},
                f"recall_roles must be among human, bot, tool, system; got "
                f"{', '.join(self.recall_roles)}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        return self

    def with_values(self, values: dict[str, Any]) -> BotSettings:
        """A copy with ``values`` applied, each converted to its field's type."""
        known = {item.name: item for item in fields(self)}
        converted: dict[str, Any] = {}
        for name, raw in values.items():
            if name not in known:
                raise ConfigError(
                    f"unknown bot setting {name!r}; known: {', '.join(sorted(known))}"
                )
            converted[name] = _convert(name, raw, getattr(self, name))
        return replace(self, **converted).validate()

    def to_json(self) -> dict[str, Any]:
        return {item.name: _jsonable(getattr(self, item.name)) for item in fields(self)}


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _convert(name: str, raw: Any, current: Any) -> Any:
    try:
        if isinstance(current, bool):
            if isinstance(raw, str):
                if raw.lower() not in {"true", "false", "yes", "no", "1", "0", "on", "off"}:
                    raise ValueError(raw)
                return raw.lower() in {"true", "yes", "1", "on"}
            return bool(raw)
        if isinstance(current, tuple):
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            return tuple(str(item).strip() for item in items if str(item).strip())
        if isinstance(current, int) and float(raw) != int(float(raw)):
            raise ValueError(raw)  # 2.7 matches is a mistake, not 2
        return type(current)(raw)
    except (TypeError, ValueError, OverflowError) as error:
        kind = type(current).__name__
        raise ConfigError(f"bot setting {name} wants a {kind}, got {raw!r}") from error

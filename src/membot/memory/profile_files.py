"""Bot profiles as files: a TOML document to keep in version control or move between stores.

    name = "chomsky"

    [profile]
    bot_name = "Noam Chomsky"
    human_name = "Interviewer"
    threshold = 0.35
    ...

    [profile.strategy_options]
    lexical_weight = 2.0

An exported profile lists every setting, defaults included, so the file says exactly how the
bot behaves. On import every key is checked like ``membot bot set`` checks it (unknown keys,
bad values and templates with placeholders not allowed where they stand are refused) and the
file's profile replaces the stored one whole.
"""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w

from membot.config import BotSettings
from membot.errors import ConfigError


def profile_to_toml(name: str, settings: BotSettings) -> str:
    return tomli_w.dumps({"name": name, "profile": settings.to_json()}, multiline_strings=True)


def profile_from_toml(text: str) -> tuple[str | None, dict[str, Any]]:
    """The bot's name (None if the file has none) and its profile values, checked."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"not a valid TOML profile: {error}") from error
    unknown = set(document) - {"name", "profile"}
    if unknown:
        raise ConfigError(
            f"unknown keys in the profile file: {', '.join(sorted(unknown))} "
            "(expected name and [profile])"
        )
    name = document.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError("the profile's name must be a non-empty string")
    values = document.get("profile", {})
    if not isinstance(values, dict):
        raise ConfigError("[profile] must be a table of settings")
    BotSettings().with_values(values)  # refuse bad files before anything is stored
    return name, values

"""A config file for the command line: any option of any command, kept in TOML.

The file is ``MEMBOT_CONFIG``, else ``config.toml`` in the platform's user config folder
(``~/.config/membot/config.toml`` on Linux); a missing file is no error. Its top-level keys
are the global options (``db``, ``embedder``, ``llm``, ``llm_key_env``,
``embedder_key_env``); a table named after a command holds that command's options, in the
names ``--help`` shows with ``-`` written ``_``::

    db = "postgresql://membot@db.internal/membot"
    llm = "openai:gpt-4o-mini"

    [serve]
    port = 9000

    [bot.create]
    human_name = "Sam"

A value in the file stands in for an option's default only: the command line, then the
environment (``MEMBOT_DB``, ``MEMBOT_LLM``, ...), still win. A key no command knows is an
error naming the file and the key, not something silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from membot import ConfigError, config_path


def config_defaults(command: Any, path: Path | None = None) -> dict[str, Any]:
    """The file's settings as a click ``default_map`` for ``command``; {} without a file.
    ``MEMBOT_CONFIG`` naming a file that does not exist is an error (a typo, most likely)."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get("MEMBOT_CONFIG"):
            raise ConfigError(f"MEMBOT_CONFIG names {path}, which does not exist")
        return {}
    try:
        settings = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the config file {path}: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"the config file {path} is not valid TOML: {error}") from error
    _check(command, settings, path, [])
    return settings


def _check(command: Any, settings: dict[str, Any], path: Path, where: list[str]) -> None:
    """Refuse keys ``command`` has no option or subcommand for, naming the file and key."""
    # Typer carries a click of its own: options and groups are known by their attributes.
    options = {p.name for p in command.params if getattr(p, "param_type_name", "") == "option"}
    commands = getattr(command, "commands", {})
    for key, value in settings.items():
        name = ".".join([*where, key])
        if key in commands:
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{path}: {name} is a command; give its options as a [{name}] table"
                )
            _check(commands[key], value, path, [*where, key])
        elif key not in options:
            known = sorted(options | set(commands))
            scope = f"the {' '.join(where)} command" if where else "membot"
            raise ConfigError(
                f"{path}: {scope} has no option {key!r} (known: {', '.join(known) or 'none'})"
            )

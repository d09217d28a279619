"""A config file for the command line: any option of any command, kept in TOML.

The file is ``MEMBOT_CONFIG``, else ``config.toml`` in the platform's user config folder
(``~/.config/membot/config.toml`` on Linux); a missing file is no error. Its top-level keys
are the global options (``db``, ``embedder``, ``llm``, ``llm_key_env``,
``embedder_key_env``); a table named after a command holds that command's options, named
as ``--help`` shows them with ``-`` written ``_`` (``json = true`` for ``--json``,
``set = ["threshold=0.3"]`` for ``--set``; the parameter's own name, ``as_json``, is taken
too)::

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
    return _translated(command, settings, path, [])


def _option_keys(command: Any) -> tuple[dict[str, str], list[str]]:
    """The keys the file may give ``command``'s options by, each to its option's parameter
    name (what click's ``default_map`` wants), and the keys to show: an option's long flags
    as ``--help`` shows them, ``-`` written ``_`` (``json`` for ``--json``, ``set`` for
    ``--set``); its parameter name (``as_json``) is taken too, unshown."""
    keys: dict[str, str] = {}
    shown: list[str] = []
    # Typer carries a click of its own: options and groups are known by their attributes.
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or param.name is None:
            continue
        flags = [flag[2:].replace("-", "_") for flag in param.opts if flag.startswith("--")]
        shown += flags
        keys.update({key: param.name for key in [param.name, *flags]})
    return keys, shown


def _translated(
    command: Any, settings: dict[str, Any], path: Path, where: list[str]
) -> dict[str, Any]:
    """``settings`` keyed as click's ``default_map`` wants (parameter names); keys
    ``command`` has no option or subcommand for are refused, naming the file and key."""
    keys, shown = _option_keys(command)
    commands = getattr(command, "commands", {})
    defaults: dict[str, Any] = {}
    given: dict[str, str] = {}  # parameter name -> the key that set it
    for key, value in settings.items():
        name = ".".join([*where, key])
        if key in commands:
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{path}: {name} is a command; give its options as a [{name}] table"
                )
            defaults[key] = _translated(commands[key], value, path, [*where, key])
            continue
        scope = f"the {' '.join(where)} command" if where else "membot"
        if key not in keys:
            known = sorted({*shown, *commands})
            raise ConfigError(
                f"{path}: {scope} has no option {key!r} (known: {', '.join(known) or 'none'})"
            )
        param = keys[key]
        if param in given:
            raise ConfigError(
                f"{path}: {given[param]!r} and {key!r} of {scope} name one option: give it once"
            )
        given[param] = key
        defaults[param] = value
    return defaults

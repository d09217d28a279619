"""``membot bot …``: create bots, show and change their profiles, move them as TOML files."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from membot import DEFAULT_BOT, ConfigError, profile_from_toml, profile_to_toml
from membot.cli.common import err, options_of, out, print_json, require_bot

bot_app = typer.Typer(
    rich_markup_mode=None,
    help="Create bots and show or change their profiles.",
    no_args_is_help=True,
)


@bot_app.command("create")
def bot_create(
    context: typer.Context,
    name: str,
    bot_name: Annotated[str | None, typer.Option(help="What the bot is called in prompts.")] = None,
    human_name: Annotated[
        str | None, typer.Option(help="What the person is called in prompts.")
    ] = None,
) -> None:
    """Create a bot with a profile (defaults for everything not given)."""
    memory = options_of(context).memory()
    values = {key: value for key, value in (("bot_name", bot_name), ("human_name", human_name))
              if value is not None}  # fmt: skip
    memory.create_bot(name, **values)
    err.print(f"created bot {name}", markup=False)


@bot_app.command("list")
def bot_list(
    context: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """The bots in the store."""
    names = options_of(context).memory().bots()
    if as_json:
        print_json(names)
    else:
        for name in names:
            out.print(name, highlight=False, markup=False)


@bot_app.command("show")
def bot_show(
    context: typer.Context,
    name: Annotated[str, typer.Argument(help="The bot's name.")] = DEFAULT_BOT,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A bot's profile (defaults where none were set)."""
    memory = options_of(context).memory()
    require_bot(memory, name)
    settings = memory.bot_settings(name).to_json()
    if as_json:
        print_json({"name": name, "settings": settings})
    else:
        for key, value in settings.items():
            out.print(f"{key} = {value!r}", highlight=False, markup=False)


# A VALUE such as -1 is a value, not an unknown option ("No such option: -1").
@bot_app.command("set", context_settings={"ignore_unknown_options": True})
def bot_set(context: typer.Context, name: str, key: str, value: str) -> None:
    """Change one setting of a bot's profile.

    For example `membot bot set membot threshold 0.4` or
    `membot bot set membot strategy.lexical_weight 3`. A value starting with - can follow
    `--` too: `membot bot set membot threshold -- -0.1`."""
    memory = options_of(context).memory()
    require_bot(memory, name)
    settings = memory.configure_bot(name, **{key: value})
    shown = settings.to_json()
    current = shown["strategy_options"].get(key[9:]) if key.startswith("strategy.") else shown[key]
    err.print(f"{name}: {key} = {current!r}", markup=False)


@bot_app.command("export")
def bot_export(
    context: typer.Context,
    name: str,
    file: Annotated[Path | None, typer.Argument(help="Write here (default: stdout).")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite FILE if it exists.")
    ] = False,
) -> None:
    """Write a bot's whole profile as TOML."""
    memory = options_of(context).memory()
    require_bot(memory, name)
    text = profile_to_toml(name, memory.bot_settings(name))
    if file is None:
        sys.stdout.write(text)
        return
    if file.is_dir():
        raise ConfigError(f"{file} is a folder: give the profile file's name")
    if file.is_file() and not replace:  # a device (/dev/stdout) is written to as asked
        raise ConfigError(f"{file} exists: choose another name, or pass --replace")
    if not file.parent.is_dir():
        raise ConfigError(f"cannot write {file}: there is no folder {file.parent}")
    try:
        file.write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot write {file}: {error.strerror or error}") from error
    err.print(f"wrote {file}", markup=False)


@bot_app.command("import")
def bot_import(
    context: typer.Context,
    file: Path,
    name: Annotated[str | None, typer.Option(help="Store it under this name.")] = None,
) -> None:
    """Read a TOML profile and make it the bot's whole profile."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {file}: {error}") from error
    stored_name, values = profile_from_toml(text)
    target = name or stored_name
    if not target:
        raise ConfigError(f'{file} names no bot: add name = "…" or pass --name')
    options_of(context).memory().replace_profile(target, values)
    err.print(f"imported the profile of {target} from {file}", markup=False)

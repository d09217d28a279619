"""The config file: any command's options in TOML, below the command line and environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from membot import ConfigError, Memory, config_path
from membot.cli import app
from membot.cli.config_file import config_defaults

COMMAND = typer.main.get_command(app)


def run(args: list[str], config: Path):
    result = CliRunner().invoke(app, args, default_map=config_defaults(COMMAND, config))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_the_file_sets_global_and_command_options(tmp_path, monkeypatch, embedder) -> None:
    monkeypatch.delenv("MEMBOT_DB")
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{tmp_path / "from-file.db"}"\n\n[bot.create]\nhuman_name = "Sam"\n')
    run(["bot", "create", "coach"], config)
    memory = Memory(tmp_path / "from-file.db", embedder=embedder)
    assert memory.bot_settings("coach").human_name == "Sam"
    memory.close()


def test_the_command_line_and_the_environment_win_over_the_file(tmp_path, monkeypatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{tmp_path / "file.db"}"\n\n[bot.create]\nhuman_name = "Sam"\n')
    monkeypatch.setenv("MEMBOT_DB", str(tmp_path / "env.db"))
    run(["bot", "create", "coach"], config)
    run(["--db", str(tmp_path / "flag.db"), "bot", "create", "coach", "--human-name", "Al"], config)
    assert (tmp_path / "env.db").exists() and (tmp_path / "flag.db").exists()
    assert not (tmp_path / "file.db").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dbx = 1\n", r"membot has no option 'dbx' \(known: .*db, embedder"),
        ("[serve]\nportt = 1\n", r"the serve command has no option 'portt' \(known: host, port"),
        ("[bot.create]\nhuman = 'x'\n", "the bot create command has no option 'human'"),
        ("serve = 9000\n", r"serve is a command; give its options as a \[serve\] table"),
        ("db = \n", r"not valid TOML: .*line 1"),
    ],
)
def test_a_bad_file_is_an_error_naming_it(tmp_path, text: str, message: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        config_defaults(COMMAND, config)
    assert str(config) in str(raised.value)


def test_where_the_file_is_looked_for(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MEMBOT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "membot" / "config.toml"
    assert config_defaults(COMMAND) == {}  # no file: the defaults, no error
    monkeypatch.setenv("MEMBOT_CONFIG", str(tmp_path / "typo.toml"))
    with pytest.raises(
        ConfigError, match=r"MEMBOT_CONFIG names .*typo\.toml, which does not exist"
    ):
        config_defaults(COMMAND)


def test_the_membot_command_reads_the_file(tmp_path) -> None:
    """The installed entry point, in a process of its own, as a person runs it."""
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{tmp_path / "from-file.db"}"\n')
    env = {k: v for k, v in os.environ.items() if k != "MEMBOT_DB"}
    env["MEMBOT_CONFIG"] = str(config)
    membot = Path(sys.executable).parent / "membot"
    done = subprocess.run(
        [str(membot), "bot", "create", "coach"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-file.db").exists()
    config.write_text("nope = 1\n")
    done = subprocess.run([str(membot), "bot", "list"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and f"{config}: membot has no option 'nope'" in done.stderr


@pytest.mark.slow  # the bundled embedder
def test_options_are_written_as_help_shows_them(tmp_path) -> None:
    """``[history] json = true`` was refused ("known: as_json, ...") and ``--set`` had to be
    written ``overrides``: the file took the parameter's name, not the option's."""
    config = tmp_path / "config.toml"
    config.write_text(
        '[say]\ndry_run = true\njson = true\nset = ["bot_name=Grace"]\n\n[history]\njson = true\n'
    )
    said = run(["say", "hello", "--user", "u", "--thread", "t"], config)
    assert "Grace" in json.loads(said.stdout)["prompt"]
    (line,) = json.loads(run(["history", "--user", "u"], config).stdout)
    assert line["text"] == "hello"
    config.write_text("[history]\nas_json = true\n")  # the parameter's name, as before
    assert config_defaults(COMMAND, config) == {"history": {"as_json": True}}
    config.write_text("[history]\njson = true\nas_json = false\n")
    with pytest.raises(
        ConfigError, match="'json' and 'as_json' of the history command name one option"
    ):
        config_defaults(COMMAND, config)
    config.write_text("[history]\njsn = true\n")
    with pytest.raises(ConfigError, match=r"no option 'jsn' \(known: bot, json, thread, user\)"):
        config_defaults(COMMAND, config)

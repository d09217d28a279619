"""``membot bot …`` profiles from the command line, ``membot tool`` and ``say --set``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from membot import BotSettings, ConfigError, NotFoundError
from membot.memory.profile_files import profile_from_toml, profile_to_toml

pytestmark = pytest.mark.slow


def test_a_bot_is_created_shown_changed_and_listed(cli) -> None:
    cli.ok("bot", "create", "chomsky", "--bot-name", "Noam Chomsky", "--human-name", "Lex")
    shown = cli.json("bot", "show", "chomsky")
    assert shown["name"] == "chomsky"
    assert shown["settings"]["bot_name"] == "Noam Chomsky"
    assert shown["settings"]["human_name"] == "Lex"
    assert shown["settings"]["strategy"] == "blend"
    cli.ok("bot", "set", "chomsky", "strategy.lexical_weight", "3")
    cli.ok("bot", "set", "chomsky", "expertise_max_matches", "2")
    settings = cli.json("bot", "show", "chomsky")["settings"]
    assert settings["strategy_options"] == {"lexical_weight": 3.0}
    assert settings["expertise_max_matches"] == 2
    assert "chomsky" in cli.json("bot", "list")
    again = cli.run("bot", "create", "chomsky")
    assert again.exit_code != 0 and "exists" in str(again.exception)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("story_fmt", "{FEED} {HISTORY_MATCHES}", r"story_fmt may not use \{HISTORY_MATCHES\}"),
        ("strategy", "magic", "unknown strategy 'magic'"),
        ("strategy.depth", "3", "strategy blend has no option 'depth'"),
        ("colour", "blue", "unknown bot setting 'colour'"),
    ],
)
def test_bad_settings_are_refused_and_nothing_changes(cli, key, value, message) -> None:
    cli.ok("bot", "create", "b1")
    before = cli.json("bot", "show", "b1")
    result = cli.run("bot", "set", "b1", key, value)
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert re.search(message, str(result.exception))
    assert cli.json("bot", "show", "b1") == before


def test_a_profile_round_trips_through_toml(cli, tmp_path: Path) -> None:
    cli.ok("bot", "create", "chomsky", "--bot-name", "Noam Chomsky")
    cli.ok("bot", "set", "chomsky", "prompt_fmt", "Be {BOT}. {HISTORY_HINTS} {QUERY}")
    path = tmp_path / "chomsky.toml"
    cli.ok("bot", "export", "chomsky", str(path))
    document = tomllib.loads(path.read_text())
    assert document["name"] == "chomsky"
    assert document["profile"]["prompt_fmt"] == "Be {BOT}. {HISTORY_HINTS} {QUERY}"
    assert set(document["profile"]) == set(BotSettings().to_json())

    cli.ok("bot", "import", str(path), "--name", "copy")
    assert (
        cli.json("bot", "show", "copy")["settings"]
        == cli.json("bot", "show", "chomsky")["settings"]
    )
    printed = cli.ok("bot", "export", "copy").stdout
    assert 'bot_name = "Noam Chomsky"' in printed
    missing = cli.run("bot", "export", "chmosky")
    assert missing.exit_code != 0 and "`membot bot create chmosky`" in str(missing.exception)


def test_a_bad_profile_file_is_refused_before_anything_is_stored(cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\n[profile]\nhistory_hints_fmt = "{EXPERTISE_MATCHES}"\n')
    result = cli.run("bot", "import", str(path))
    assert result.exit_code != 0
    assert "history_hints_fmt may not use {EXPERTISE_MATCHES}" in str(result.exception)
    assert "x" not in cli.json("bot", "list")
    path.write_text("name = [1,\n")
    assert "not a valid TOML profile" in str(cli.run("bot", "import", str(path)).exception)
    path.write_text("[profile]\nthreshold = 0.5\n")
    assert "names no bot" in str(cli.run("bot", "import", str(path)).exception)


def test_profile_toml_functions_keep_every_value() -> None:
    settings = BotSettings().with_values({"strategy.rrf_k": 30, "remember_policy": 'no "x"\n'})
    name, values = profile_from_toml(profile_to_toml("b", settings))
    assert name == "b" and BotSettings().with_values(values) == settings


def test_say_set_overrides_the_profile_for_one_turn(cli) -> None:
    cli.ok("bot", "create", "b1", "--bot-name", "Ada")
    turn = cli.json("say", "hello", "--user", "u", "--thread", "t", "--bot", "b1", "--dry-run",
                    "--set", "bot_name=Grace")  # fmt: skip
    assert "Grace" in turn["prompt"] and "Ada" not in turn["prompt"]
    later = cli.json("say", "hello", "--user", "u", "--thread", "t", "--bot", "b1", "--dry-run")
    assert "Ada" in later["prompt"]
    bad = cli.run("say", "x", "--user", "u", "--thread", "t", "--dry-run", "--set", "oops")
    assert bad.exit_code != 0 and "NAME=VALUE" in str(bad.exception)


def test_a_tool_line_is_in_the_feed_but_not_recalled_later(cli) -> None:
    cli.ok("bot", "set", "membot", "prompt_style", "full")  # the feed as the full prompt shows it
    cli.say("What is the weather in Paris?", "alice", "t1")
    cli.ok("tool", "Paris: 31 degrees and sunny", "--user", "alice", "--thread", "t1",
           "--name", "weather")  # fmt: skip
    now = cli.say("Is it hot in Paris?", "alice", "t1")
    assert "TOOL weather: <tool_result>Paris: 31 degrees and sunny</tool_result>" in now["feed"]
    later = cli.say("What was the weather in Paris?", "alice", "t2")
    recalled = [line["text"] for block in later["recalled"] for line in block["lines"]]
    assert "Paris: 31 degrees and sunny" not in recalled
    assert "31 degrees" not in later["prompt"]


def test_export_to_a_folder_a_missing_folder_or_an_existing_file_is_one_error(
    cli, tmp_path: Path
) -> None:
    cli.ok("bot", "create", "coach")
    folder = tmp_path / "folder"
    folder.mkdir()
    missing = tmp_path / "missing" / "coach.toml"
    for target, message in ((folder, "is a folder"), (missing, "there is no folder")):
        result = cli.run("bot", "export", "coach", str(target))
        assert isinstance(result.exception, ConfigError), result.exception
        assert message in str(result.exception)
    existing = tmp_path / "coach.toml"
    existing.write_text("keep me\n")
    refused = cli.run("bot", "export", "coach", str(existing))
    assert isinstance(refused.exception, ConfigError)
    assert "exists: choose another name, or pass --replace" in str(refused.exception)
    assert existing.read_text() == "keep me\n"
    cli.ok("bot", "export", "coach", str(existing), "--replace")
    assert tomllib.loads(existing.read_text())["name"] == "coach"


@pytest.mark.parametrize(
    "command",
    [
        ["bot", "show", "typoo"],
        ["bot", "set", "typoo", "threshold", "0.3"],
        ["say", "hi", "-u", "u", "-t", "t", "--bot", "typoo", "--dry-run"],
        ["chat", "-u", "u", "--bot", "typoo"],
        ["tool", "31 C", "-u", "u", "-t", "t", "-n", "weather", "--bot", "typoo"],
        ["search", "hi", "--bot", "typoo"],
        ["import", "LINES", "--bot", "typoo"],
        ["end", "-u", "u", "-t", "t", "--bot", "typoo", "--remember", "no"],
        ["end-idle", "--bot", "typoo"],
    ],
)
def test_a_bot_that_does_not_exist_is_an_error_not_a_new_bot(
    cli, tmp_path: Path, command: list[str]
) -> None:
    """A typo in --bot made a new bot (or showed the defaults); only the default bot is made
    by its first use."""
    cli.ok("say", "hi", "-u", "u", "-t", "t", "--dry-run")  # the default bot, made by use
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"text": "hello", "user": "u", "thread": "t"}\n')
    command = [str(lines) if part == "LINES" else part for part in command]
    result = cli.run(*command, input="hello\n/quit\n")
    assert isinstance(result.exception, NotFoundError), result.output
    assert str(result.exception) == "no bot named 'typoo'; `membot bot create typoo` makes it"
    assert cli.json("bot", "list") == ["membot"]

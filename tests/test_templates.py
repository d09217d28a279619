"""The prompt templates: placeholders parsed, checked per template, filled."""

from __future__ import annotations

import pytest

from membot import BotSettings, ConfigError
from membot.turn.templates import (
    ALLOWED,
    DEFAULTS,
    TEMPLATE_NAMES,
    check_template,
    fill,
    placeholders,
)


def test_placeholders_are_listed_in_order_with_repeats() -> None:
    assert placeholders("{HUMAN}: {QUERY} ({HUMAN})") == ["HUMAN", "QUERY", "HUMAN"]
    assert placeholders("no placeholders at all") == []
    assert placeholders("") == []


def test_doubled_braces_are_literal_not_placeholders() -> None:
    assert placeholders('{{"response": "x"}} {QUERY}') == ["QUERY"]
    assert placeholders("{{QUERY}}") == []


@pytest.mark.parametrize(
    "template",
    ["{}", "{0}", "{QUERY!r}", "{QUERY:>10}", "{QUERY.upper}", "{QUERY[0]}", "{two words}"],
)
def test_placeholders_that_are_not_plain_names_are_refused(template: str) -> None:
    with pytest.raises(ConfigError, match="double a brace"):
        placeholders(template)


@pytest.mark.parametrize("template", ["{QUERY", "QUERY}", "a } b", "{"])
def test_unbalanced_braces_are_refused(template: str) -> None:
    with pytest.raises(ConfigError, match="malformed template"):
        placeholders(template)


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_every_default_template_passes_its_own_check(name: str) -> None:
    assert check_template(name, DEFAULTS[name]) == DEFAULTS[name]


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_now_bot_and_human_are_allowed_everywhere(name: str) -> None:
    assert check_template(name, "{NOW} {BOT} {HUMAN}")


@pytest.mark.parametrize(
    ("name", "allowed", "refused"),
    [
        ("story_fmt", "{FEED} {QUERY}", "STORY"),
        ("story_fmt", "{FEED}", "HISTORY_MATCHES"),
        ("no_story", "{QUERY}", "STORY"),
        ("history_match_fmt", "{FEED} {HUMAN}: {QUERY}", "STORY"),
        ("history_match_fmt", "{QUERY}", "HISTORY_HINTS"),
        ("history_hints_fmt", "{HISTORY_MATCHES}", "QUERY"),
        ("history_hints_fmt", "{FEED}", "STORY"),
        ("no_history_hints", "{STORY} {QUERY}", "HISTORY_MATCHES"),
        ("expertise_match_fmt", "{STORY} {QUERY}", "HISTORY_MATCHES"),
        ("expertise_hints_fmt", "{EXPERTISE_MATCHES} {STORY}", "HISTORY_HINTS"),
        ("no_expertise_hints", "{STORY}", "EXPERTISE_MATCHES"),
        ("prompt_fmt", "{EXPERTISE_HINTS} {HISTORY_HINTS} {STORY} {QUERY}", "PROMPT"),
        ("no_response", "{HISTORY_MATCHES} {EXPERTISE_MATCHES}", "RESPONSE"),
    ],
)
def test_each_template_takes_only_its_placeholders(name: str, allowed: str, refused: str) -> None:
    assert check_template(name, allowed) == allowed
    with pytest.raises(ConfigError) as raised:
        check_template(name, f"{allowed} {{{refused}}}")
    message = str(raised.value)
    assert message.startswith(f"{name} may not use {{{refused}}}")
    listed = message.split("it may use ", 1)[1]
    assert listed.split(", ") == [f"{{{each}}}" for each in ALLOWED[name]]


def test_the_allowed_lists_follow_chatstate_plus_now() -> None:
    assert ALLOWED["history_hints_fmt"] == ("NOW", "BOT", "HUMAN", "FEED", "HISTORY_MATCHES")
    assert "STORY" not in ALLOWED["history_match_fmt"]
    assert "STORY" in ALLOWED["expertise_match_fmt"]
    assert set(ALLOWED["prompt_fmt"]) == set(ALLOWED["no_response"])
    assert all("NOW" in names for names in ALLOWED.values())


def test_fill_replaces_placeholders_and_keeps_literal_braces() -> None:
    filled = fill('{{"a": 1}} {HUMAN} says {QUERY}', {"HUMAN": "Ann", "QUERY": "hi {there}"})
    assert filled == '{"a": 1} Ann says hi {there}'


def test_fill_leaves_a_missing_value_empty_and_ignores_extra_ones() -> None:
    assert fill("[{STORY}]", {"QUERY": "unused"}) == "[]"
    assert fill("plain", {}) == "plain"


def test_settings_refuse_a_template_with_a_placeholder_it_may_not_use() -> None:
    with pytest.raises(ConfigError, match=r"no_story may not use \{STORY\}"):
        BotSettings().with_values({"no_story": "{STORY}"})
    with pytest.raises(ConfigError, match="malformed template"):
        BotSettings().with_values({"prompt_fmt": "It is {NOW"})
    custom = BotSettings().with_values({"story_fmt": "Chat so far ({NOW}):\n{FEED}"})
    assert custom.story_fmt == "Chat so far ({NOW}):\n{FEED}"


def test_put_fills_each_placeholder_once_and_leaves_other_braces() -> None:
    """Chained replaces filled placeholders found inside values: a policy mentioning
    {DRAFT} got the notes inside its own block."""
    from membot.turn.ending import policy_messages
    from membot.turn.templates import put

    assert put('{A} {"json": 1} {B}', {"A": "{B}", "B": "b"}) == '{B} {"json": 1} b'
    (message,) = policy_messages("keep no {DRAFT} of health", "Sam runs", ["health"])
    policy = message["content"].split("<policy>")[1].split("</policy>")[0]
    assert "{DRAFT}" in policy and "Sam runs" not in policy

"""Settings: where things live, and the per-bot numbers that shape recall and prompts.

Precedence, highest first. Where things live and what embeds: the command line, then the
environment (``MEMBOT_DB``, ``MEMBOT_EMBEDDER``, ``MEMBOT_CACHE_DIR``), then the defaults. A bot's
numbers and templates: a value passed to the call (``say --set``, ``Bot.turn(settings=...)``),
then the bot's stored settings, then the defaults declared in :data:`BOT_SETTINGS`. The model
that answers: the bot's ``llm`` setting (passed or stored), then ``--llm`` or ``MEMBOT_LLM``,
which serve only the bots whose settings name no model, then the bundled SmolLM2.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir, user_config_dir, user_data_dir

from membot.errors import ConfigError
from membot.line_checks import CONTROL, MAX_NAME_CHARS, check_storable
from membot.model import DEFAULT_BOT as DEFAULT_BOT  # where a line's default bot is named
from membot.turn.templates import DEFAULTS as TEMPLATES
from membot.turn.templates import TEMPLATE_NAMES, check_template

APP_NAME = "membot"
DEFAULT_USER = "me"
DEFAULT_EMBEDDER = "minilm"
DEFAULT_LLM = "smollm2"
PROMPT_STYLES = ("auto", "small", "full")
# A phone number in E.164, as Twilio writes ``To`` and ``From``: + and up to 15 digits.
E164 = re.compile(r"\+[1-9][0-9]{1,14}")


def default_db_path() -> Path | str:
    """The store: ``MEMBOT_DB`` (a path, or a URL such as ``postgresql://…``, kept as text)
    or ``membot.db`` in the platform's user data folder."""
    configured = os.environ.get("MEMBOT_DB")
    if configured and "://" in configured:
        return configured  # a Path would fold the URL's "//"
    if configured:
        return Path(configured).expanduser()
    return Path(user_data_dir(APP_NAME, appauthor=False)) / "membot.db"


def data_dir() -> Path:
    """Folder for small state files (e.g. notices already shown)."""
    return Path(user_data_dir(APP_NAME, appauthor=False))


def config_path() -> Path:
    """The command line's config file (it need not exist): ``MEMBOT_CONFIG``, else
    ``config.toml`` in the platform's user config folder."""
    configured = os.environ.get("MEMBOT_CONFIG")
    if configured:
        return Path(configured).expanduser()
    return Path(user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def cache_dir() -> Path:
    """Folder for the embedding cache and converted model files (``MEMBOT_CACHE_DIR``)."""
    configured = os.environ.get("MEMBOT_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(user_cache_dir(APP_NAME, appauthor=False))


def parse_settings(pairs: Iterable[str], flag: str = "--set") -> dict[str, str]:
    """``["NAME=VALUE", ...]`` as a mapping (values stay text: the setting converts them);
    ``ConfigError`` naming ``flag`` for a pair without ``=`` or a name."""
    values = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{flag} wants NAME=VALUE, got {pair!r}")
        values[name.strip()] = value
    return values


def parse_numbers(pairs: Iterable[str], flag: str = "--set") -> dict[str, float]:
    """``["lexical_weight=0.7"]`` -> ``{"lexical_weight": 0.7}``; ``ConfigError`` naming
    ``flag`` for a pair that is not NAME=NUMBER."""
    numbers = {}
    for name, raw in parse_settings(pairs, flag).items():
        try:
            numbers[name] = float(raw)
        except ValueError:
            raise ConfigError(f"{flag} wants NAME=NUMBER, got {name}={raw}") from None
    return numbers


@dataclass(frozen=True)
class BotSettings:
    """A bot's profile: its names, recall numbers, prompt budget and prompt templates.

    Stored per bot in the database; a value passed with a call beats the stored profile, which
    beats these defaults. Recall defaults follow uncany-membot, except the threshold, which is
    calibrated for the bundled all-MiniLM-L6-v2 (see docs/recall.md): MiniLM cosine scores run
    far lower than the Ada scores the original 0.8 was chosen for. Names, window and templates
    follow AllegroGraph's chatState profile (see :mod:`membot.turn.templates`).
    """

    bot_name: str = "AI"
    human_name: str = "HUMAN"
    # The feed: the lines of the current thread before the new one that go in the prompt as
    # they are (never searched); also the windows strategy's window and overlap.
    window_size: int = 8
    window_overlap: int = 2
    # History recall.
    strategy: str = "blend"
    strategy_options: tuple[tuple[str, float], ...] = ()
    threshold: float = 0.35  # history min score
    max_matches: int = 3  # history max matches
    expand_before: int = 3
    expand_after: int = 3
    buffer_size: int = 10
    share_across_people: bool = False
    recall_roles: tuple[str, ...] = ("human", "bot")
    recall_summaries: bool = True
    # Expertise (the bot's documents).
    expertise_max_matches: int = 4
    # Calibrated by benchmarks/calibrate_expertise.py (docs/turns.md): at 0.35, 59% of
    # questions find a passage with their answer among the top 4; small talk reaches 4%.
    expertise_min_score: float = 0.35
    # The prompt: the model's context size, of which reply_tokens are kept for the reply.
    context_size: int = 2048  # SmolLM2-135M, the bundled model, was trained on 2048
    reply_tokens: int = 256
    # The bot's own model (a spec as for --llm); empty: the model the server or command was
    # started with. Its key is read from the environment variable llm_key_env, never stored.
    llm: str = ""
    llm_key_env: str = ""
    citations: bool = True  # ask the model for JSON with the ids of the hints it used
    # small: a short prompt a tiny model can read (membot.turn.small_prompt); full: the
    # templates; auto: small when the model says it cannot read a long prompt (the bundled
    # SmolLM2) and the prompt templates are the defaults, else full.
    prompt_style: str = "auto"
    relevance_check: bool = False  # ask the model whether each recalled block is relevant
    thread_summary: bool = True  # fold lines scrolling off the feed into a running summary
    # Ending conversations.
    idle_timeout_minutes: float = 60.0  # 0: threads end only when asked
    remember_policy: str = ""  # e.g. "never keep health details"
    # The number people text to reach this bot (E.164, e.g. +15550100); empty: none.
    sms_number: str = ""
    # Prompt templates.
    story_fmt: str = TEMPLATES["story_fmt"]
    no_story: str = TEMPLATES["no_story"]
    history_match_fmt: str = TEMPLATES["history_match_fmt"]
    history_hints_fmt: str = TEMPLATES["history_hints_fmt"]
    no_history_hints: str = TEMPLATES["no_history_hints"]
    expertise_match_fmt: str = TEMPLATES["expertise_match_fmt"]
    expertise_hints_fmt: str = TEMPLATES["expertise_hints_fmt"]
    no_expertise_hints: str = TEMPLATES["no_expertise_hints"]
    prompt_fmt: str = TEMPLATES["prompt_fmt"]
    no_response: str = TEMPLATES["no_response"]

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt may take: the context size less the reply's share."""
        return self.context_size - self.reply_tokens

    def option(self, name: str, default: float) -> float:
        return dict(self.strategy_options).get(name, default)

    def validate(self) -> BotSettings:
        checks = [
            (-1.0 <= self.threshold <= 1.0, "threshold must lie between -1 and 1"),
            (-1.0 <= self.expertise_min_score <= 1.0,
             "expertise_min_score must lie between -1 and 1"),
            (self.max_matches >= 0, "max_matches must be 0 or more"),
            (self.expertise_max_matches >= 0, "expertise_max_matches must be 0 or more"),
            (self.expand_before >= 0 and self.expand_after >= 0, "expansion must be 0 or more"),
            (self.buffer_size >= 0, "buffer_size must be 0 or more"),
            (self.window_size >= 0, "window_size must be 0 or more"),
            (self.window_overlap >= 0, "window_overlap must be 0 or more"),
            (self.reply_tokens >= 1, "reply_tokens must be at least 1"),
            (self.prompt_budget >= 128,
             "context_size must leave at least 128 tokens for the prompt after reply_tokens"),
            (0 <= self.idle_timeout_minutes <= MAX_IDLE_MINUTES,
             f"idle_timeout_minutes must be 0 to {MAX_IDLE_MINUTES} (ten years)"),
            (self.sms_number == "" or E164.fullmatch(self.sms_number) is not None,
             f"sms_number must be a phone number in E.164 form, + and up to 15 digits without "
             f"spaces (e.g. +15550100000); got {self.sms_number!r}"),
            (self.bot_name.strip() != "" and self.human_name.strip() != "",
             "bot_name and human_name may not be empty"),
            (self.llm == "" or self.llm in {"smollm2", "bundled", "default"}
             or self.llm.startswith(("openai:", "script:")),
             f"llm must be smollm2, openai:MODEL[@BASE_URL] or script:PATH; got {self.llm!r}"),
            (self.prompt_style in PROMPT_STYLES,
             f"prompt_style must be {', '.join(PROMPT_STYLES)}; got {self.prompt_style!r}"),
            (
                set(self.recall_roles) <= {"human", "bot", "tool", "system"},
                f"recall_roles must be among human, bot, tool, system; got "
                f"{', '.join(self.recall_roles)}",
            ),
        ]  # fmt: skip
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        for name in TEMPLATE_NAMES:
            check_template(name, getattr(self, name))
        return self

    def with_values(self, values: dict[str, Any]) -> BotSettings:
        """A copy with ``values`` applied, each converted to its field's type.

        ``strategy.NAME`` sets one of the strategy's numbers (``strategy.lexical_weight``);
        ``strategy_options`` replaces them all (a mapping)."""
        known = {item.name: item for item in fields(self)}
        converted: dict[str, Any] = {}
        options = dict(self.strategy_options)
        for name, raw in values.items():
            if name.startswith("strategy."):
                options[name.removeprefix("strategy.")] = _number(name, raw)
                continue
            if name == "strategy_options":
                options = {
                    str(key): _number(f"strategy.{key}", value) for key, value in _pairs(raw)
                }
                continue
            if name not in known:
                raise ConfigError(
                    f"unknown bot setting {name!r}; known: {', '.join(sorted(known))}"
                )
            converted[name] = _convert(name, raw, getattr(self, name))
        converted["strategy_options"] = tuple(sorted(options.items()))
        return replace(self, **converted).validate()

    def to_json(self) -> dict[str, Any]:
        values = {item.name: _jsonable(getattr(self, item.name)) for item in fields(self)}
        values["strategy_options"] = dict(self.strategy_options)
        return values


def _number(name: str, raw: Any) -> float:
    try:
        return _finite(raw)
    except (TypeError, ValueError, OverflowError) as error:
        raise ConfigError(f"bot setting {name} wants a finite number, got {raw!r}") from error


def _finite(raw: Any) -> float:
    """``raw`` as a float; ValueError for NaN and the infinities, which no setting takes."""
    value = float(raw)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(raw)
    return value


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# The longest a thread may stay idle before it ends: past it no clock can count back.
MAX_IDLE_MINUTES = 10 * 366 * 24 * 60
# The largest whole number a setting takes: a count, a size or a number of minutes past it
# is a mistake, and past 2**63 a database cannot even hold it.
MAX_SETTING_INT = 2**31 - 1


def _pairs(raw: Any) -> list[tuple[Any, Any]]:
    """``strategy_options`` as (name, number) pairs: a mapping, or a list of pairs."""
    if isinstance(raw, dict):
        return list(raw.items())
    if isinstance(raw, list | tuple) and all(
        isinstance(pair, list | tuple) and len(pair) == 2 for pair in raw
    ):
        return [tuple(pair) for pair in raw]
    raise ConfigError(
        f"bot setting strategy_options wants a mapping of names to numbers, got {raw!r}"
    )


# What a setting of each type wants, in words ("wants a int", "wants a tuple" read as code).
_KIND_WORDS = {
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "tuple": "a list of names (comma-separated)",
}
# Settings that name a side of the conversation: each labels that side's lines in every
# prompt, so they are held to a speaker's limits (no line break, as short as a name).
SPEAKER_SETTINGS = frozenset({"bot_name", "human_name"})
# The longest text setting (a persona, a template): it enters every prompt. A line's limit
# was this until lines were stored whole (membot.line_checks.MAX_LINE_CHARS).
MAX_SETTING_CHARS = 32_000


def _checked_text(name: str, raw: str) -> str:
    """A text setting a store can keep, of a size a prompt can hold: a NUL was stored, and a
    bot_name of 100,000 characters left no room in the prompt for the person's line."""
    check_storable(raw, f"bot setting {name}")
    limit = MAX_NAME_CHARS if name in SPEAKER_SETTINGS else MAX_SETTING_CHARS
    if len(raw) > limit:
        raise ConfigError(f"bot setting {name} has {len(raw):,} characters; at most {limit:,}")
    if name in SPEAKER_SETTINGS and (bad := CONTROL.search(raw)):
        raise ConfigError(f"bot setting {name} holds a control character ({bad[0]!r})")
    return raw


def _convert(name: str, raw: Any, current: Any) -> Any:
    """``raw`` as the type of the setting's ``current`` value. Text is read ("3", "yes");
    a value of another kind is not guessed at: 5 is no name, true no count, [1] no text."""
    kind = _KIND_WORDS.get(type(current).__name__, type(current).__name__)
    wrong = ConfigError(f"bot setting {name} wants {kind}, got {raw!r}")
    try:
        if isinstance(current, bool):
            if isinstance(raw, str):
                if raw.lower() not in {"true", "false", "yes", "no", "1", "0", "on", "off"}:
                    raise ValueError(raw)
                return raw.lower() in {"true", "yes", "1", "on"}
            if isinstance(raw, bool) or (isinstance(raw, int) and raw in (0, 1)):
                return bool(raw)
            raise wrong
        if isinstance(current, str):
            if not isinstance(raw, str):
                raise wrong
            return _checked_text(name, raw)
        if isinstance(current, tuple):
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            if not all(isinstance(item, str) for item in items):
                raise wrong
            return tuple(item.strip() for item in items if item.strip())
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise wrong
        value = _finite(raw)
        if isinstance(current, int):
            if value != int(value):
                raise ValueError(raw)  # 2.7 matches is a mistake, not 2
            if abs(value) > MAX_SETTING_INT:
                raise ConfigError(
                    f"bot setting {name} wants a whole number up to {MAX_SETTING_INT}, got {raw!r}"
                )
            return int(value)
        return value
    except (TypeError, ValueError, OverflowError) as error:
        raise wrong from error

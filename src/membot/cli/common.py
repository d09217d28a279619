"""What every ``membot`` command module shares: the global options, the consoles, printing.

Kept apart from :mod:`membot.cli`, which registers the command modules, so they can import
it at the top without a cycle.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console

from membot import (
    DEFAULT_BOT,
    DEFAULT_LLM,
    LLM,
    TRY_OUT_NOTICE,
    Bot,
    BundledSmolLM2,
    ConfigError,
    Memory,
    NotFoundError,
    ScriptedLLM,
    data_dir,
    resolve_llm,
)

out = Console(emoji=False)  # ":smile:" in a line is text, not an emoji
err = Console(stderr=True, emoji=False)


@dataclass
class Options:
    db: str  # a path or a store URL
    embedder: str | None  # None: the store's own
    llm_spec: str | None  # --llm or MEMBOT_LLM; None: the default
    llm_key_env: str | None
    embedder_key_env: str | None = None
    _memory: Memory | None = field(default=None, repr=False)

    def memory(self, warm: bool = False) -> Memory:
        """The store; ``warm`` loads the models first, so a turn's timings are its own."""
        if self._memory is None:
            self._memory = Memory(
                self.db, embedder=self.embedder, embedder_key_env=self.embedder_key_env
            )
        if warm:
            self._memory.warm_up()
        return self._memory

    @property
    def llm(self) -> str:
        return self.llm_spec or DEFAULT_LLM

    @property
    def llm_given(self) -> bool:
        return self.llm_spec is not None

    def make_llm(self) -> LLM:
        llm = resolve_llm(self.llm, key_env=self.llm_key_env)
        if isinstance(llm, ScriptedLLM) and llm.path and not llm.path.is_file():
            # It would answer every call with its default reply, as if scripted so.
            raise ConfigError(f"--llm {self.llm}: the script file {llm.path} does not exist")
        if isinstance(llm, BundledSmolLM2):
            if self.llm_given:  # named: say now what it lacks (else a profile's model may answer)
                llm.check_installed()
            notice_once()
        return llm

    def bot(self, name: str, answers: bool = True) -> Bot:
        """The bot ``name`` over the store, answering with the model from ``--llm`` (unless
        its profile names its own); ``answers=False`` makes no model for commands that
        need none. ``NotFoundError`` for a bot that does not exist (:func:`require_bot`)."""
        require_bot(self.memory(), name)
        return Bot(self.memory(), self.make_llm() if answers else None, name)


def require_bot(memory: Memory, name: str) -> None:
    """``NotFoundError`` unless the bot exists or is the default bot, which its first line
    makes: a mistyped ``--bot`` starts no new bot, as a mistyped name over HTTP does not."""
    if name != DEFAULT_BOT and not memory.has_bot(name):
        raise NotFoundError(f"no bot named {name!r}; `membot bot create {name}` makes it")


def notice_once() -> None:
    """Say once per installation that the bundled model is only for trying membot out."""
    marker = data_dir() / "smollm2-notice-shown"
    if marker.exists():
        return
    err.print(f"[yellow]note:[/] {TRY_OUT_NOTICE}")
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # the note shows again next time; nothing else depends on the marker


def options_of(context: typer.Context) -> Options:
    options: Options = context.find_root().obj  # set by the main callback
    return options


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


UserOption = Annotated[str, typer.Option("--user", "-u", help="The person talking.")]
BotOption = Annotated[str, typer.Option("--bot", "-b", help="The bot's name.")]

"""CLI commands for ending conversations and listing what is remembered: ``membot end``,
``membot end-idle`` and ``membot memories``, thin over :mod:`membot.turn.ending`.

``membot.cli`` imports this module to register the commands; the shared helpers come from
:mod:`membot.cli.common`.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Column, Table
from rich.text import Text

from membot import DEFAULT_BOT, ConfigError, Ending, Summary
from membot.cli.common import err, options_of, out, print_json

_YES = {"yes", "y", "true", "1"}
_NO = {"no", "n", "false", "0"}

RememberOption = Annotated[
    str | None,
    typer.Option(
        "--remember",
        help="yes | no: whether the person agreed that the conversation is remembered.",
        show_default=False,
    ),
]


def parse_yes_no(value: str) -> bool:
    answer = value.strip().lower()
    if answer in _YES | _NO:
        return answer in _YES
    raise ConfigError(f"--remember wants yes or no, got {value!r}")


def describe(ending: Ending) -> str:
    """One or two lines for a person: what was kept of the conversation, or why nothing."""
    if ending.remembered is not None:
        labels = ", ".join(ending.remembered.categories) or "no categories"
        verb = (
            "remembered (trimmed by the policy)" if ending.decision == "trimmed" else "remembered"
        )
        return f"{verb} [{labels}]:\n{ending.remembered.text}"
    if ending.decision == "not asked to remember":  # the person said no (or was not asked)
        return "not remembered: nothing was derived, and the lines stay until forgotten"
    return f"nothing remembered: {ending.reason}"


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("end")(end)
    app.command("end-idle")(end_idle)
    app.command("memories")(memories)


def end(
    context: typer.Context,
    user: Annotated[str, typer.Option("--user", "-u", help="The person talking.")],
    thread: Annotated[str, typer.Option("--thread", "-t")],
    bot: Annotated[str, typer.Option("--bot", "-b", help="The bot's name.")] = DEFAULT_BOT,
    remember: RememberOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ending as JSON.")] = False,
) -> None:
    """End a thread; with --remember yes, keep its key points about the person."""

    if remember is None:
        if not sys.stdin.isatty():
            raise ConfigError(
                "ask the person first, then pass --remember yes or --remember no "
                "(there is no terminal to ask on)"
            )
        agreed = typer.confirm("Shall I remember this conversation?", default=False, err=True)
    else:
        agreed = parse_yes_no(remember)
    # No model is made when nothing is to be remembered.
    talker = options_of(context).bot(bot, answers=agreed)
    ending = talker.end_thread(user=user, thread=thread, remember=agreed)
    if as_json:
        print_json(ending.to_json())
        return
    err.print(f"ended thread {thread!r} of {user!r}", highlight=False, markup=False)
    out.print(describe(ending), markup=False, highlight=False)


def end_idle(
    context: typer.Context,
    bot: Annotated[str, typer.Option("--bot", "-b", help="The bot's name.")] = DEFAULT_BOT,
    remember: RememberOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the endings as JSON.")] = False,
) -> None:
    """End every thread idle longer than the bot's idle_timeout_minutes (nothing is
    remembered unless --remember yes says the people agreed)."""

    agreed = parse_yes_no(remember) if remember is not None else False
    talker = options_of(context).bot(bot, answers=agreed)
    endings = talker.end_idle_threads(remember=agreed)
    if as_json:
        print_json([ending.to_json() for ending in endings])
        return
    minutes = talker.memory.bot_settings(bot).idle_timeout_minutes
    if not minutes:
        err.print(f"bot {bot!r} has no idle timeout (idle_timeout_minutes is 0)", markup=False)
    err.print(f"ended {len(endings)} idle threads", highlight=False)
    for ending in endings:
        out.print(f"{ending.user}/{ending.thread}: {describe(ending)}", markup=False,
                  highlight=False)  # fmt: skip


def memories(
    context: typer.Context,
    user: Annotated[str, typer.Option("--user", "-u", help="The person.")],
    bot: Annotated[str | None, typer.Option("--bot", "-b", help="Only this bot's.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What is remembered about a person: the kept summaries of their conversations."""

    summaries = options_of(context).memory().summaries(user=user, bot=bot)
    if as_json:
        print_json([summary.to_json() for summary in summaries])
        return
    if not summaries:
        err.print(f"nothing is remembered about {user!r}", highlight=False, markup=False)
        return
    out.print(_table(summaries))


def _table(summaries: list[Summary]) -> Table:
    # A thread's name is shown whole, the key points wrap instead: cut short, two threads of
    # one minute read alike ("chat-2026-11-26-1027…").
    names = [f"{summary.bot} / {summary.thread}" for summary in summaries]
    widest = min(max(map(len, names), default=12), 60)
    thread = Column("bot / thread", min_width=widest, overflow="fold")
    table = Table("id", thread, "covers", "categories", "key points")
    for summary in summaries:
        start = summary.covers_from.strftime("%Y-%m-%d")
        end = summary.covers_to.strftime("%Y-%m-%d")
        covers = start if start == end else f"{start} – {end}"
        # Text, not markup: a summary may hold brackets.
        table.add_row(str(summary.id), Text(f"{summary.bot} / {summary.thread}"), covers,
                      Text(", ".join(summary.categories)), Text(summary.text))  # fmt: skip
    return table

"""The ``membot`` command line: a thin adapter over :class:`Memory` and :class:`Bot`.

Global options come before the command: ``membot --db PATH --llm SPEC COMMAND ...``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from membot import (
    DEFAULT_BOT,
    DEFAULT_EMBEDDER,
    DEFAULT_LLM,
    EXPORT_FORMATS,
    IMPORT_FORMATS,
    Bot,
    ConfigError,
    MembotError,
    default_db_path,
    is_export,
    parse_settings,
    read_file,
)
from membot.cli.backup import backup, restore
from membot.cli.bots import bot_app
from membot.cli.chat import check_names, run_chat
from membot.cli.chat_exports import import_export
from membot.cli.common import (
    BotOption,
    Options,
    UserOption,
    err,
    options_of,
    out,
    print_json,
    require_bot,
)
from membot.cli.config_file import config_defaults
from membot.cli.conversations import register as register_conversations
from membot.cli.eval import eval_app
from membot.cli.expertise import expertise_app
from membot.cli.keys import keys_app
from membot.cli.mcp import mcp
from membot.cli.migrate import migrate
from membot.cli.serve import serve

app = typer.Typer(
    help="membot: a chatbot memory that does not end.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help texts hold literal brackets: openai:MODEL[@URL]
)
app.add_typer(bot_app, name="bot")
app.add_typer(eval_app, name="eval")
app.add_typer(expertise_app, name="expertise")
app.add_typer(keys_app, name="keys")


@app.callback()
def global_options(
    context: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            envvar="MEMBOT_DB",
            help="The store: a file path, sqlite:PATH or postgresql://USER@HOST/DATABASE.",
            show_default=False,
        ),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            envvar="MEMBOT_EMBEDDER",
            help="minilm | minilm-int8 | st:NAME | openai:MODEL[@URL] [default: the one the "
            f"store's vectors were made by; {DEFAULT_EMBEDDER} for a new store]",
            show_default=False,
        ),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            envvar="MEMBOT_LLM",
            help="smollm2 | openai:MODEL[@URL] | script:PATH: the model of bots whose profile "
            f"names none [default: {DEFAULT_LLM}]",
            show_default=False,
        ),
    ] = None,
    llm_key_env: Annotated[
        str | None,
        typer.Option(
            envvar="MEMBOT_LLM_KEY_ENV",
            help="Environment variable holding the LLM's API key "
            "(default: OPENAI_API_KEY for OpenAI itself, none for other servers).",
        ),
    ] = None,
    embedder_key_env: Annotated[
        str | None,
        typer.Option(
            envvar="MEMBOT_EMBEDDER_KEY_ENV",
            help="Environment variable holding an openai: embedder's API key "
            "(default: OPENAI_API_KEY for OpenAI itself, none for other servers).",
        ),
    ] = None,
) -> None:
    context.obj = Options(
        db or str(default_db_path()), embedder, llm, llm_key_env, embedder_key_env
    )


@app.command()
def chat(
    context: typer.Context,
    bot: BotOption = DEFAULT_BOT,
    user: Annotated[str, typer.Option("--user", "-u")] = "me",
    thread: Annotated[str | None, typer.Option("--thread", "-t")] = None,
) -> None:
    """Talk with a bot that remembers. /recall shows what memory the last reply used."""
    options = options_of(context)
    check_names(options.memory(), bot=bot, user=user, thread=thread)
    require_bot(options.memory(), bot)
    memory = options.memory(warm=True)
    run_chat(Bot(memory, options.make_llm(), bot), user, thread, out, err)


@app.command()
def say(
    context: typer.Context,
    text: str,
    user: UserOption,
    thread: Annotated[str, typer.Option("--thread", "-t")],
    bot: BotOption = DEFAULT_BOT,
    dry_run: Annotated[
        bool, typer.Option(help="Store the line, build the prompt, no LLM.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole turn as JSON.")] = False,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="NAME=VALUE: a bot setting for this turn only (repeatable)."),
    ] = None,
) -> None:
    """One turn: store TEXT, recall, build the prompt and (unless --dry-run) answer."""
    options = options_of(context)
    values = parse_settings(overrides or [])
    require_bot(options.memory(), bot)
    llm = None if dry_run else options.make_llm()
    memory = options.memory(warm=True)
    memory.bot_settings(bot, values)  # a bad override fails before the line is stored
    turn = Bot(memory, llm, bot).turn(
        text, user=user, thread=thread, dry_run=dry_run, settings=values
    )
    if as_json:
        print_json(turn.to_json())
    elif turn.response:
        out.print(turn.response, markup=False, highlight=False)
    if turn.error:
        err.print(Text.assemble(("error:", "red"), f" {turn.error} (your line was stored)"))
        raise typer.Exit(2)


@app.command()
def tool(
    context: typer.Context,
    text: str,
    user: UserOption,
    thread: Annotated[str, typer.Option("--thread", "-t")],
    name: Annotated[str, typer.Option("--name", "-n", help="The tool or function.")],
    bot: BotOption = DEFAULT_BOT,
) -> None:
    """Store a tool's result in a thread (role tool): in the prompt while recent, never
    recalled later unless the bot's recall_roles include tool."""
    memory = options_of(context).memory()
    require_bot(memory, bot)
    line = Bot(memory, name=bot).add_tool_result(text, user=user, thread=thread, tool=name)
    err.print(f"stored tool line {line.seq} in {thread}", markup=False, highlight=False)


@app.command()
def search(
    context: typer.Context,
    query: str,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this person.")] = None,
    thread: Annotated[str | None, typer.Option("--thread", "-t")] = None,
    bot: BotOption = DEFAULT_BOT,
    k: Annotated[int, typer.Option("--k", "-k", min=1, help="How many lines.")] = 10,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The stored lines most similar to QUERY (the query is not stored)."""
    if not query.strip():
        raise ConfigError("nothing to search for: give some words, e.g. membot search 'job'")
    memory = options_of(context).memory()
    require_bot(memory, bot)
    matches = memory.search(query, user=user, bot=bot, thread=thread, k=k)
    if as_json:
        print_json([{"user": m.line.person, **m.to_json()} for m in matches])
        return
    for match in matches:
        line = match.line
        out.print(
            Text.assemble(
                (f"{match.score:.3f}", "cyan"),
                f" {line.person}/{line.thread}#{line.seq} ",
                (str(line.role), "dim"),
                f" {line.text}",
            ),
            highlight=False,
        )


@app.command()
def history(
    context: typer.Context,
    user: UserOption,
    thread: Annotated[str | None, typer.Option("--thread", "-t")] = None,
    bot: Annotated[str | None, typer.Option("--bot", "-b")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A person's lines, thread by thread."""
    lines = options_of(context).memory().history(user=user, bot=bot, thread=thread)
    if as_json:
        print_json([{"bot": x.bot, "thread": x.thread, **x.to_json()} for x in lines])
        return
    current = None
    for line in lines:
        if (line.bot, line.thread) != current:
            current = (line.bot, line.thread)
            out.print(Text(f"\n{line.bot} / {line.thread}", style="bold"))
        stamp = line.created_at.strftime("%Y-%m-%d %H:%M")
        who = line.speaker or line.role
        out.print(Text.assemble((f"{line.seq:>4} {stamp}", "dim"), f" {who}: {line.text}"))


@app.command("import")
def import_(
    context: typer.Context,
    file: Path,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help=" | ".join((*IMPORT_FORMATS, *EXPORT_FORMATS))
            + " (default: a ChatGPT or Claude export told from its shape, else jsonl)",
            show_default=False,
        ),
    ] = None,
    bot: Annotated[
        str, typer.Option("--bot", "-b", help="The bot of lines that name none (JSONL's 'bot').")
    ] = DEFAULT_BOT,
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            "-u",
            help="The person of lines that name none: a JSONL line's own 'user' wins; every "
            "LoCoMo or LongMemEval line is this person's (default: the conversation's first "
            "speaker, the question's id); a ChatGPT or Claude export is all this person's.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Bulk import a conversation file, embedding in batches: JSONL, LoCoMo, LongMemEval, or
    a ChatGPT or Claude export (its conversations.json, or the .zip as downloaded). Run again
    (after a stop, or on a file that grew), it adds only the lines not stored yet."""
    memory = options_of(context).memory()
    require_bot(memory, bot)
    if fmt in EXPORT_FORMATS or (fmt is None and file.is_file() and is_export(file)):
        import_export(memory, file, fmt, bot=bot, user=user)
        return
    fmt = fmt or "jsonl"
    plan = read_file(file, fmt, bot, user)
    started = time.perf_counter()
    with import_progress() as progress:
        task = progress.add_task(f"importing {escape(file.name)}", total=len(plan.lines))
        added = memory.add_many(plan.lines, progress=lambda n: progress.advance(task, n))
    seconds = time.perf_counter() - started
    skipped = len(plan.lines) - added
    already = f" ({skipped} were stored already)" if skipped else ""
    err.print(
        f"imported {added} lines in {plan.threads} threads{already}: "
        f"{len(plan.lines) / max(seconds, 1e-9):.0f} lines/s, {seconds:.1f} s"
    )


class LinesPerSecondColumn(ProgressColumn):
    """How fast lines go by, averaged over the last 30 s (rich's estimate)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} lines/s", style="progress.data.speed")


def import_progress() -> Progress:
    """A bar with lines done, lines per second and the time left, on stderr."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        LinesPerSecondColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
    )


@app.command()
def forget(
    context: typer.Context,
    user: UserOption,
    thread: Annotated[str | None, typer.Option("--thread", "-t")] = None,
    bot: Annotated[str | None, typer.Option("--bot", "-b")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Remove a person's lines (all, or one thread's), with vectors and buffers."""
    what = f"thread {thread!r} of {user!r}" if thread else f"everything {user!r} said"
    if not yes and not typer.confirm(f"Forget {what}? This cannot be undone.", err=True):
        raise typer.Exit(1)
    removed = options_of(context).memory().forget(user=user, bot=bot, thread=thread)
    err.print(f"forgot {removed['lines']} lines in {removed['threads']} threads")


@app.command()
def reindex(context: typer.Context) -> None:
    """Re-embed every stored line with the embedder given by --embedder."""
    options = options_of(context)
    if options.embedder is None:
        raise ConfigError(
            "name the embedder to re-embed with: membot --embedder SPEC reindex "
            "(minilm, minilm-int8, st:NAME or openai:MODEL[@URL])"
        )
    memory = options.memory()
    total = memory.count_lines()
    with Progress(console=err) as progress:
        task = progress.add_task(f"re-embedding with {memory.embedder.name}", total=total)
        count = memory.reindex(memory.embedder, progress=lambda n: progress.advance(task, n))
    err.print(f"re-embedded {count} lines with {memory.embedder.name}", markup=False)


register_conversations(app)
app.command()(serve)
app.command()(migrate)
app.command()(backup)
app.command()(restore)
app.command()(mcp)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        command = typer.main.get_command(app)
        command(default_map=config_defaults(command))
    except MembotError as error:
        # Not wrapped at the console's width: a long path stays whole, to copy or to grep.
        err.print(Text.assemble(("error:", "red"), f" {error}"), soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main"]


if __name__ == "__main__":
    main()

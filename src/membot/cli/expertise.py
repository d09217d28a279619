"""``membot expertise …``: a bot's documents (text, Markdown, HTML, PDF), beside its history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from membot import DEFAULT_BOT, NotFoundError
from membot.cli.common import BotOption, err, options_of, out, print_json, require_bot

expertise_app = typer.Typer(
    rich_markup_mode=None, help="A bot's documents: add, list, remove.", no_args_is_help=True
)


@expertise_app.command("add")
def expertise_add(
    context: typer.Context,
    files: Annotated[list[Path], typer.Argument(help="Text, Markdown, HTML or PDF files.")],
    bot: BotOption = DEFAULT_BOT,
    max_tokens: Annotated[int, typer.Option(help="Tokens per chunk at most.")] = 200,
    overlap: Annotated[int, typer.Option(help="Tokens shared by neighbouring chunks.")] = 30,
) -> None:
    """Read, chunk and embed documents into the bot's expertise (a file of the same name is
    replaced). Every file is checked first: one bad file stores nothing."""
    memory = options_of(context).memory()
    require_bot(memory, bot)  # a mistyped --bot made a bot holding the documents
    infos = memory.add_documents(files, bot=bot, max_tokens=max_tokens, overlap_tokens=overlap)
    for info in infos:
        err.print(f"{info.name}: {info.chunks} chunks ({info.media}, “{info.title}”)", markup=False)


@expertise_app.command("list")
def expertise_list(
    context: typer.Context,
    bot: BotOption = DEFAULT_BOT,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The bot's documents."""
    memory = options_of(context).memory()
    require_bot(memory, bot)
    documents = memory.documents(bot)
    if as_json:
        print_json([info.to_json() for info in documents])
        return
    for info in documents:
        out.print(f"{info.name}  {info.chunks} chunks  {info.title}", highlight=False, markup=False)


@expertise_app.command("remove")
def expertise_remove(context: typer.Context, name: str, bot: BotOption = DEFAULT_BOT) -> None:
    """Remove a document (by file name) and its chunks."""
    if not options_of(context).memory().remove_document(name, bot=bot):
        raise NotFoundError(f"{bot} has no document named {name!r}; `membot expertise list`")
    err.print(f"removed {name}", markup=False)

"""The interactive loop of ``membot chat``."""

from __future__ import annotations

from datetime import datetime

from rich.console import Console
from rich.table import Table

from membot.bot import Bot
from membot.errors import MembotError
from membot.model import Turn

HELP = (
    "/recall  what memory the last reply used, with scores\n"
    "/new     start a new thread\n"
    "/help    this list\n"
    "/quit    leave (Ctrl-D works too)"
)


def new_thread_name() -> str:
    return datetime.now().strftime("chat-%Y%m%d-%H%M%S")


def show_recall(turn: Turn | None, out: Console) -> None:
    if turn is None:
        out.print("[dim]no reply yet[/]")
        return
    if not turn.recalled:
        out.print("[dim]the last reply used no earlier conversations[/]")
    for block in turn.recalled:
        state = "kept from an earlier turn" if block.carried else "matched now"
        title = f"{block.thread} — score {block.score:.3f} ({state})"
        table = Table(title=title, show_header=False, title_justify="left", box=None)
        for line in block.lines:
            marker = "*" if line.seq in block.matched_seqs else " "
            stamp = line.created_at.strftime("%Y-%m-%d %H:%M")
            table.add_row(f"{marker}{line.seq}", stamp, str(line.speaker or line.role), line.text)
        out.print(table)
    budget = turn.tokens.get("budget", 0)
    cut = f", cut: {turn.cut}" if turn.cut else ""
    out.print(f"[dim]prompt {turn.tokens['prompt']} of {budget} tokens{cut}[/]")


def run_chat(bot: Bot, user: str, thread: str | None, out: Console, err: Console) -> None:
    thread = thread or new_thread_name()
    out.print(
        f"[bold]membot[/] — bot [cyan]{bot.name}[/], user [cyan]{user}[/], "
        f"thread [cyan]{thread}[/]. /help lists commands."
    )
    last: Turn | None = None
    while True:
        try:
            text = out.input("[bold green]you>[/] ").strip()
        except (EOFError, KeyboardInterrupt):
            out.print()
            return
        if not text:
            continue
        if text in {"/quit", "/exit"}:
            return
        if text == "/help":
            out.print(HELP, highlight=False)
        elif text == "/recall":
            show_recall(last, out)
        elif text == "/new":
            thread, last = new_thread_name(), None
            out.print(f"[dim]new thread {thread}[/]")
        elif text.startswith("/"):
            out.print(f"[dim]unknown command {text}; /help lists them[/]")
        else:
            try:
                last = bot.turn(text, user=user, thread=thread)
            except MembotError as error:
                err.print(f"[red]error:[/] {error}", highlight=False)
                continue
            if last.error:
                err.print(f"[red]error:[/] {last.error} (your line was stored)", highlight=False)
            else:
                out.print(f"[bold blue]{bot.speakers.ai.lower()}>[/] ", end="")
                out.print(last.response, markup=False, highlight=False)

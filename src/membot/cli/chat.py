"""The interactive loop of ``membot chat``."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from membot import Bot, LineInput, MembotError, Memory, Turn
from membot.cli.conversations import describe
from membot.service import consent

HELP = (
    "/recall  what memory the last reply used, with scores\n"
    "/new     start a new thread\n"
    "/end     end this conversation (you are asked whether to remember it) and start anew\n"
    "/help    this list\n"
    "/quit    leave (Ctrl-D works too)"
)


def check_names(memory: Memory, *, bot: str, user: str, thread: str | None) -> None:
    """``ConfigError`` for a name no line can be stored under, before the chat starts rather
    than at every line; the names are checked as every line's are."""
    memory.validate_line(LineInput(text="-", user=user, thread=thread or "chat", bot=bot))


def show_recall(turn: Turn | None, out: Console) -> None:
    if turn is None:
        out.print("[dim]no reply yet[/]")
        return
    summaries = [match for match in turn.history_matches if match.get("kind") == "summary"]
    if not turn.recalled and not summaries:
        out.print("[dim]the last reply used no earlier conversations[/]")
    for match in summaries:
        kept = match["summary"]
        title = Text(f"summary of {kept['thread']} — score {match['score']:.3f}")
        table = Table(title=title, show_header=False, title_justify="left", box=None)
        table.add_row(Text(kept["text"]))  # as kept: no markup
        out.print(table)
    for block in turn.recalled:
        state = "kept from an earlier turn" if block.carried else "matched now"
        title = Text(f"{block.thread} — score {block.score:.3f} ({state})")
        table = Table(title=title, show_header=False, title_justify="left", box=None)
        for line in block.lines:
            marker = "*" if line.seq in block.matched_seqs else " "
            stamp = line.created_at.strftime("%Y-%m-%d %H:%M")
            who, text = Text(str(line.speaker or line.role)), Text(line.text)  # as said: no markup
            table.add_row(f"{marker}{line.seq}", stamp, who, text)
        out.print(table)
    budget = turn.tokens.get("budget", 0)
    cut = f", cut: {escape(str(turn.cut))}" if turn.cut else ""
    out.print(f"[dim]prompt {turn.tokens['prompt']} of {budget} tokens{cut}[/]")


def end_idle(bot: Bot, user: str, out: Console) -> None:
    """End the person's threads with this bot that went idle; nothing is remembered, since
    nobody was there to say yes."""
    endings = bot.end_idle_threads(user=user, remember=False)
    if not endings:
        return
    names = ", ".join(ending.thread for ending in endings)
    thread = shlex.quote(endings[0].thread) if len(endings) == 1 else "THREAD"
    command = f"membot end --bot {shlex.quote(bot.name)} --user {shlex.quote(user)}"
    hint = f"to remember one: {command} --thread {thread} --remember yes"
    line = f"ended {len(endings)} idle thread(s) without remembering: {names} ({hint})"
    out.print(Text(line, style="dim"))


def ask_to_remember(out: Console) -> bool:
    """The person's answer; anything unclear is no, and says so (consent is never assumed)."""
    try:
        answer = out.input("Shall I remember this conversation? (yes/no) ")
    except (EOFError, KeyboardInterrupt):
        out.print()
        answer = ""
    agreed = consent(answer)
    if agreed is None:
        said = repr(answer.strip()) if answer.strip() else "no answer"
        out.print(Text(f"{said} is neither yes nor no: taken as no", style="dim"))
    return bool(agreed)


def end_thread(bot: Bot, user: str, thread: str, out: Console, err: Console) -> None:
    """``/end``: ask, end the thread, and say what was kept of it (or why nothing)."""
    state = bot.memory.thread_state(bot=bot.name, user=user, thread=thread)
    if state is None or state.last_line_at is None:
        out.print("[dim]nothing was said in this thread yet[/]")
        return
    remember = ask_to_remember(out)
    try:
        ending = bot.end_thread(user=user, thread=thread, remember=remember)
    except MembotError as error:
        err.print(Text.assemble(("error:", "red"), f" {error}"))
        return
    out.print(f"[dim]ended thread {escape(thread)}[/]", highlight=False)
    out.print(describe(ending), markup=False, highlight=False)


def run_chat(bot: Bot, user: str, thread: str | None, out: Console, err: Console) -> None:
    thread = thread or bot.memory.new_thread_name(bot=bot.name, user=user)
    out.print(
        f"[bold]membot[/] — bot [cyan]{escape(bot.name)}[/], user [cyan]{escape(user)}[/], "
        f"thread [cyan]{escape(thread)}[/]. /help lists commands."
    )
    try:
        end_idle(bot, user, out)
    except MembotError as error:  # a chat can go on without tidying up
        err.print(Text.assemble(("error:", "red"), f" ending idle threads: {error}"))
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
        elif text in {"/new", "/end"}:
            if text == "/end":
                end_thread(bot, user, thread, out, err)
            thread, last = bot.memory.new_thread_name(bot=bot.name, user=user), None
            out.print(f"[dim]new thread {escape(thread)}[/]")
        elif text.startswith("/"):
            out.print(Text(f"unknown command {text}; /help lists them", style="dim"))
        else:
            try:
                last = bot.turn(text, user=user, thread=thread)
            except MembotError as error:
                err.print(Text.assemble(("error:", "red"), f" {error}"))
                continue
            if last.error:
                err.print(Text.assemble(("error:", "red"), f" {last.error} (your line was stored)"))
            else:
                out.print(Text(f"{bot.speakers.ai.lower()}> ", style="bold blue"), end="")
                out.print(last.response, markup=False, highlight=False)

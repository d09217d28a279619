"""``membot mcp``: membot's memory as MCP tools over stdin/stdout, for a local MCP client."""

from __future__ import annotations

import typer

from membot import DEFAULT_BOT
from membot.cli.common import BotOption, UserOption, options_of


def mcp(context: typer.Context, user: UserOption, bot: BotOption = DEFAULT_BOT) -> None:
    """Serve MCP over stdio as USER of BOT: remember, recall, search, history, end_thread,
    forget. An MCP client starts it (its config names this command)."""
    # Nothing may reach stdout before the server holds it: stdout carries the protocol. The
    # SDK is imported here, not with the CLI, so other commands do not pay its second.
    from membot.server.mcp import Caller, build_mcp_server
    from membot.server.service import Service

    options = options_of(context)
    # Without --llm the bots' own or the bundled model, loaded only when a thread is ended
    # with remember: true.
    llm = options.make_llm() if options.llm_given else None
    service = Service(options.memory(), llm=llm)
    build_mcp_server(service, local=Caller(bot, user)).run("stdio")

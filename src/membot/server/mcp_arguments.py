"""Arguments the MCP tools share (:mod:`membot.server.mcp`, :mod:`membot.server.mcp_memory`):
whom a call acts as, for keys that must name them."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field


def _without_nul(name: str | None) -> str | None:
    """A name as given; a NUL in it reached the store (PostgreSQL answered "the store
    failed", a 503) where no name can hold one."""
    if name is not None and "\x00" in name:
        raise ValueError("holds a NUL character (\\u0000), which no name holds: remove it")
    return name


NoNul = AfterValidator(_without_nul)
UserArgument = Annotated[
    str | None,
    Field(description="The person; only with a bot or admin key, which need it."),
    NoNul,
]
BotArgument = Annotated[
    str | None, Field(description="The bot; only with an admin key, which needs it."), NoNul
]

"""MCP's own client (the SDK's) talking to the app in process over streamable HTTP: the app's
lifespan running (MCP's session manager lives there) and ``httpx2.ASGITransport``, no socket.
Shared by the MCP tests and the isolation properties."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

BASE_URL = "http://membot.test"


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[httpx2.ASGITransport]:
    """The app in process with its lifespan running (MCP's session manager lives there)."""
    async with app.router.lifespan_context(app):
        yield httpx2.ASGITransport(app=app)


@asynccontextmanager
async def session_with_key(
    transport: httpx2.ASGITransport, key: str, path: str = "/mcp"
) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    with anyio.fail_after(30):
        async with (
            httpx2.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as http,
            streamable_http_client(f"{BASE_URL}{path}", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def refusal(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text

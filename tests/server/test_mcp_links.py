"""The MCP link tools with the SDK's own client over streamable HTTP in process: a code made
over MCP entered on the web identity, one made on the web entered over MCP, scope as for every
tool, wrong codes refused, and no code in a log record."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI
from mcp_client import answer, refusal, serving, session_with_key

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app(memory: Memory) -> FastAPI:
    for person in ("alice", "alice-web", "bob"):
        memory.add(f"{person} says hello", user=person, thread="hello", bot="b")
    return create_app(memory, llm=ScriptedLLM())


async def test_a_person_links_their_mcp_identity_both_ways_and_unlinks(app, memory, caplog):
    caplog.set_level(logging.DEBUG)
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        made = answer(await call("link_code", {}))
        memory.link_with_code(made["code"], user="alice-web", bot="b")
        linked = answer(await call("linked", {}))
        split = answer(await call("unlink", {}))
        web_code = memory.link_code(user="alice-web", bot="b").code
        entered = answer(await call("link_with_code", {"code": web_code.lower()}))
        wrong = refusal(await call("link_with_code", {"code": "ZZZZ-ZZZZ"}))

    assert (made["bot"], made["user"]) == ("b", "alice") and made["expires_at"]
    assert linked["linked"] == ["alice", "alice-web"]
    assert split["linked"] == ["alice"]
    assert entered["linked"] == ["alice", "alice-web"]
    assert "not valid" in wrong
    # The server's records: the SDK's client, run by this test, logs what it sends.
    server = [record for record in caplog.records if not record.name.startswith("mcp.client")]
    logged = "\n".join(record.getMessage() for record in server)
    assert "link_with_code" in logged  # the server's records were read
    for code in (made["code"], web_code):
        assert code not in logged and code.lower() not in logged


async def test_a_person_key_links_only_its_own_identity(app, memory):
    key = create_key(memory, bot="b", user="bob").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        someone_else = refusal(await session.call_tool("link_code", {"user": "alice"}))
        elsewhere = refusal(await session.call_tool("linked", {"bot": "other"}))
    assert "only as its own person" in someone_else
    assert "no bot named" in elsewhere


async def test_a_bot_key_names_the_person_it_links(app, memory):
    key = create_key(memory, bot="b").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        unnamed = refusal(await session.call_tool("link_code", {}))
        made = answer(await session.call_tool("link_code", {"user": "alice"}))
        entered = answer(
            await session.call_tool("link_with_code", {"code": made["code"], "user": "bob"})
        )
    assert "name the person" in unnamed
    assert entered["linked"] == ["alice", "bob"]

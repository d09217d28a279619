"""MCP with the SDK's own client over both transports: streamable HTTP at ``/mcp`` in process
(``httpx2.ASGITransport``, the app's lifespan running) with person, bot, admin and bad keys;
and ``membot mcp`` over stdio, a real subprocess, calling every tool once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp_client import BASE_URL, answer, refusal, serving, session_with_key

from membot import Memory, ScriptedLLM, StoreError
from membot.server import create_app
from membot.service.keys import create_key, revoke_key

pytestmark = pytest.mark.anyio

TOOLS = {"remember", "recall", "search", "history", "forget", "end_thread", "my_memory",
         "forget_line", "correct_memory", "link_code", "link_with_code", "linked",
         "unlink"}  # fmt: skip
# Starting `membot mcp` imports the SDK and membot (about 3 s, far more on a busy CI runner);
# the first embedding loads the model.
STDIO_SECONDS = 120


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def texts(lines: list[dict[str, Any]]) -> list[str]:
    return [line["text"] for line in lines]


@pytest.fixture
def llm() -> ScriptedLLM:
    return ScriptedLLM()


@pytest.fixture
def app(memory: Memory, llm: ScriptedLLM) -> FastAPI:
    return create_app(memory, llm=llm)


async def test_the_tools_are_listed_with_their_results_and_hints(app, memory):
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert set(tools) == TOOLS
    assert all(tool.output_schema for tool in tools.values())
    assert tools["forget"].input_schema["required"] == ["confirm"]
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["recall"].annotations.read_only_hint is True
    remember_arguments = set(tools["remember"].input_schema["properties"])
    assert remember_arguments == {"text", "thread", "role", "user", "bot"}


async def test_a_client_configured_with_a_trailing_slash_is_served(app, memory):
    """The server redirects no path to its slash-less form (a browser would repeat a DELETE
    there), so /mcp/ is served as /mcp is."""
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key, "/mcp/") as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS


async def test_a_person_key_uses_every_tool_on_its_own_memory(app, memory, llm):
    key = create_key(memory, bot="b", user="alice").secret
    # Undated: membot dates it by the thread (a point must fall within the thread's days).
    llm.enqueue(json.dumps({"points": ["Alice loves green tea"], "categories": []}))
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        stored = answer(await call("remember", {"text": "I love green tea", "thread": "t1"}))
        await call("remember", {"text": "Green tea it is", "thread": "t1", "role": "bot"})
        await call("remember", {"text": "My bike has a flat tyre", "thread": "t2"})
        lines_before = memory.count_lines()
        recalled = answer(await call("recall", {"text": "which tea do I love?"}))
        lines_after_recall = memory.count_lines()
        found = answer(await call("search", {"query": "flat tyre", "k": 1}))
        one_thread = answer(await call("history", {"thread": "t1"}))
        everything = answer(await call("history", {}))
        ended = answer(await call("end_thread", {"thread": "t1", "remember": True}))
        refused = refusal(await call("forget", {"confirm": False, "thread": "t2"}))
        forgot = answer(await call("forget", {"confirm": True, "thread": "t2"}))
        later = answer(await call("recall", {"text": "Alice loves green tea", "thread": "t3"}))

    assert (stored["bot"], stored["user"]) == ("b", "alice")
    assert stored["line"]["thread"] == "t1" and stored["line"]["seq"] == 1
    assert stored["line"]["role"] == "human"
    (block,) = recalled["blocks"]
    assert block["thread"] == "t1" and block["score"] > 0 and block["matched_seqs"] == [1]
    assert block["person"] == "alice" and recalled["summaries"] == []
    assert texts(block["lines"]) == ["I love green tea", "Green tea it is"]
    assert lines_after_recall == lines_before  # recall stores nothing
    (match,) = found["matches"]
    assert (match["thread"], match["text"]) == ("t2", "My bike has a flat tyre")
    assert match["score"] > 0
    assert texts(one_thread["lines"]) == ["I love green tea", "Green tea it is"]
    assert [thread["thread"] for thread in everything["threads"]] == ["t1", "t2"]
    assert len(everything["lines"]) == 3
    assert ended["decision"] == "kept" and "green tea" in ended["remembered"]
    assert memory.thread_state(bot="b", user="alice", thread="t1").ended_at is not None
    assert "confirm: true" in refused
    assert forgot["removed"]["lines"] == 1
    (kept,) = later["summaries"]  # what was kept is recalled too, not only lines
    assert (kept["thread"], kept["person"]) == ("t1", "alice") and "green tea" in kept["text"]
    left = memory.history(user="alice", bot="b")
    assert [line.text for line in left] == ["I love green tea", "Green tea it is"]


async def test_a_person_key_never_reaches_another_persons_text(app, memory):
    memory.add("The safe code is 4321", user="bob", thread="secrets", bot="b")
    memory.add("The safe code is 9876", user="alice", thread="elsewhere", bot="other")
    memory.add("My safe is blue", user="alice", thread="home", bot="b")
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        answers = [
            answer(await call("search", {"query": "safe code"})),
            answer(await call("recall", {"text": "what is the safe code?"})),
            answer(await call("history", {})),
        ]
        refusals = [
            refusal(await call("search", {"query": "safe code", "user": "bob"})),
            refusal(await call("history", {"user": "bob"})),
            refusal(await call("history", {"thread": "secrets"})),
            refusal(await call("recall", {"text": "safe code", "bot": "other"})),
            refusal(await call("forget", {"confirm": True, "user": "bob"})),
        ]

    said = json.dumps(answers) + " ".join(refusals)
    assert "My safe is blue" in said
    assert "4321" not in said and "9876" not in said
    assert "only as its own person" in refusals[0]
    assert "no bot named 'other'" in refusals[3]
    assert [line.text for line in memory.history(user="bob", bot="b")] == ["The safe code is 4321"]


async def test_concurrent_calls_of_two_people_each_see_their_own(app, memory):
    """The key reaches the tools through a context variable: calls in flight together must
    not see each other's."""
    for user in ("alice", "bob"):
        memory.add(f"{user} was here", user=user, thread="t", bot="b")
    seen: dict[str, set[str]] = {"alice": set(), "bob": set()}

    async def look_as(user: str, transport: httpx2.ASGITransport) -> None:
        key = create_key(memory, bot="b", user=user).secret
        async with session_with_key(transport, key) as session:
            for _ in range(5):
                said = answer(await session.call_tool("search", {"query": "who was here"}))
                seen[user].update(texts(said["matches"]))

    async with serving(app) as transport, anyio.create_task_group() as group:
        group.start_soon(look_as, "alice", transport)
        group.start_soon(look_as, "bob", transport)

    assert seen == {"alice": {"alice was here"}, "bob": {"bob was here"}}


async def test_a_bot_key_names_the_person_within_its_bot(app, memory):
    memory.add("Bob likes chess", user="bob", thread="t", bot="b")
    key = create_key(memory, bot="b").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        unnamed = refusal(await call("search", {"query": "chess"}))
        found = answer(await call("search", {"query": "chess", "user": "bob"}))
        stored = answer(await call("remember", {"text": "Hi", "thread": "t", "user": "carol"}))
        other_bot = refusal(await call("history", {"user": "bob", "bot": "c"}))

    assert "name the person" in unnamed
    assert found["user"] == "bob" and texts(found["matches"]) == ["Bob likes chess"]
    assert (stored["bot"], stored["user"]) == ("b", "carol")
    assert "no bot named 'c'" in other_bot


async def test_an_admin_key_names_the_bot_and_the_person(app, memory):
    memory.add("Dana plays the cello", user="dana", thread="t", bot="music")
    key = create_key(memory, admin=True).secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        no_bot = refusal(await call("history", {"user": "dana"}))
        no_user = refusal(await call("history", {"bot": "music"}))
        history = answer(await call("history", {"bot": "music", "user": "dana"}))
        typo = refusal(await call("remember", {"bot": "musc", "user": "dana", "text": "hi",
                                               "thread": "t"}))  # fmt: skip

    assert "name the bot" in no_bot and "name the person" in no_user
    assert texts(history["lines"]) == ["Dana plays the cello"]
    assert typo.endswith("no bot named 'musc'") and memory.bots() == ["music"]


async def test_membot_errors_reach_the_client_with_their_message(app, memory, monkeypatch):
    key = create_key(memory, bot="b", user="alice").secret

    def busy(*args, **kwargs):
        raise StoreError(f"the store at {memory.location} failed: busy")

    async with serving(app) as transport, session_with_key(transport, key) as session:
        unknown_thread = refusal(await session.call_tool("history", {"thread": "nope"}))
        nothing_to_end = refusal(
            await session.call_tool("end_thread", {"thread": "nope", "remember": False})
        )
        no_confirm = refusal(await session.call_tool("forget", {"thread": "nope"}))
        monkeypatch.setattr(memory, "search", busy)
        store_down = refusal(await session.call_tool("search", {"query": "x"}))

    assert "'alice' has no thread 'nope'" in unknown_thread
    assert "has no thread 'nope'" in nothing_to_end
    assert "confirm" in no_confirm
    # Where the store is stays on the server.
    assert store_down == "Error executing tool search: the store failed: busy"
    # Also when the store fails while the key is checked, before MCP reads the request.
    monkeypatch.setattr("membot.server.auth.authenticate", busy)
    async with (
        serving(app) as transport,
        httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http,
    ):
        gate = await http.post("/mcp", json={}, headers={"Authorization": f"Bearer {key}"})
    assert gate.status_code == 503 and memory.location not in gate.text
    assert gate.json()["error"]["message"] == "the store failed: busy"


async def test_arguments_a_tool_cannot_take_are_named_in_a_sentence(app, memory):
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        empty = refusal(await session.call_tool("remember", {"thread": "t", "text": ""}))
        missing = refusal(await session.call_tool("remember", {"thread": "t"}))
        wrong = refusal(await session.call_tool("history", {"thread": 5}))
        # A NUL in a name reached the store: on PostgreSQL a 503, "the store failed".
        nul = refusal(await session.call_tool("history", {"thread": "a\x00b"}))

    assert nul.startswith("Error executing tool history: thread: Value error, holds a NUL")
    assert empty == ("Error executing tool remember: text: String should have at least 1 character")
    assert missing == "Error executing tool remember: text: Field required"
    assert wrong == "Error executing tool history: thread: Input should be a valid string"
    assert memory.history(user="alice") == []


async def test_requests_without_an_active_key_get_the_servers_401(app, memory):
    revoked = create_key(memory, bot="b", user="alice")
    revoke_key(memory, revoked.key.id)
    async with serving(app) as transport:
        async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as raw:
            missing = await raw.post("/mcp", json={})
            unknown = await raw.post("/mcp", json={}, headers={"Authorization": "Bearer mb_no"})
            refused = await raw.post(
                "/mcp", json={}, headers={"Authorization": f"Bearer {revoked.secret}"}
            )
        with pytest.raises(ExceptionGroup) as caught:
            async with session_with_key(transport, "mb_not_a_key"):
                pass

    for response in (missing, unknown, refused):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert set(response.json()) == {"error"}
        assert response.json()["error"]["type"] == "unauthorized"
    assert "revoked" in refused.json()["error"]["message"]
    assert caught.group_contains(MCPError, depth=None)


async def test_a_key_past_its_rate_limit_gets_429(memory):
    app = create_app(memory, llm=ScriptedLLM(), rate_limit=1)
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    async with (
        serving(app) as transport,
        httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as raw,
    ):
        await raw.post("/mcp", json={}, headers=headers)
        limited = await raw.post("/mcp", json={}, headers=headers)

    assert limited.status_code == 429 and limited.headers["retry-after"]
    assert limited.json()["error"]["type"] == "rate_limited"


async def test_the_app_serves_mcp_again_after_a_restart(app, memory):
    """Each start runs a fresh session manager (one runs only once): tests and reloads
    start the same app more than once."""
    key = create_key(memory, bot="b", user="alice").secret
    for _ in range(2):
        async with serving(app) as transport, session_with_key(transport, key) as session:
            answer(await session.call_tool("history", {}))


@pytest.mark.slow
async def test_membot_mcp_serves_every_tool_over_stdio(tmp_path: Path, minilm, script):
    """One real `membot mcp` process, as an MCP client starts it; the store is checked
    afterwards through Memory."""
    db = tmp_path / "stdio.db"
    points = {"points": ["Uma grows tomatoes"], "categories": ["hobbies"]}  # dated by the thread
    command = ["-m", "membot", "--db", str(db), "--llm", script(json.dumps(points))]
    parameters = StdioServerParameters(
        command=sys.executable,
        args=[*command, "mcp", "--bot", "garden", "--user", "uma"],
        env=subprocess_environment(minilm),
    )
    with (tmp_path / "server.err").open("w") as server_log, anyio.fail_after(STDIO_SECONDS):
        async with (
            stdio_client(parameters, errlog=server_log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            results = await call_every_tool(session)

    assert results["remembered"]["user"] == "uma"
    assert texts(results["recalled"]["blocks"][0]["lines"])[0] == "I grow tomatoes on the balcony"
    assert results["found"]["matches"][0]["text"] == "The car needs new brakes"
    assert [thread["thread"] for thread in results["history"]["threads"]] == ["garden", "car"]
    assert results["ended"]["decision"] == "kept"
    assert results["mine"]["lines"][0]["text"] == "I grow tomatoes on the balcony"
    assert "tomatoes" in results["mine"]["key_points"][0]["text"]
    assert len(results["code"]["code"].replace("-", "")) == 8
    assert results["linked"]["linked"] == ["uma"]
    assert "only as its own person" in results["someone_else"]
    assert "confirm: true" in results["unconfirmed"]
    memory = Memory(db, embedder=minilm)
    try:
        said = memory.history(user="uma", bot="garden")
        assert [(line.thread, line.text) for line in said] == [
            ("garden", "I grow tomatoes on the balcony"),
            ("garden", "Tomatoes love the sun"),
        ]
        state = memory.thread_state(bot="garden", user="uma", thread="garden")
        assert state is not None and state.ended_at is not None
        assert "tomatoes" in memory.summaries(user="uma", bot="garden")[0].text
    finally:
        memory.close()


async def call_every_tool(session: ClientSession) -> dict[str, Any]:
    call = session.call_tool
    garden = {"thread": "garden"}
    remembered = answer(await call("remember", {"text": "I grow tomatoes on the balcony"} | garden))
    await call("remember", {"text": "Tomatoes love the sun", "role": "bot"} | garden)
    await call("remember", {"text": "The car needs new brakes", "thread": "car"})
    return {
        "remembered": remembered,
        "recalled": answer(await call("recall", {"text": "where do I grow tomatoes?"})),
        "found": answer(await call("search", {"query": "car brakes", "k": 1})),
        "history": answer(await call("history", {})),
        "ended": answer(await call("end_thread", {"remember": True} | garden)),
        "mine": answer(await call("my_memory", {"query": "tomatoes"})),
        "code": answer(await call("link_code", {})),
        "linked": answer(await call("linked", {})),
        "someone_else": refusal(await call("history", {"user": "vic"})),
        "unconfirmed": refusal(await call("forget", {"confirm": False, "thread": "car"})),
        "forgot": answer(await call("forget", {"confirm": True, "thread": "car"})),
    }


def subprocess_environment(minilm) -> dict[str, str]:
    """This test's environment (its private home and cache, PYTHONPATH), with the session's
    MiniLM cache folder, where the model was converted to ONNX once, so the server does not
    convert it again (seconds of torch)."""
    environment = dict(os.environ)
    onnx_path = getattr(minilm, "onnx_path", None)
    if onnx_path is not None:
        environment["MEMBOT_CACHE_DIR"] = str(onnx_path.parent.parent)
    return environment


async def test_a_get_is_told_there_is_no_stream_and_the_server_names_its_version(app, memory):
    """GET /mcp opened an event stream that never sent anything (a client waited forever);
    the server answered the handshake with an empty version."""
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport:
        async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            got = await http.get("/mcp", headers={"Authorization": f"Bearer {key}"})
        async with session_with_key(transport, key) as session:
            version = (await session.initialize()).server_info.version
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert "keeps no stream open" in got.json()["error"]["message"]
    assert version and version != "unknown"


async def test_a_person_sees_corrects_and_deletes_their_memory_with_confirmation(app, memory):
    """my_memory shows the ids; forget_line and correct_memory say what would change, and
    change it only with confirm: true; another person's ids are not found."""
    memory.add("My cat is called Miso", user="alice", thread="cats", bot="b")
    memory.add("I row on Sundays", user="alice", thread="sport", bot="b")
    (bob_line,) = [memory.add("My safe code is 4321", user="bob", thread="s", bot="b")]
    points = "- 2026-05-01: alice said: My cat is called Miso.\n- 2026-05-01: alice said: I row."
    summary = memory.add_summary(bot="b", user="alice", thread="cats", text=points)
    key = create_key(memory, bot="b", user="alice").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        seen = answer(await call("my_memory", {}))
        searched = answer(await call("my_memory", {"query": "sundays"}))
        row_id = searched["lines"][0]["id"]
        asked = answer(await call("forget_line", {"line_id": row_id}))
        kept_meanwhile = len(memory.history(user="alice"))
        done = answer(await call("forget_line", {"line_id": row_id, "confirm": True}))
        fix = {"summary_id": summary.id, "number": 0, "text": "My cat is called Luna."}
        preview = answer(await call("correct_memory", fix))
        unchanged = memory.summaries(user="alice")[0].text
        corrected = answer(await call("correct_memory", fix | {"confirm": True}))
        drop = {"summary_id": summary.id, "number": 1, "forget": True, "confirm": True}
        dropped = answer(await call("correct_memory", drop))
        both = refusal(await call("correct_memory", fix | {"forget": True}))
        others = refusal(await call("forget_line", {"line_id": bob_line.id, "confirm": True}))

    assert [line["text"] for line in seen["lines"]] == ["My cat is called Miso", "I row on Sundays"]
    assert [point["number"] for point in seen["key_points"]] == [0, 1]
    assert asked["done"] is False and asked["forgets"]["text"] == "I row on Sundays"
    assert kept_meanwhile == 2 and done["done"] is True
    assert [line.text for line in memory.history(user="alice")] == ["My cat is called Miso"]
    assert preview["done"] is False and preview["after"] == "My cat is called Luna."
    assert "Miso" in unchanged
    assert corrected["done"] is True and corrected["before"]["text"].endswith("Miso.")
    assert dropped["after"] is None
    (left,) = memory.key_points(user="alice")
    assert left.text == "My cat is called Luna." and len(left.corrections) == 1
    assert "either `text`" in both
    assert "no line" in others and "4321" not in others
    assert len(memory.history(user="bob")) == 1

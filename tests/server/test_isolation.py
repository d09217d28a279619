"""Isolation as a property: nothing a person said reaches anyone else, through any channel,
unless their bot shares memory across people or the two linked themselves as one person of
that bot (with a link code); and no key acts outside its scope.

Hypothesis draws worlds (isolation_world.py): bots sharing memory or not, with any recall
strategy; people; threads; lines of every role; kept summaries; a document per bot; keys of
every scope, some revoked or expired. Each person's texts carry a marker word of their own,
so a leak is a marker where it may not be. The properties then read each drawn person's
memory through the Python API (on SQLite and PostgreSQL), REST, the OpenAI-compatible
endpoint (the real ``openai`` client) and MCP (the SDK's client) — turns with their whole
trace, the prompt the model got and what its citations kept, search, recall, history,
memories, endings and every error — before and after the bots' sharing is changed; and they
try every key on bots and people in and out of its scope, through every route that reads or
changes a person's memory or a bot, checking the refusal and that the store is unchanged; and a
person's key names every other person's line and key point ids on its own memory: 404.

The scripted model cites every id the store could have, so a citation that is not one of
the turn's own hints would show. The app runs in process (ASGI transports, no socket).
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, event, given, note, settings
from isolation_world import (
    QUERY,
    Built,
    KeyPlan,
    World,
    assert_no_leak,
    build,
    citing_everything,
    expected,
    fingerprint,
    worlds,
)
from mcp import ClientSession
from mcp_client import BASE_URL, answer, refusal, serving, session_with_key

from membot import Bot, Memory, ScriptedLLM, utc_now
from membot.server import create_app
from membot.service import create_key

# Bounded: each example builds a store and reads it a few dozen times; these counts keep
# the file's properties to about two minutes on 2 busy cores. `deadline=None`: an example's
# time varies with the machine's load, and a slow example is not a wrong one.
EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    # make_embedder is a class, the same for every example; a store is made per example.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def points_reply(marker: str) -> str:
    """The scripted model's key points when a thread ends: one of the person's own lines."""
    return json.dumps({"points": [f"{utc_now().date()}: {QUERY} {marker}"], "categories": []})


# -- the Python API --------------------------------------------------------------------------


@contextmanager
def store_location(postgres_server: str | None = None) -> Iterator[str]:
    """A fresh store for one example: a SQLite file, or a new database on the session's
    PostgreSQL server (dropped after)."""
    if postgres_server is None:
        with tempfile.TemporaryDirectory(prefix="membot-isolation-") as folder:
            yield str(Path(folder) / "store.db")
        return
    import psycopg

    server = postgres_server
    name = f"membot_isolation_{next(DATABASES)}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    try:
        yield server.replace("/postgres?", f"/{name}?")
    finally:
        with psycopg.connect(server, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


DATABASES = itertools.count()


def markers_in(world: World, answer: Any) -> set[str]:
    text = json.dumps(answer, default=str)
    return {marker for marker in world.markers if marker in text}


def set_sharing(memory: Memory, sharing: dict[str, bool]) -> None:
    for bot, share in sharing.items():
        memory.configure_bot(bot, share_across_people=share)


def read_as_person(built: Built, llm: ScriptedLLM, bot: str, user: str) -> dict[str, Any]:
    """Everything the Python API answers acting as ``user`` of ``bot``: a turn and the
    prompt its model got, the reads, and ending a thread with its key points kept."""
    world, memory = built.world, built.memory
    mine = world.marker(bot, user)
    llm.enqueue(citing_everything(memory, f"noted {mine}"))
    turn = Bot(memory, llm, bot).turn(f"{QUERY} {mine}", user=user, thread="t1")
    prompt = llm.history[-1]
    llm.enqueue(points_reply(mine))
    ending = Bot(memory, llm, bot).end_thread(user=user, thread="t1", remember=True)
    return {
        "a turn's whole trace": turn.to_json(),
        "the prompt the model got": prompt,
        "the citations kept": turn.citations,
        "search": memory.search(QUERY, user=user, bot=bot, k=100),
        "recall": memory.preview_recall(QUERY, user=user, bot=bot),
        "recall in a thread": memory.preview_recall(QUERY, user=user, bot=bot, thread="t2"),
        "history": memory.history(user=user, bot=bot),
        "threads": memory.threads(user=user, bot=bot),
        "memories": memory.summaries(user=user, bot=bot),
        "their own memory": memory.person_memory(user=user, bot=bot).to_json(),
        "their own memory searched": memory.person_memory(user=user, bot=bot, query=QUERY),
        "ending a thread": ending.to_json(),
        "the prompt of the ending": llm.history[-1],
    }


def check_python_api(world: World, location: str, embedder: Any) -> None:
    memory = Memory(location, embedder=embedder)
    try:
        built, llm = build(world, memory), ScriptedLLM()
        for sharing in (world.sharing, world.later_sharing):
            set_sharing(memory, sharing)
            for bot, user, _ in world.viewpoints:
                answers = read_as_person(built, llm, bot, user)
                allowed = world.visible(bot, user, sharing)
                for where, answer in answers.items():
                    assert_no_leak(world, answer, allowed, f"{where} as {user!r} of {bot!r}")
                # Not vacuous: the person's own lines are there, and in history only theirs
                # and those of the identities linked with them.
                mine = world.marker(bot, user)
                group = {world.marker(bot, person) for person in world.group(bot, user)}
                assert mine in markers_in(world, answers["history"]) <= group
                assert mine in markers_in(world, answers["search"])
                others = {world.marker(bot, person) for person in world.people} - {mine}
                if markers_in(world, answers["a turn's whole trace"]) & others:
                    event("a turn recalled another person's line (shared memory)")
    finally:
        memory.close()


@EXAMPLES
@given(world=worlds())
def test_the_python_api_keeps_each_person_to_their_own_on_sqlite(world: World, make_embedder):
    note(f"the world: {world!r}")  # Hypothesis prints a composite's value empty
    with store_location() as location:
        check_python_api(world, location, make_embedder())


@settings(EXAMPLES, max_examples=12)
@given(world=worlds())
def test_the_python_api_keeps_each_person_to_their_own_on_postgresql(
    world: World, make_embedder, postgres_server: str
):
    note(f"the world: {world!r}")  # Hypothesis prints a composite's value empty
    with store_location(postgres_server) as location:
        check_python_api(world, location, make_embedder())


# -- REST, the OpenAI-compatible endpoint and MCP ---------------------------------------------


@contextmanager
def built_world(world: World, embedder: Any) -> Iterator[Built]:
    with store_location() as location:
        memory = Memory(location, embedder=embedder)
        try:
            yield build(world, memory)
        finally:
            memory.close()


@asynccontextmanager
async def clients(app: FastAPI) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """An HTTP client of the app in process, and the transport MCP's client takes."""
    async with (
        serving(app) as mcp_transport,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http,
    ):
        yield http, mcp_transport


def viewer_key(memory: Memory, bot: str, user: str, scope: str) -> str:
    scopes = {"admin": {"admin": True}, "bot": {"bot": bot}, "person": {"bot": bot, "user": user}}
    return create_key(memory, **scopes[scope]).secret


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def rest_answers(
    http: httpx.AsyncClient, llm: ScriptedLLM, built: Built, key: str, bot: str, user: str
) -> dict[str, Any]:
    memory, mine = built.memory, built.world.marker(bot, user)
    base, person = f"/v1/bots/{bot}", f"/v1/bots/{bot}/users/{user}"
    said = {"user": user, "text": f"{QUERY} {mine}"}
    answers: dict[str, httpx.Response] = {}
    llm.enqueue(citing_everything(memory, f"noted {mine}"))
    answers["a turn"] = await http.post(
        f"{base}/turns", json=said | {"thread": "t1"}, headers=bearer(key)
    )
    llm.enqueue(citing_everything(memory, f"streamed {mine}"))
    answers["a streamed turn"] = await http.post(
        f"{base}/turns", json=said | {"thread": "t2", "stream": True}, headers=bearer(key)
    )
    params = {"user": user, "q": QUERY, "k": 100}
    answers["search"] = await http.get(f"{base}/search", params=params, headers=bearer(key))
    answers["threads"] = await http.get(f"{person}/threads", headers=bearer(key))
    # A linked identity's threads are listed too; a thread's lines are read by its own person.
    for thread in answers["threads"].json()["threads"]:
        if thread["user"] != user:
            continue
        name = thread["thread"]
        answers[f"lines of {name}"] = await http.get(
            f"{person}/threads/{name}/lines", headers=bearer(key)
        )
    answers["memories"] = await http.get(f"{person}/memories", headers=bearer(key))
    answers["their own memory"] = await http.get(f"{person}/memory", headers=bearer(key))
    llm.enqueue(points_reply(mine))
    answers["ending a thread"] = await http.post(
        f"{person}/threads/t1/end", json={"remember": True}, headers=bearer(key)
    )
    for where, response in answers.items():
        assert response.status_code == 200, (where, response.text)
    assert mine in response_markers(built.world, answers["search"])
    return {f"REST {where}": response.text for where, response in answers.items()}


def response_markers(world: World, response: httpx.Response) -> set[str]:
    return {marker for marker in world.markers if marker in response.text}


async def openai_answers(
    http: httpx.AsyncClient, llm: ScriptedLLM, built: Built, key: str, bot: str, user: str
) -> dict[str, Any]:
    memory, mine = built.memory, built.world.marker(bot, user)
    client = openai_client(http, key)
    asked = {
        "model": bot,
        "messages": [{"role": "user", "content": f"{QUERY} {mine}"}],
        "user": user,
        "metadata": {"thread": "t1"},
    }
    llm.enqueue(citing_everything(memory, f"noted {mine}"))
    completion = await client.chat.completions.create(**asked)
    llm.enqueue(citing_everything(memory, f"streamed {mine}"))
    stream = await client.chat.completions.create(**asked, stream=True)
    chunks = [chunk.to_json() async for chunk in stream]
    return {"OpenAI completion": completion.to_json(), "OpenAI stream": chunks}


def openai_client(http: httpx.AsyncClient, key: str) -> openai.AsyncOpenAI:
    # No retries: a refused request must fail once, and a turn is never sent twice.
    return openai.AsyncOpenAI(
        base_url=f"{BASE_URL}/v1", api_key=key, http_client=http, max_retries=0
    )


async def mcp_answers(
    session: ClientSession, llm: ScriptedLLM, built: Built, bot: str, user: str
) -> dict[str, Any]:
    mine = built.world.marker(bot, user)
    person = {"bot": bot, "user": user}
    said = {"text": f"{QUERY} {mine}", "thread": "t2"}
    call = session.call_tool
    results = {
        "remember": await call("remember", said | person),
        "recall": await call("recall", {"text": QUERY} | person),
        "recall in a thread": await call("recall", {"text": QUERY, "thread": "t1"} | person),
        "search": await call("search", {"query": QUERY, "k": 100} | person),
        "history": await call("history", person),
        "history of a thread": await call("history", {"thread": "t1"} | person),
    }
    llm.enqueue(points_reply(mine))
    results["end_thread"] = await call("end_thread", {"thread": "t2", "remember": True} | person)
    return {f"MCP {where}": answer(result) for where, result in results.items()}


async def read_through_every_channel(built: Built) -> None:
    """Each person's memory read through every channel, with the bots' sharing as drawn,
    then changed (a thread's buffer may hold blocks recalled while its bot shared)."""
    world, memory, llm = built.world, built.memory, ScriptedLLM()
    async with clients(create_app(memory, llm=llm)) as (http, mcp_transport):
        for bot, user, scope in world.viewpoints:
            key = viewer_key(memory, bot, user, scope)
            # One MCP session a person: the SDK's client checks each tool's output schema
            # once a session, which costs more than the calls.
            async with session_with_key(mcp_transport, key) as session:
                for sharing in (world.sharing, world.later_sharing):
                    set_sharing(memory, sharing)
                    answers = await rest_answers(http, llm, built, key, bot, user)
                    answers |= await openai_answers(http, llm, built, key, bot, user)
                    answers |= await mcp_answers(session, llm, built, bot, user)
                    allowed = world.visible(bot, user, sharing)
                    for where, answer in answers.items():
                        assert_no_leak(world, answer, allowed, f"{where} as {user!r} of {bot!r}")


@settings(EXAMPLES, max_examples=25)
@given(world=worlds())
def test_every_channel_shows_a_person_only_what_they_may_see(world: World, make_embedder):
    note(f"the world: {world!r}")  # Hypothesis prints a composite's value empty
    with built_world(world, make_embedder()) as built:
        anyio.run(read_through_every_channel, built)


# -- keys --------------------------------------------------------------------------------------

REFUSED_WITH = {"unauthorized": 401, "other bot": 404, "other person": 403, "not a builder": 403}


@dataclass(frozen=True)
class Attempt:
    """One REST request acting as a person of a bot (``personal``) or on the bot itself."""

    method: str
    path: str
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    writes: bool = False
    builder: bool = False
    personal: bool = True


def rest_attempts(bot: str, user: str) -> list[Attempt]:
    """Every route that reads or changes a person's memory, or the bot."""
    base, person = f"/v1/bots/{bot}", f"/v1/bots/{bot}/users/{user}"
    said = {"user": user, "thread": "t1", "text": QUERY}
    return [
        Attempt("GET", f"{base}/search", params={"user": user, "q": QUERY}),
        Attempt("GET", f"{person}/threads"),
        Attempt("GET", f"{person}/threads/t1/lines"),
        Attempt("GET", f"{person}/memories"),
        Attempt("GET", f"{person}/memory", params={"q": QUERY}),
        Attempt("DELETE", f"{person}/lines/1", writes=True),
        Attempt("DELETE", f"{person}/key-points/1/0", writes=True),
        Attempt("PUT", f"{person}/key-points/1/0", json={"text": QUERY}, writes=True),
        Attempt("GET", base, personal=False),
        Attempt("GET", f"{base}/users", personal=False),
        Attempt("GET", f"{base}/documents", personal=False),
        Attempt("GET", f"{base}/profile", builder=True, personal=False),
        Attempt("POST", f"{base}/turns", json=said, writes=True),
        Attempt("POST", f"{base}/tool-results", json=said | {"name": "probe"}, writes=True),
        Attempt("POST", f"{person}/threads/t1/end", json={"remember": False}, writes=True),
        Attempt("DELETE", f"{person}/threads/t1", writes=True),
        Attempt("DELETE", person, writes=True),
        Attempt(
            "PATCH",
            base,
            json={"share_across_people": True},
            writes=True,
            builder=True,
            personal=False,
        ),
    ]


async def try_rest(
    http: httpx.AsyncClient, world: World, plan: KeyPlan, key: str, bot: str, user: str
) -> None:
    for attempt in rest_attempts(bot, user):
        as_user = user if attempt.personal else None
        outcome = expected(plan, bot, as_user, builder=attempt.builder)
        if outcome == "ok" and attempt.writes:
            continue  # allowed: the channels property covers what it answers
        response = await http.request(
            attempt.method,
            attempt.path,
            json=attempt.json,
            params=attempt.params,
            headers=bearer(key),
        )
        where = f"REST {attempt.method} {attempt.path} with {plan}"
        if outcome == "ok":
            assert response.status_code in (200, 404), (where, response.text)
            reach = world.visible(bot, as_user or plan.user, world.sharing)
            assert_no_leak(world, response.text, reach, where)
        else:
            assert response.status_code == REFUSED_WITH[outcome], (where, response.text)
            assert_no_leak(world, response.text, (), where)


async def try_openai(
    http: httpx.AsyncClient, world: World, plan: KeyPlan, key: str, targets
) -> None:
    client = openai_client(http, key)
    if plan.state != "active":
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
    else:
        listed = {model.id async for model in client.models.list()}
        assert listed == ({plan.bot} if plan.bot else set(world.bots)), plan
    refusals = {
        "unauthorized": openai.AuthenticationError,
        "other bot": openai.NotFoundError,
        "other person": openai.PermissionDeniedError,
    }
    for bot, user, _ in targets:
        outcome = expected(plan, bot, user)
        if outcome == "ok":
            continue  # a turn: the channels property covers what it answers
        with pytest.raises(refusals[outcome]) as refused:
            await client.chat.completions.create(
                model=bot, messages=[{"role": "user", "content": QUERY}], user=user
            )
        where = f"OpenAI completion as {user!r} of {bot!r} with {plan}"
        assert_no_leak(world, [str(refused.value), refused.value.body], (), where)


MCP_REFUSALS = {"other bot": "no bot named", "other person": "only as its own person"}


async def try_mcp(transport: Any, world: World, plan: KeyPlan, key: str, targets) -> None:
    if plan.state != "active":
        async with httpx2.AsyncClient(transport=transport, base_url=BASE_URL) as raw:
            response = await raw.post("/mcp", json={}, headers=bearer(key))
        assert response.status_code == 401, response.text
        assert_no_leak(world, response.text, (), f"MCP with {plan}")
        return
    async with session_with_key(transport, key) as session:
        for bot, user, _ in targets:
            outcome = expected(plan, bot, user)
            person = {"bot": bot, "user": user}
            calls = {
                "search": ({"query": QUERY}, False),
                "recall": ({"text": QUERY}, False),
                "history": ({}, False),
                "remember": ({"text": QUERY, "thread": "t1"}, True),
                "end_thread": ({"thread": "t1", "remember": False}, True),
                "forget": ({"confirm": True}, True),
                "my_memory": ({"query": QUERY}, False),
                "forget_line": ({"line_id": 1, "confirm": True}, True),
                "correct_memory": (
                    {"summary_id": 1, "number": 0, "text": QUERY, "confirm": True},
                    True,
                ),
            }
            for tool, (arguments, writes) in calls.items():
                if outcome == "ok" and writes:
                    continue
                result = await session.call_tool(tool, arguments | person)
                where = f"MCP {tool} as {user!r} of {bot!r} with {plan}"
                if outcome == "ok":
                    reach = world.visible(bot, user, world.sharing)
                    assert_no_leak(world, answer(result), reach, where)
                else:
                    assert MCP_REFUSALS[outcome] in refusal(result), where
                    assert_no_leak(world, result.model_dump(), (), where)


async def try_others_ids(http: httpx.AsyncClient, built: Built, plan: KeyPlan, key: str) -> None:
    """A person's key, on its own person's memory, naming the id of a line or kept summary
    of anyone else: 404, as for an id that never was, and nothing of theirs in the answer."""
    world, memory = built.world, built.memory
    if plan.state != "active" or plan.bot is None or plan.user is None:
        return
    own = f"/v1/bots/{plan.bot}/users/{plan.user}"
    for person in world.people:
        # Its own, and those of the people linked with it by its bot, are its own to change.
        own_people = world.group(plan.bot, plan.user)
        lines = [line.id for line in memory.history(user=person)
                 if line.bot != plan.bot or line.person not in own_people]  # fmt: skip
        summaries = [summary.id for summary in memory.summaries(user=person)
                     if summary.bot != plan.bot or summary.person not in own_people]  # fmt: skip
        tries = [("DELETE", f"{own}/lines/{line_id}", None) for line_id in lines]
        for summary_id in summaries:
            tries += [("DELETE", f"{own}/key-points/{summary_id}/0", None),
                      ("PUT", f"{own}/key-points/{summary_id}/0", {"text": QUERY})]  # fmt: skip
        for method, path, body in tries:
            response = await http.request(method, path, json=body, headers=bearer(key))
            where = f"REST {method} {path} with {plan}"
            assert response.status_code == 404, (where, response.text)
            assert_no_leak(world, response.text, (), where)


async def try_every_key(built: Built) -> None:
    world, memory = built.world, built.memory
    async with clients(create_app(memory, llm=ScriptedLLM())) as (http, mcp_transport):
        before = fingerprint(world, memory)
        for plan, key in built.secrets:
            for bot, user, _ in world.viewpoints:
                await try_rest(http, world, plan, key, bot, user)
            await try_others_ids(http, built, plan, key)
            await try_openai(http, world, plan, key, world.viewpoints)
            await try_mcp(mcp_transport, world, plan, key, world.viewpoints)
        assert fingerprint(world, memory) == before, "a refused request changed the store"


@settings(EXAMPLES, max_examples=25)
@given(world=worlds())
def test_no_key_acts_outside_its_scope(world: World, make_embedder):
    note(f"the world: {world!r}")  # Hypothesis prints a composite's value empty
    with built_world(world, make_embedder()) as built:
        anyio.run(try_every_key, built)

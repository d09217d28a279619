"""MCP (the Model Context Protocol) over membot's memory: the same tools over stdio
(``membot mcp``) and over streamable HTTP at ``/mcp`` on the server, behind the same keys.

Each tool is a thin call into the public API and answers a structured result. Whom a call
acts for is the :class:`Caller`: over stdio the person the command names (whoever runs a
local process owns the store), over HTTP the scope of the request's Bearer key. A person
key, and the stdio process, act only as their own person; bot and admin keys name the person
(``user``), and an admin key the bot too (``bot``).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from membot import Block, Ending, Line, Match, MembotError, NotFoundError, Summary, ThreadInfo, iso
from membot.server import auth
from membot.server.errors import (
    ApiError,
    error_response,
    field_path,
    refusal_of,
    without_location,
)
from membot.server.mcp_arguments import BotArgument, NoNul, UserArgument
from membot.server.mcp_links import LinkTools
from membot.server.mcp_memory import PersonMemoryTools
from membot.server.service import MAX_LINE_CHARS, MAX_NAME_CHARS, Service
from membot.service import ApiKey

INSTRUCTIONS = """\
membot remembers every line of a conversation and recalls the earlier lines that matter.
`remember` stores a line in a thread; `recall` shows what a turn saying a text would recall
(nothing is stored); `search` finds stored lines; `history` lists threads and lines;
`end_thread` ends a thread (and, if the person agreed, keeps its key points); `forget`
removes lines for good and needs confirm: true. `my_memory` shows the person everything kept
about them; `forget_line` deletes one line and `correct_memory` corrects or deletes one kept
key point: without confirm: true they only say what would change. `link_code` gives a code
that `link_with_code` (or the web app, or a text LINK <code>) enters on another channel within
10 minutes, making both one person; `linked` lists them, `unlink` splits them again. Leave
`user` and `bot` out unless your key is a bot key (name the person) or an admin key (name the
bot and the person)."""

MCP_PATH = "/mcp"
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
ERASES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

Params = ParamSpec("Params")
Result = TypeVar("Result")


Text = Annotated[str, Field(min_length=1, max_length=MAX_LINE_CHARS)]
ThreadName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), NoNul]


# -- who is asking ----------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Whom an MCP connection may act for, as an API key's scope: ``bot`` None is every bot
    (an admin key), ``user`` None every person of the bot (a bot key)."""

    bot: str | None = None
    user: str | None = None

    @classmethod
    def of_key(cls, key: ApiKey) -> Caller:
        return cls(key.bot, key.user)


@dataclass(frozen=True)
class Person:
    """The one person of one bot a tool call acts as."""

    bot: str
    user: str


# Set per HTTP request by the key check in front of MCP; the SDK copies context variables
# into the worker threads that run the tools, so each call sees its own request's key.
HTTP_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "membot_mcp_caller", default=None
)


def person_for(caller: Caller, bot: str | None, user: str | None) -> Person:
    """The person a call acts as; a ``ToolError`` saying what to name or what is not
    allowed. Another bot reads as unknown, as in REST, so a key learns nothing of it."""
    if caller.bot is None and not bot:
        raise ToolError("an admin key acts for every bot: name the bot (`bot`)")
    if caller.bot is not None and bot and bot != caller.bot:
        raise ToolError(f"no bot named {bot!r}")
    chosen_bot = bot or caller.bot
    assert chosen_bot is not None
    if caller.user is not None:
        if user and user != caller.user:
            raise ToolError("this connection acts only as its own person: leave `user` out")
        return Person(chosen_bot, caller.user)
    if not user or not user.strip():
        raise ToolError("a bot or admin key acts for any person: name the person (`user`)")
    return Person(chosen_bot, user)


def as_tool_errors(function: Callable[Params, Result], location: str) -> Callable[Params, Result]:
    """membot's own errors reach the client with their message, without where the store is
    (``location``); anything else the SDK hides as a crash, logged on the server."""

    @functools.wraps(function)
    def call(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        try:
            return function(*args, **kwargs)
        except MembotError as error:
            raise ToolError(without_location(str(error), location)) from error

    return call


# -- what the tools answer --------------------------------------------------------------


class StoredLine(BaseModel):
    thread: str
    seq: int
    role: str
    speaker: str | None
    text: str
    created_at: str

    @classmethod
    def of(cls, line: Line) -> StoredLine:
        return cls(
            thread=line.thread,
            seq=line.seq,
            role=str(line.role),
            speaker=line.speaker,
            text=line.text,
            created_at=iso(line.created_at),
        )


class FoundLine(StoredLine):
    score: float

    @classmethod
    def of_match(cls, match: Match) -> FoundLine:
        return cls(**StoredLine.of(match.line).model_dump(), score=round(match.score, 4))


class RecalledBlock(BaseModel):
    """Consecutive lines of one thread, recalled because the lines at ``matched_seqs``
    matched; ``person`` is whose thread it is (another person's only on a bot that shares
    memory across people)."""

    thread: str
    person: str
    score: float
    matched_seqs: list[int]
    lines: list[StoredLine]

    @classmethod
    def of(cls, block: Block) -> RecalledBlock:
        return cls(
            thread=block.thread,
            person=block.person,
            score=round(block.score, 4),
            matched_seqs=list(block.matched_seqs),
            lines=[StoredLine.of(line) for line in block.lines],
        )


class RecalledSummary(BaseModel):
    """The key points kept when a thread ended with the person's consent."""

    thread: str
    person: str
    score: float
    text: str
    categories: list[str]
    covers_from: str
    covers_to: str

    @classmethod
    def of(cls, summary: Summary, score: float) -> RecalledSummary:
        return cls(
            thread=summary.thread,
            person=summary.person,
            score=round(score, 4),
            text=summary.text,
            categories=list(summary.categories),
            covers_from=iso(summary.covers_from),
            covers_to=iso(summary.covers_to),
        )


class ThreadOverview(BaseModel):
    thread: str
    lines: int
    created_at: str
    last_line_at: str | None
    ended_at: str | None

    @classmethod
    def of(cls, info: ThreadInfo) -> ThreadOverview:
        return cls(
            thread=info.name,
            lines=info.lines,
            created_at=iso(info.created_at),
            last_line_at=iso(info.last_line_at) if info.last_line_at else None,
            ended_at=iso(info.ended_at) if info.ended_at else None,
        )


class Remembered(BaseModel):
    bot: str
    user: str
    line: StoredLine


class Recalled(BaseModel):
    bot: str
    user: str
    blocks: list[RecalledBlock]
    summaries: list[RecalledSummary] = []


class Found(BaseModel):
    bot: str
    user: str
    matches: list[FoundLine]


class History(BaseModel):
    bot: str
    user: str
    threads: list[ThreadOverview]
    lines: list[StoredLine]


class Forgotten(BaseModel):
    bot: str
    user: str
    thread: str | None
    removed: dict[str, int]


class ThreadEnded(BaseModel):
    bot: str
    user: str
    thread: str
    ended_at: str
    decision: str
    reason: str
    remembered: str | None
    categories: list[str]

    @classmethod
    def of(cls, ending: Ending) -> ThreadEnded:
        kept = ending.remembered
        return cls(
            bot=ending.bot,
            user=ending.user,
            thread=ending.thread,
            ended_at=iso(ending.ended_at),
            decision=ending.decision,
            reason=ending.reason,
            remembered=kept.text if kept else None,
            categories=list(kept.categories) if kept else [],
        )


# -- the tools --------------------------------------------------------------------------


class MemoryTools:
    """The tools, over one :class:`Service`; ``local`` is the caller of a stdio process
    (None over HTTP, where each request's key decides)."""

    def __init__(self, service: Service, local: Caller | None = None) -> None:
        self.service = service
        self.local = local

    def person(self, bot: str | None, user: str | None) -> Person:
        caller = HTTP_CALLER.get() or self.local
        if caller is None:  # fail closed: a request that reached a tool without its key
            raise ToolError("no API key: send `Authorization: Bearer KEY`")
        person = person_for(caller, bot, user)
        if caller.bot is None and not self.service.memory.has_bot(person.bot):
            # An admin names the bot: a mistyped name must not start a new bot.
            raise ToolError(f"no bot named {person.bot!r}")
        return person

    def remember(
        self,
        text: Text,
        thread: ThreadName,
        role: Literal["human", "bot"] = "human",
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> Remembered:
        """Store one line of a conversation (said by the person, or by the bot) in a
        thread; later recall and search find it."""
        person = self.person(bot, user)
        memory = self.service.memory
        # After a turn of the thread under way, in this process (the service's lock) or
        # another (the store's, taken by add).
        with self.service.thread_lock(person.bot, person.user, thread):
            line = memory.add(text, user=person.user, thread=thread, role=role, bot=person.bot)
        return Remembered(bot=person.bot, user=person.user, line=StoredLine.of(line))

    def recall(
        self,
        text: Text,
        thread: ThreadName | None = None,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> Recalled:
        """The blocks of earlier lines, and the summaries kept of ended threads, that a
        turn saying ``text`` would recall, with scores; nothing is stored. With ``thread``,
        its most recent lines (already in view in a turn) are left out."""
        person = self.person(bot, user)
        memory = self.service.memory
        found = memory.preview_recall(text, user=person.user, bot=person.bot, thread=thread)
        blocks = [RecalledBlock.of(block) for block in found.blocks]
        settings = memory.bot_settings(person.bot)
        summaries = []
        if settings.recall_summaries and settings.max_matches > 0:
            owner = None if settings.share_across_people else person.user
            kept = memory.search_summaries(
                memory.embed([text], keep=False)[0], bot=person.bot, user=owner,
                k=settings.max_matches, min_score=settings.threshold,
            )  # fmt: skip
            summaries = [RecalledSummary.of(summary, score) for summary, score in kept]
        return Recalled(bot=person.bot, user=person.user, blocks=blocks, summaries=summaries)

    def search(
        self,
        query: Text,
        k: Annotated[int, Field(ge=1, le=100)] = 10,
        thread: ThreadName | None = None,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> Found:
        """The ``k`` stored lines of the person most similar to ``query`` (in one thread,
        or all), best first; the query is not stored."""
        person = self.person(bot, user)
        matches = self.service.memory.search(
            query, user=person.user, bot=person.bot, thread=thread, k=k
        )
        return Found(
            bot=person.bot,
            user=person.user,
            matches=[FoundLine.of_match(match) for match in matches],
        )

    def history(
        self,
        thread: ThreadName | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> History:
        """The person's threads, and lines: a thread's first ``limit`` lines, or without
        ``thread`` the latest ``limit`` lines of every thread, oldest first."""
        person = self.person(bot, user)
        memory = self.service.memory
        threads = memory.threads(user=person.user, bot=person.bot)
        if thread is not None:
            threads = [info for info in threads if info.name == thread]
            lines = memory.thread_lines(
                user=person.user, bot=person.bot, thread=thread, limit=limit
            )
        else:
            said = memory.history(user=person.user, bot=person.bot)
            lines = sorted(said, key=lambda line: (line.created_at, line.id))[-limit:]
        return History(
            bot=person.bot,
            user=person.user,
            threads=[ThreadOverview.of(info) for info in threads],
            lines=[StoredLine.of(line) for line in lines],
        )

    def forget(
        self,
        confirm: Annotated[
            bool, Field(description="true: the person asked for this; it cannot be undone.")
        ],
        thread: ThreadName | None = None,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> Forgotten:
        """Remove for good what the person said to the bot (one thread, or everything),
        with what was kept of it. Refused unless ``confirm`` is true."""
        person = self.person(bot, user)
        if confirm is not True:
            what = f"thread {thread!r}" if thread else "everything the person said"
            raise ToolError(f"forgetting {what} cannot be undone: call again with confirm: true")
        memory = self.service.memory
        if thread and memory.thread_state(bot=person.bot, user=person.user, thread=thread) is None:
            raise NotFoundError(f"{person.user!r} has no thread {thread!r} with {person.bot!r}")
        removed = memory.forget(user=person.user, bot=person.bot, thread=thread)
        return Forgotten(bot=person.bot, user=person.user, thread=thread, removed=removed)

    def end_thread(
        self,
        thread: ThreadName,
        remember: Annotated[
            bool, Field(description="true only if the person agreed that it is remembered.")
        ],
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> ThreadEnded:
        """End a thread; with ``remember``, the bot's model writes the key points about the
        person, held to the bot's remember-policy, and later turns recall them."""
        person = self.person(bot, user)
        with self.service.thread_lock(person.bot, person.user, thread):
            ending = self.service.bot(person.bot).end_thread(
                user=person.user, thread=thread, remember=remember
            )
        return ThreadEnded.of(ending)


class MembotMCPServer(MCPServer):
    """The SDK's server, with arguments a tool cannot take named in a sentence ("text: String
    should have at least 1 character") rather than pydantic's dump of the arguments' model,
    its input and a link."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if not isinstance(error.__cause__, ValidationError):
                raise
            problems = "; ".join(_argument_problem(item) for item in error.__cause__.errors())
            raise ToolError(f"Error executing tool {name}: {problems}") from error.__cause__


def _argument_problem(item: Mapping[str, Any]) -> str:
    where = field_path(item)
    problem = str(item.get("msg", "invalid"))
    return f"{where}: {problem}" if where else problem


def build_mcp_server(service: Service, *, local: Caller | None = None) -> MCPServer:
    """The MCP server with membot's tools; ``local`` is whom a stdio process acts for
    (leave it out over HTTP: each request's key decides)."""
    server = MembotMCPServer(
        "membot", instructions=INSTRUCTIONS, log_level="WARNING", version=_membot_version()
    )
    tools = MemoryTools(service, local)
    own = PersonMemoryTools(service, tools.person)
    links = LinkTools(service, tools.person)
    # Plain functions, not coroutines: the SDK runs them in worker threads, off the event
    # loop, as embedding and SQLite calls need.
    for function, hints in (
        (tools.remember, WRITES),
        (tools.recall, READS),
        (tools.search, READS),
        (tools.history, READS),
        (tools.forget, ERASES),
        (tools.end_thread, WRITES),
        (own.my_memory, READS),
        (own.forget_line, ERASES),
        (own.correct_memory, ERASES),
        (links.link_code, WRITES),
        (links.link_with_code, WRITES),
        (links.linked, READS),
        (links.unlink, WRITES),
    ):
        server.tool(annotations=hints)(as_tool_errors(function, service.memory.location))
    return server


def _membot_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("membot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


# -- streamable HTTP at /mcp ------------------------------------------------------------


class BearerKeyGate:
    """Plain ASGI in front of MCP: a request without an active key gets the server's JSON
    error (401, or 429 past the key's rate limit) before MCP reads it; the key's scope
    reaches the tools through :data:`HTTP_CALLER`."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # FastAPI names the matched route in the scope only for its own routes; the request
        # metrics count by the route's path, which this gate holds.
        scope.setdefault("route", self)
        request = Request(scope, receive)
        if request.method in ("GET", "HEAD"):
            # Each request is answered on its own, as JSON: there is no stream of the
            # server's own messages to keep open (MCP lets such a server answer 405).
            refused = error_response(405, "method_not_allowed", _NO_STREAM, {"Allow": "POST"})
            await refused(scope, receive, send)
            return
        try:
            # The REST routes' own check (and rate limit); it reads SQLite, so off the loop.
            key = await anyio.to_thread.run_sync(auth.caller, request)
        except (ApiError, MembotError) as error:
            await _refusal(request, error)(scope, receive, send)
            return
        token = HTTP_CALLER.set(Caller.of_key(key))
        try:
            await self.app(scope, receive, send)
        finally:
            HTTP_CALLER.reset(token)


_NO_STREAM = "this MCP endpoint answers each POST as JSON and keeps no stream open"


def _refusal(request: Request, error: ApiError | MembotError) -> JSONResponse:
    refused = refusal_of(error, request.app.state.service.memory.location)
    headers = refused.headers or {}
    if refused.status == 401:
        headers = {**headers, "WWW-Authenticate": "Bearer"}
    request.state.error_type = refused.kind  # counted in the metrics like any refused request
    return error_response(refused.status, refused.kind, refused.message, headers)


class CurrentSessions:
    """Hands each request to the MCP server's session manager of the moment: a manager runs
    only once, so :func:`run_mcp_sessions` makes a fresh one each time the app starts."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.server.session_manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI, service: Service) -> None:
    """Serve MCP at exactly ``/mcp`` (every method, no redirect) behind the Bearer keys; the
    app's lifespan must enter :func:`run_mcp_sessions`."""
    server = build_mcp_server(service)
    app.state.mcp_server = server
    gate = BearerKeyGate(CurrentSessions(server), MCP_PATH)
    for path in (MCP_PATH, f"{MCP_PATH}/"):  # the server redirects no slash: take both
        # An ASGI app as a route's endpoint, which Starlette serves as such; add_route's
        # annotation names only request functions.
        app.add_route(path, gate, include_in_schema=False)  # type: ignore[arg-type]


@asynccontextmanager
async def run_mcp_sessions(app: FastAPI) -> AsyncIterator[None]:
    """Run MCP's session manager while the app serves (a mounted app's own lifespan would
    never run, so the parent app runs it)."""
    server: MCPServer = app.state.mcp_server
    # Each request is answered on its own, as JSON: no session to find again, so any worker
    # of `membot serve --workers N` can take any request. The Bearer key guards the endpoint,
    # so the SDK's Host-header check (meant for local servers without keys) stays off: it
    # would refuse every public hostname.
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    async with server.session_manager.run():
        yield

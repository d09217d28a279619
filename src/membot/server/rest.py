"""REST under ``/v1``: bots and profiles, turns, tool results, search, threads, memories,
forgetting, documents and imports. Each route answers the object ``membot … --json`` prints."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

from fastapi import APIRouter, Body, Depends, File, Query, Request, Response, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from membot import (
    BotSettings,
    ConfigError,
    ImportFormatError,
    MembotError,
    NotFoundError,
    Turn,
    profile_from_toml,
    profile_to_toml,
    read_file,
    strategy_options,
)
from membot.server.auth import caller, need_admin, need_bot, person_of, service_of
from membot.server.errors import (
    ApiError,
    error_body,
    model_unavailable,
    refusal_of,
)
from membot.server.openai_api import STREAM_HEADERS, turn_events
from membot.server.service import MAX_LINE_CHARS, MAX_NAME_CHARS, Service
from membot.service import ApiKey

router = APIRouter(prefix="/v1")
Key = Annotated[ApiKey, Depends(caller)]
# Settings only an admin may change: which model answers, and which environment variable's
# secret is sent to it (a bot key naming another URL would otherwise exfiltrate keys).
ADMIN_ONLY_SETTINGS = {"llm", "llm_key_env"}
MAX_UPLOAD_FILES = 20
MAX_SEQ = 2**63 - 1  # the largest seq a store can hold
Params = ParamSpec("Params")
Result = TypeVar("Result")


class NewBot(BaseModel):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    settings: dict[str, Any] = Field(default_factory=dict)


class TurnRequest(BaseModel):
    user: str | None = Field(default=None, description="Left out with a person key.")
    thread: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    text: str = Field(min_length=1)
    dry_run: bool = False
    settings: dict[str, Any] | None = Field(
        default=None, description="Bot settings for this turn only (admin and bot keys)."
    )
    stream: bool = Field(default=False, description="Answer with Server-Sent Events.")


class ToolResult(BaseModel):
    user: str | None = None
    thread: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    text: str = Field(min_length=1)


class EndRequest(BaseModel):
    remember: bool = Field(description="Whether the person agreed that it is remembered.")


def _need_builder(key: ApiKey, bot: str) -> None:
    """Admin and bot keys build a bot; a person key only talks."""
    need_bot(key, bot)
    if key.user is not None:
        raise ApiError(403, "a person's key can talk with the bot, not change it")


def _check_settings(key: ApiKey, current: BotSettings, wanted: BotSettings) -> None:
    """403 when ``wanted`` changes a setting only an admin may change (which model answers,
    whose key it reads) and ``key`` is not an admin's. What a request would change counts,
    not what it names: a bot key's profile without an ``llm`` line would clear the admin's
    choice, and its own profile sent back unchanged changes nothing."""
    if key.can_admin:
        return
    changed = sorted(n for n in ADMIN_ONLY_SETTINGS if getattr(wanted, n) != getattr(current, n))
    if changed:
        raise ApiError(
            403,
            f"only an admin key may change {', '.join(changed)} (a profile keeps them as "
            "GET /v1/bots/{bot}/profile gives them)",
        )


def _check_text(text: str) -> None:
    if len(text) > MAX_LINE_CHARS:
        raise ApiError(413, f"a line is limited to {MAX_LINE_CHARS} characters")


def _profile(service: Service, bot: str) -> dict[str, Any]:
    return {"name": bot, "settings": service.memory.bot_settings(bot).to_json()}


# -- bots ------------------------------------------------------------------------------


@router.post("/bots", status_code=201, tags=["bots"])
def create_bot(body: NewBot, key: Key, request: Request) -> dict[str, Any]:
    need_admin(key)
    service = service_of(request)
    service.memory.create_bot(body.name, **body.settings)
    return _profile(service, body.name)


@router.get("/bots", tags=["bots"])
def list_bots(key: Key, request: Request) -> dict[str, list[str]]:
    names = service_of(request).memory.bots()
    return {"bots": names if key.can_admin else [name for name in names if name == key.bot]}


@router.get("/bots/{bot}", tags=["bots"])
def show_bot(bot: str, key: Key, request: Request) -> dict[str, Any]:
    need_bot(key, bot)
    service = service_of(request)
    service.memory.require_bot(bot)
    return _profile(service, bot)


@router.patch("/bots/{bot}", tags=["bots"])
def change_bot(
    bot: str, key: Key, request: Request, settings: Annotated[dict[str, Any], Body()]
) -> dict[str, Any]:
    """Change some settings: a JSON object of name → value (``strategy.NAME`` too)."""
    _need_builder(key, bot)
    service = service_of(request)
    service.memory.require_bot(bot)
    current = service.memory.bot_settings(bot)
    _check_settings(key, current, current.with_values(settings))
    service.memory.configure_bot(bot, **settings)
    return _profile(service, bot)


@router.delete("/bots/{bot}", tags=["bots"])
def delete_bot(bot: str, key: Key, request: Request) -> dict[str, Any]:
    need_admin(key)
    return {"deleted": bot, **service_of(request).memory.delete_bot(bot)}


@router.get(
    "/bots/{bot}/profile",
    tags=["bots"],
    response_class=Response,
    responses={200: {"content": {"application/toml": {}}}},
)
def export_profile(bot: str, key: Key, request: Request) -> Response:
    """The bot's whole profile as TOML (what `membot bot export` writes)."""
    _need_builder(key, bot)
    memory = service_of(request).memory
    memory.require_bot(bot)
    return Response(profile_to_toml(bot, memory.bot_settings(bot)), media_type="application/toml")


@router.put("/bots/{bot}/profile", tags=["bots"])
async def import_profile(bot: str, key: Key, request: Request) -> dict[str, Any]:
    """Make a TOML profile (the request body) the bot's whole profile."""
    _need_builder(key, bot)
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("the profile is not UTF-8 text") from None
    _, values = profile_from_toml(text)
    service = service_of(request)
    _check_settings(key, service.memory.bot_settings(bot), BotSettings().with_values(values))
    service.memory.replace_profile(bot, values)
    return _profile(service, bot)


# -- talking ---------------------------------------------------------------------------


@router.post("/bots/{bot}/turns", tags=["talk"], response_model=dict[str, Any])
async def take_turn(bot: str, body: TurnRequest, key: Key, request: Request) -> Response:
    """Store the person's line, recall, answer: the whole trace (`membot say --json`). When
    the model fails: 503, and the line stays stored once. With ``stream``, Server-Sent Events:
    ``{"text"}`` for each piece of the reply as the model writes it, then ``{"turn"}`` with
    the whole trace (or ``{"error"}`` when the model fails midway)."""
    service = service_of(request)
    user = await run_in_threadpool(_check_turn, service, key, bot, body)

    def run(on_text: Callable[[str], None] | None) -> Turn:
        return service.turn(
            bot,
            user=user,
            thread=body.thread,
            text=body.text,
            dry_run=body.dry_run,
            settings=body.settings,
            on_text=on_text,
        )

    if not body.stream:
        turn = await run_in_threadpool(run, None)
        if turn.error:
            raise model_unavailable(turn.error, turn.thread, turn.human_line.seq)
        # Encoded here: a trace is tens of kilobytes, which FastAPI would otherwise check
        # against the declared type in another trip through the thread pool first.
        return JSONResponse(turn.to_json())
    events = turn_events(run)
    first = await anext(events)  # a turn failing before any text still gets its status
    if isinstance(first, Turn) and first.error:
        raise model_unavailable(first.error, first.thread, first.human_line.seq)
    return StreamingResponse(
        _turn_stream(first, events, service.memory.location),
        media_type="text/event-stream",
        headers=STREAM_HEADERS,
    )


def _named_bot(service: Service, key: ApiKey, bot: str) -> None:
    """404 for a bot an admin key names that does not exist: a mistyped name must not start
    a new bot (as the OpenAI-compatible route answers). A bot or person key's bot is its
    own, made on its first line."""
    if key.can_admin:
        service.memory.require_bot(bot)


def _check_turn(service: Service, key: ApiKey, bot: str, body: TurnRequest) -> str:
    """The person the turn is for, once the request may take it; a bad setting fails
    here, before the line is stored."""
    user = person_of(key, bot, body.user)
    _named_bot(service, key, bot)
    _check_text(body.text)
    if body.settings:
        if key.user is not None:
            raise ApiError(403, "a person's key cannot change the bot's settings")
        wanted = service.memory.bot_settings(bot, body.settings)  # a bad setting fails here
        _check_settings(key, service.memory.bot_settings(bot), wanted)
    return user


async def _turn_stream(
    first: str | Turn, events: AsyncIterator[str | Turn], location: str
) -> AsyncIterator[str]:
    pending: str | Turn | None = first
    try:
        while pending is not None:
            yield f"data: {json.dumps(_stream_data(pending), ensure_ascii=False)}\n\n"
            pending = await anext(events, None)
    except MembotError as error:  # the status was sent with the first piece
        refused = refusal_of(error, location)
        body = error_body(refused.kind, refused.message, refused.stored)
        yield f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _stream_data(item: str | Turn) -> dict[str, Any]:
    if not isinstance(item, Turn):
        return {"text": item}
    if item.error:  # the model failed after part of the reply was sent
        failed = model_unavailable(item.error, item.thread, item.human_line.seq)
        return error_body(failed.kind, failed.message, failed.stored)
    return {"turn": item.to_json()}


@router.post("/bots/{bot}/tool-results", status_code=201, tags=["talk"])
def add_tool_result(bot: str, body: ToolResult, key: Key, request: Request) -> dict[str, Any]:
    user = person_of(key, bot, body.user)
    _check_text(body.text)
    service = service_of(request)
    _named_bot(service, key, bot)
    with service.thread_lock(bot, user, body.thread):  # after a turn under way, as MCP's
        bot_of = service.bot(bot)
        line = bot_of.add_tool_result(body.text, user=user, thread=body.thread, tool=body.name)
    return {"bot": bot, "user": user, "thread": body.thread, **line.to_json()}


@router.get("/bots/{bot}/search", tags=["memory"])
def search(
    bot: str,
    key: Key,
    request: Request,
    q: Annotated[str, Query(min_length=1, max_length=MAX_LINE_CHARS)],
    user: str | None = None,
    thread: str | None = None,
    k: Annotated[int, Query(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    """The stored lines most similar to ``q`` (not stored): one person's, or with an admin or
    bot key and no ``user``, every person's of the bot."""
    need_bot(key, bot)
    user, thread = user or None, thread or None  # "?thread=" is no thread named, as HTTP reads
    if key.user is not None or user is not None:
        user = person_of(key, bot, user)
    matches = service_of(request).memory.search(q, user=user, bot=bot, thread=thread, k=k)
    return {
        "matches": [
            {"user": m.line.person, "thread": m.line.thread, **m.to_json()} for m in matches
        ]
    }


# -- threads and memories ----------------------------------------------------------------


@router.get("/me", tags=["bots"])
def who_am_i(key: Key) -> dict[str, Any]:
    """The key's scope: which bot and person it acts for (never its secret)."""
    return key.to_json()


@router.get("/strategies", tags=["bots"])
def list_strategies(key: Key) -> dict[str, dict[str, dict[str, float]]]:
    """The recall strategies a bot may use, each with its options and their defaults (a
    bot's ``strategy.NAME`` settings)."""
    return {"strategies": strategy_options()}


@router.get("/bots/{bot}/users", tags=["memory"])
def list_people(bot: str, key: Key, request: Request) -> dict[str, list[str]]:
    """The people who talked with the bot; with a person key, only that person."""
    need_bot(key, bot)
    memory = service_of(request).memory
    memory.require_bot(bot)
    people = memory.people(bot)
    return {"users": people if key.user is None else [p for p in people if p == key.user]}


@router.get("/bots/{bot}/users/{user}/threads", tags=["memory"])
def list_threads(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    user = person_of(key, bot, user)
    threads = service_of(request).memory.threads(user=user, bot=bot)
    return {"threads": [thread.to_json() for thread in threads]}


@router.get("/bots/{bot}/users/{user}/threads/{thread:path}/lines", tags=["memory"])
def thread_lines(
    bot: str,
    user: str,
    thread: str,
    key: Key,
    request: Request,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    user = person_of(key, bot, user)
    lines = service_of(request).memory.thread_lines(
        user=user, bot=bot, thread=thread, after_seq=after_seq, limit=limit
    )
    return {"lines": [line.to_json() for line in lines]}


@router.post("/bots/{bot}/users/{user}/threads/{thread:path}/end", tags=["memory"])
def end_thread(
    bot: str, user: str, thread: str, body: EndRequest, key: Key, request: Request
) -> dict[str, Any]:
    """End the thread; with ``remember``, keep its key points about the person."""
    user = person_of(key, bot, user)
    service = service_of(request)
    with service.thread_lock(bot, user, thread):
        ending = service.bot(bot).end_thread(user=user, thread=thread, remember=body.remember)
    return ending.to_json()


@router.get("/bots/{bot}/users/{user}/memories", tags=["memory"])
def memories(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    user = person_of(key, bot, user)
    summaries = service_of(request).memory.summaries(user=user, bot=bot)
    return {"memories": [summary.to_json() for summary in summaries]}


@router.delete("/bots/{bot}/users/{user}", tags=["memory"])
def forget_person(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    """Forget everything the person said to this bot, and what was kept of it."""
    user = person_of(key, bot, user)
    return service_of(request).memory.forget(user=user, bot=bot)


@router.delete("/bots/{bot}/users/{user}/threads/{thread:path}", tags=["memory"])
def forget_thread(bot: str, user: str, thread: str, key: Key, request: Request) -> dict[str, Any]:
    user = person_of(key, bot, user)
    memory = service_of(request).memory
    if memory.thread_state(bot=bot, user=user, thread=thread) is None:
        raise NotFoundError(f"{user!r} has no thread {thread!r} with bot {bot!r}")
    return memory.forget(user=user, bot=bot, thread=thread)


# -- documents and imports -----------------------------------------------------------------


@router.post("/bots/{bot}/documents", status_code=201, tags=["documents"])
async def add_documents(
    bot: str, key: Key, request: Request, files: Annotated[list[UploadFile], File()]
) -> dict[str, Any]:
    """Upload documents (text, Markdown, HTML, PDF) into the bot's expertise; every file is
    checked first, so one bad file stores nothing."""
    _need_builder(key, bot)
    _named_bot(service_of(request), key, bot)
    if not files or len(files) > MAX_UPLOAD_FILES:
        raise ConfigError(f"send between 1 and {MAX_UPLOAD_FILES} files")
    with tempfile.TemporaryDirectory(prefix="membot-upload-") as folder, _named_as_sent(folder):
        paths = [await _saved(upload, Path(folder)) for upload in files]
        service = service_of(request)
        infos = await _in_thread(service.memory.add_documents, paths, bot=bot)
    return {"documents": [info.to_json() for info in infos]}


@router.get("/bots/{bot}/documents", tags=["documents"])
def list_documents(bot: str, key: Key, request: Request) -> dict[str, Any]:
    need_bot(key, bot)
    return {"documents": [d.to_json() for d in service_of(request).memory.documents(bot)]}


@router.get("/bots/{bot}/documents/{name}/chunks", tags=["documents"])
def document_chunks(bot: str, name: str, key: Key, request: Request) -> dict[str, Any]:
    """The passages the document was cut into, in order."""
    need_bot(key, bot)
    chunks = service_of(request).memory.document_chunks(name, bot=bot)
    return {"chunks": [chunk.to_json() for chunk in chunks]}


@router.delete("/bots/{bot}/documents/{name}", tags=["documents"])
def remove_document(bot: str, name: str, key: Key, request: Request) -> dict[str, Any]:
    _need_builder(key, bot)
    if not service_of(request).memory.remove_document(name, bot=bot):
        raise NotFoundError(f"{bot} has no document named {name!r}")
    return {"removed": name}


@router.post("/bots/{bot}/import", status_code=201, tags=["documents"])
async def import_lines(
    bot: str, key: Key, request: Request, file: Annotated[UploadFile, File()]
) -> dict[str, Any]:
    """Import a JSONL file of lines (`membot import --format jsonl`) into this bot. Lines
    stored by an earlier import of the file (by ref, or by place and text) are not stored
    again: ``already_stored`` counts them."""
    _need_builder(key, bot)
    _named_bot(service_of(request), key, bot)
    with tempfile.TemporaryDirectory(prefix="membot-import-") as folder, _named_as_sent(folder):
        path = await _saved(file, Path(folder))
        plan = read_file(path, "jsonl", bot, None)
    strangers = {line.bot for line in plan.lines} - {bot}
    if strangers:
        raise ApiError(
            403,
            f"the file names other bots ({', '.join(sorted(strangers))}); "
            f"it may only hold lines of {bot!r}",
        )
    added = await _in_thread(service_of(request).memory.add_many, plan.lines)
    return {"imported": added, "threads": plan.threads, "already_stored": len(plan.lines) - added}


async def _saved(upload: UploadFile, folder: Path) -> Path:
    """The upload written under its own base name (a name with folders is cut to its last
    part), so the document keeps the name it was sent with."""
    name = Path(upload.filename or "upload").name
    name = "upload" if name in ("", ".", "..") else name  # a base name that is no file's
    path = folder / name
    path.write_bytes(await upload.read())
    return path


@contextmanager
def _named_as_sent(folder: str) -> Iterator[None]:
    """An error about an uploaded file names it as it was sent ("notes.pdf:3: ..."), not by
    the server's temporary folder, which means nothing to the caller."""
    try:
        yield
    except (ImportFormatError, ConfigError) as error:
        message = str(error).replace(f"{folder}{os.sep}", "")
        if message == str(error):
            raise
        raise type(error)(message) from error


async def _in_thread(
    function: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs
) -> Result:
    return await run_in_threadpool(function, *args, **kwargs)

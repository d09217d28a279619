"""OpenAI-compatible chat under ``/v1``: ``POST /v1/chat/completions`` and ``GET /v1/models``,
so any OpenAI client can talk to a membot bot.

``model`` names the bot; the person is the key's person, else the request's ``user``; the
thread is ``metadata.thread`` or the ``X-Membot-Thread`` header, else the conversation's own:
clients resend the whole conversation each call, and the person's thread whose lines are the
earlier messages resent is it (a conversation with no earlier message starts a new thread;
:mod:`membot.server.openai_threads`). Only the last message is new: membot holds the thread
already, so the earlier messages a client sends are not stored again, and a client's system
message is not used (the bot's profile is its prompt). Beside OpenAI's fields, a ``membot``
object gives the thread, the seqs of both lines, what was recalled and what was cited.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from membot import MembotError, Role, Turn
from membot.server.auth import caller, person_of, service_of
from membot.server.errors import (
    ApiError,
    model_unavailable,
    openai_error,
    refusal_of,
)
from membot.server.openai_threads import Said, conversation_thread
from membot.server.service import MAX_LINE_CHARS, MAX_NAME_CHARS, Service
from membot.service import ApiKey

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["openai"])
Key = Annotated[ApiKey, Depends(caller)]
THREAD_HEADER = "X-Membot-Thread"
# Newer OpenAI clients send a system message with the role "developer".
INSTRUCTION_ROLES = {"system", "developer"}
SYSTEM_IGNORED = (
    "the client's system message was not used: the bot's profile is its prompt "
    "(PATCH /v1/bots/{bot} changes it)"
)
# The roles of the earlier messages compared with a thread's stored lines.
RESENT_ROLES = {"user": Role.HUMAN, "assistant": Role.BOT}
# Function calling is not offered: the model answers in text, and the client is told.
TOOL_FIELDS = {"tools", "tool_choice", "functions", "function_call"}
TOOLS_IGNORED = "the client's tools were not offered to the model: membot replies in text"
# Streaming responses must reach the client as written: no caching, and no buffering by a
# proxy in front (nginx holds text/event-stream back unless told).
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, ...: not used

    role: str
    content: str | list[dict[str, Any]] | None = None

    def said(self) -> Said | None:
        """The message as a line of the conversation, for recognising its thread: None for
        an instruction, a tool's message or parts that are not text."""
        role = RESENT_ROLES.get(self.role)
        if role is None:
            return None
        try:
            return (role, self.text())
        except ApiError:  # an earlier message is not stored: its pictures are not refused
            return None

    def text(self) -> str:
        """The message's text: its content string, or its text parts one a line."""
        if not isinstance(self.content, list):
            return self.content or ""
        others = {str(part.get("type")) for part in self.content} - {"text"}
        if others:
            kinds = ", ".join(sorted(others))
            raise ApiError(400, f"membot reads text only, not {kinds} parts", param="messages")
        texts = [part.get("text", "") for part in self.content]
        if not all(isinstance(text, str) for text in texts):
            raise ApiError(400, "a text part's text is a string", param="messages")
        return "\n".join(texts)


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    # OpenAI clients send fields membot has no use for (max_tokens, temperature, n, ...):
    # they are accepted and ignored, as docs/server.md says.
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, description="The bot's name.")
    messages: list[ChatMessage] = Field(min_length=1)
    user: str | None = Field(default=None, description="The person; left out with a person key.")
    metadata: dict[str, str] | None = Field(
        default=None, description='`{"thread": NAME}` names the thread.'
    )
    stream: bool = False
    stream_options: StreamOptions | None = None


@dataclass(frozen=True)
class ChatTurn:
    """The turn a chat completion request asks for."""

    bot: str
    user: str
    thread: str | None  # None: the thread is recognised from ``earlier``
    earlier: tuple[Said, ...]
    text: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Completion:
    """What every chunk of one completion repeats: its id, its time and the model."""

    id: str
    created: int
    model: str

    @classmethod
    def start(cls, model: str) -> Completion:
        return cls(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), model)

    def chunk(self, choices: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **more,
        }


# -- the routes ------------------------------------------------------------------------------


@router.get("/models")
def list_models(key: Key, request: Request) -> dict[str, Any]:
    """The bots this key may talk with, as OpenAI models."""
    names = service_of(request).memory.bots()
    usable = names if key.can_admin else [name for name in names if name == key.bot]
    # membot keeps no creation time a front end reads; like vLLM and llama.cpp, the time
    # of the listing.
    now = int(time.time())
    models = [
        {"id": name, "object": "model", "created": now, "owned_by": "membot"} for name in usable
    ]
    return {"object": "list", "data": models}


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, key: Key, request: Request
) -> JSONResponse | StreamingResponse:
    """A turn with the bot ``model``: the last message, the person's, is stored and
    answered; with ``stream``, the reply comes as Server-Sent Events as the model writes it.
    When the model fails: 503, and the line stays stored once."""
    chat = _chat_turn(body, key, request)
    service = service_of(request)
    completion = Completion.start(chat.bot)
    if not body.stream:
        turn = await run_in_threadpool(_take_turn, service, chat, None)
        if turn.error:
            raise model_unavailable(turn.error, turn.thread, turn.human_line.seq)
        return JSONResponse(_completion_json(completion, turn, chat))
    events = turn_events(lambda on_text: _take_turn(service, chat, on_text))
    # Wait for the first piece: a turn that fails before any text still gets its HTTP status.
    first = await anext(events)
    if isinstance(first, Turn) and first.error:
        raise model_unavailable(first.error, first.thread, first.human_line.seq)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        _server_sent_events(
            completion, chat, first, events, include_usage, service.memory.location
        ),
        media_type="text/event-stream",
        headers=STREAM_HEADERS,
    )


# -- reading the request ------------------------------------------------------------------


def _chat_turn(body: ChatCompletionRequest, key: ApiKey, request: Request) -> ChatTurn:
    user = person_of(key, body.model, body.user)
    notes = []
    if any(message.role in INSTRUCTION_ROLES for message in body.messages):
        notes.append(SYSTEM_IGNORED)
    if set(body.model_extra or {}) & TOOL_FIELDS:
        notes.append(TOOLS_IGNORED)
    return ChatTurn(
        bot=body.model,
        user=user,
        thread=_thread_of(body, request),
        earlier=_earlier(body.messages),
        text=_new_line(body.messages),
        notes=tuple(notes),
    )


def _new_line(messages: list[ChatMessage]) -> str:
    """The person's new line: the last message, which must be theirs. Answering an earlier
    one instead would store it a second time."""
    last = messages[-1]
    if last.role != "user":
        raise ApiError(
            400,
            f"the last message must be the person's (role 'user'), not {last.role!r}",
            param="messages",
        )
    text = last.text()
    if not text.strip():
        raise ApiError(400, "the last message has no text", param="messages")
    if len(text) > MAX_LINE_CHARS:
        limit = f"a line is limited to {MAX_LINE_CHARS} characters"
        raise ApiError(413, limit, param="messages")
    return text


def _earlier(messages: list[ChatMessage]) -> tuple[Said, ...]:
    """The conversation before the new line, as the client resends it: the person's and the
    bot's messages (instructions and tools' messages are not lines membot stores)."""
    said = (message.said() for message in messages[:-1])
    return tuple(line for line in said if line is not None)


def _thread_of(body: ChatCompletionRequest, request: Request) -> str | None:
    """The thread the client names, else None."""
    named = (body.metadata or {}).get("thread") or request.headers.get(THREAD_HEADER)
    if named is None:
        return None
    if not named.strip() or len(named) > MAX_NAME_CHARS:
        where = "metadata.thread" if (body.metadata or {}).get("thread") else THREAD_HEADER
        limit = f"a thread's name has 1 to {MAX_NAME_CHARS} characters"
        raise ApiError(422, limit, param=where)
    return named


def _take_turn(service: Service, chat: ChatTurn, on_text: Callable[[str], None] | None) -> Turn:
    # Only the bots the models list shows: a mistyped model must not start a new bot.
    service.memory.require_bot(chat.bot)
    thread = chat.thread or conversation_thread(
        service.memory, bot=chat.bot, user=chat.user, earlier=chat.earlier
    )
    return service.turn(chat.bot, user=chat.user, thread=thread, text=chat.text, on_text=on_text)


# -- the answer ----------------------------------------------------------------------------


def _completion_json(completion: Completion, turn: Turn, chat: ChatTurn) -> dict[str, Any]:
    return {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": turn.response, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage_json(turn),
        "membot": _membot_json(turn, chat),
    }


def _usage_json(turn: Turn) -> dict[str, int]:
    """Tokens as membot counts them (the bundled model's tokenizer); a remote model's own
    count of the same text may differ a little."""
    prompt, reply = turn.tokens["prompt"], turn.tokens["response"]
    return {"prompt_tokens": prompt, "completion_tokens": reply, "total_tokens": prompt + reply}


def _membot_json(turn: Turn, chat: ChatTurn) -> dict[str, Any]:
    return {
        "bot": turn.bot,
        "user": turn.person,
        "thread": turn.thread,
        "line_seq": turn.human_line.seq,
        "reply_seq": turn.bot_line.seq if turn.bot_line else None,
        "score": None if turn.score is None else round(turn.score, 4),
        "recalled": [block.to_json() for block in turn.recalled],
        "citations": [citation.to_json() for citation in turn.citations],
        "notes": [*chat.notes, *turn.notes],
    }


# -- streaming -----------------------------------------------------------------------------

# The worker tasks of streams in progress: asyncio keeps only weak references to tasks, and a
# turn must finish (and store its reply) even when its client has gone.
_RUNNING: set[asyncio.Task[None]] = set()


async def turn_events(
    run_turn: Callable[[Callable[[str], None]], Turn],
) -> AsyncIterator[str | Turn]:
    """Run ``run_turn(on_text)`` in a worker thread; yield each piece of reply text as the
    model writes it, then the finished Turn. An exception of the turn is raised here."""
    loop = asyncio.get_running_loop()
    # None, handed over last, says the turn is finished.
    handed_over: asyncio.Queue[str | Turn | Exception | None] = asyncio.Queue()

    def hand_over(item: str | Turn | Exception | None) -> None:
        loop.call_soon_threadsafe(handed_over.put_nowait, item)

    def run() -> None:
        outcome: Turn | Exception
        try:
            outcome = run_turn(hand_over)
        except Exception as error:  # raised to the consumer, in the event loop
            outcome = error
        # One channel for the pieces and the outcome keeps them in the order written.
        hand_over(outcome)
        hand_over(None)

    worker = asyncio.ensure_future(run_in_threadpool(run))
    _RUNNING.add(worker)
    worker.add_done_callback(_RUNNING.discard)
    while (item := await handed_over.get()) is not None:
        if isinstance(item, Exception):
            raise item
        yield item


async def _server_sent_events(
    completion: Completion,
    chat: ChatTurn,
    first: str | Turn,
    events: AsyncIterator[str | Turn],
    include_usage: bool,
    location: str,
) -> AsyncIterator[str]:
    """OpenAI's chunks: the role, the text as written, the finish with the ``membot`` object,
    the usage when asked for, then ``[DONE]``. A failure midway ends the stream with an
    error event, which OpenAI clients raise."""
    more = {"usage": None} if include_usage else {}
    yield _event(completion.chunk([_choice({"role": "assistant", "content": ""})], **more))
    turn: Turn | None = None
    try:
        async for item in _starting_with(first, events):
            if isinstance(item, Turn):
                turn = item
            else:
                yield _event(completion.chunk([_choice({"content": item})], **more))
        if turn is None:  # turn_events ends with the Turn or raises
            raise RuntimeError("a streamed turn ended without its Turn")
    except Exception as error:
        yield _event(_stream_error(error, location))
        return
    if turn.error:  # the model failed after some of the reply was sent
        failed = model_unavailable(turn.error, turn.thread, turn.human_line.seq)
        yield _event(openai_error(failed.status, failed.kind, failed.message, None, failed.stored))
        return
    finish = _choice({}, finish_reason="stop")
    yield _event(completion.chunk([finish], membot=_membot_json(turn, chat), **more))
    if include_usage:
        yield _event(completion.chunk([], usage=_usage_json(turn)))
    yield "data: [DONE]\n\n"


async def _starting_with(
    first: str | Turn, rest: AsyncIterator[str | Turn]
) -> AsyncIterator[str | Turn]:
    yield first
    async for item in rest:
        yield item


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _stream_error(error: Exception, location: str) -> dict[str, Any]:
    """The error event for a failure after the stream began (its status is already sent)."""
    if isinstance(error, MembotError):
        refused = refusal_of(error, location)
        return openai_error(refused.status, refused.kind, refused.message, None, refused.stored)
    log.error("a streamed turn failed unexpectedly", exc_info=error)
    return openai_error(500, "internal", "membot failed unexpectedly; see the server log")

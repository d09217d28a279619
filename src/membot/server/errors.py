"""Every error the server answers is JSON ``{"error": {"type", "message"}}`` with its status.

membot's own errors are translated here, once, at the adapter boundary; a request the
framework cannot read gets the same shape, and nothing answers a bare 500. The
OpenAI-compatible routes answer as OpenAI does (:func:`openai_error`): ``type`` in OpenAI's
words, ``param`` and ``code`` beside it, and 400 where membot's own routes say 422.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from math import ceil
from typing import Any, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from membot import (
    AuthError,
    ConfigError,
    ConflictError,
    EmbedderMismatchError,
    ImportFormatError,
    MembotError,
    NotFoundError,
    ProviderError,
    StoreError,
    StoreFullError,
    TooManyAttemptsError,
    TurnFailedError,
)

log = logging.getLogger(__name__)


class StoredLine(TypedDict):
    """The person's line, stored before a turn failed (an error body's ``stored``)."""

    thread: str
    seq: int


# Most specific first: the first class an error is an instance of decides its answer.
STATUS_OF: tuple[tuple[type[MembotError], int, str], ...] = (
    (AuthError, 401, "unauthorized"),
    (TooManyAttemptsError, 429, "rate_limited"),
    (NotFoundError, 404, "not_found"),
    (ConflictError, 409, "conflict"),
    (EmbedderMismatchError, 409, "embedder_mismatch"),
    (ImportFormatError, 400, "bad_import"),
    (ConfigError, 400, "invalid_request"),
    (ProviderError, 503, "provider_unavailable"),
    (StoreFullError, 507, "insufficient_storage"),
    (StoreError, 503, "store_unavailable"),
    (MembotError, 400, "invalid_request"),
)
TYPE_OF_STATUS = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid_request",
    429: "rate_limited",
    503: "unavailable",
    507: "insufficient_storage",
}


# The routes OpenAI clients call; their errors take OpenAI's shape.
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})
# OpenAI's ``code`` for membot's kinds where OpenAI has a word of its own; others keep membot's.
# On these routes only a bot (the request's ``model``) can be missing.
OPENAI_CODES = {
    "unauthorized": "invalid_api_key",
    "rate_limited": "rate_limit_exceeded",
    "not_found": "model_not_found",
}


class ApiError(Exception):
    """An answer other than success, decided by the server itself (scope, size, rate).
    ``param`` names the request field at fault, where there is one (OpenAI clients read it);
    ``stored`` the person's line (thread, seq) when it was stored before the failure."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str | None = None,
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
        stored: StoredLine | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind or TYPE_OF_STATUS.get(status, "error")
        self.message = message
        self.headers = headers or {}
        self.param = param
        self.stored = stored


# OpenAI's clients retry a 5xx (and 409, 429) on their own unless told not to: a turn that
# failed once its line was stored, or a bug, must not be sent again.
NO_RETRY = {"x-should-retry": "false"}


def model_unavailable(error: str, thread: str, seq: int) -> ApiError:
    """503 for a turn the model did not answer: the person's line is stored (once), so the
    client sends the next line rather than this one again."""
    return ApiError(
        503,
        f"the model did not answer: {error}. Your line was stored (thread {thread!r}, "
        f"seq {seq}); send the next line when the model is back.",
        kind="llm_unavailable",
        headers=NO_RETRY,
        stored=stored_line(thread, seq),
    )


def stored_line(thread: str, seq: int) -> StoredLine:
    """What an error body says of a line stored before the failure: a client keeps it
    rather than offering to send it again."""
    return {"thread": thread, "seq": seq}


def error_body(kind: str, message: str, stored: StoredLine | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    return {"error": error | {"stored": stored} if stored else error}


def openai_error(
    status: int,
    kind: str,
    message: str,
    param: str | None = None,
    stored: StoredLine | None = None,
) -> dict[str, Any]:
    """An error as OpenAI's API writes it: ``type`` is OpenAI's class of error (a request
    at fault, a rate, or the server), ``code`` membot's kind (OpenAI's word where it has
    one), ``param`` the field at fault or null."""
    if status == 429:
        family = "requests"
    elif status >= 500:
        family = "server_error"
    else:
        family = "invalid_request_error"
    code = OPENAI_CODES.get(kind, kind)
    if code == "model_not_found":
        param = param or "model"
    error: dict[str, Any] = {"message": message, "type": family, "param": param, "code": code}
    return {"error": error | {"stored": stored} if stored else error}


def error_response(
    status: int,
    kind: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    path: str = "",
    param: str | None = None,
    stored: StoredLine | None = None,
) -> JSONResponse:
    """The answer for an error; on an OpenAI-compatible ``path``, in OpenAI's shape, and
    400 for a request membot's own routes answer 422 (OpenAI never answers 422)."""
    if path.rstrip("/") in OPENAI_PATHS:
        status = 400 if status == 422 else status
        body = openai_error(status, kind, message, param, stored)
    else:
        body = error_body(kind, message, stored)
    return JSONResponse(body, status_code=status, headers=headers)


def status_of(error: MembotError) -> tuple[int, str]:
    if isinstance(error, TurnFailedError):  # answered as what went wrong
        failure = error.failure
        return status_of(failure) if isinstance(failure, MembotError) else (500, "internal")
    for cls, status, kind in STATUS_OF:
        if isinstance(error, cls):
            return status, kind
    return 400, "invalid_request"


def without_location(message: str, location: str) -> str:
    """``message`` without where the store is ("the store at /srv/membot.db failed" reads
    "the store failed"): a file path or a database's host is the operator's to know, not
    every key holder's. The server log keeps it."""
    return message.replace(f" at {location}", "").replace(location, "the store")


@dataclass(frozen=True)
class Refusal:
    """How the server answers one of membot's errors or its own, whichever front end met it."""

    status: int
    kind: str
    message: str
    stored: StoredLine | None = None  # the person's line, kept before the turn failed
    headers: Mapping[str, str] | None = None
    param: str | None = None  # the request field at fault


def refusal_of(error: ApiError | MembotError, location: str) -> Refusal:
    """``error`` as an answer: its status and kind, its message without where the store is
    (``location``), and for a turn that failed once its line was stored, that line and
    "do not retry". The server's own refusals (:class:`ApiError`) are answered as made."""
    if isinstance(error, ApiError):
        return Refusal(error.status, error.kind, error.message, error.stored, error.headers,
                       error.param)  # fmt: skip
    status, kind = status_of(error)
    message = without_location(str(error), location)
    if isinstance(error, TurnFailedError):
        return Refusal(status, kind, message, stored_line(error.thread, error.seq), NO_RETRY)
    if isinstance(error, TooManyAttemptsError):
        return Refusal(status, kind, message, headers={"Retry-After": str(ceil(error.retry_after))})
    return Refusal(status, kind, message)


def field_path(item: Mapping[str, Any]) -> str:
    """Where a pydantic error points, dotted ("messages.0.role"), without the request's
    "body" around it."""
    return ".".join(str(part) for part in item.get("loc", ()) if part != "body")


def install_error_handlers(app: FastAPI) -> None:
    async def _refused(request: Request, error: Exception) -> JSONResponse:
        if not isinstance(error, ApiError | MembotError):  # registered for these two only
            raise error
        refused = refusal_of(error, request.app.state.service.memory.location)
        request.state.error_type = refused.kind
        return error_response(
            refused.status,
            refused.kind,
            refused.message,
            refused.headers,
            path=request.url.path,
            param=refused.param,
            stored=refused.stored,
        )

    app.add_exception_handler(ApiError, _refused)
    app.add_exception_handler(MembotError, _refused)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        request.state.error_type = "invalid_request"
        return error_response(
            422,
            "invalid_request",
            _describe(error),
            path=request.url.path,
            param=_field_at_fault(error),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = TYPE_OF_STATUS.get(error.status_code, "error")
        request.state.error_type = kind
        return error_response(
            error.status_code, kind, str(error.detail), error.headers, path=request.url.path
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        # A bug: logged with its traceback for the operator, never shown to the caller.
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        request.state.error_type = "internal"
        message = "membot failed unexpectedly; see the server log"
        return error_response(500, "internal", message, NO_RETRY, path=request.url.path)


def _field_at_fault(error: RequestValidationError) -> str | None:
    """The first field a request got wrong, dotted ("messages.0.role"); None for a body
    that is not JSON at all."""
    for item in error.errors()[:1]:
        if item.get("type") == "json_invalid":
            return None
        return field_path(item) or None
    return None


def _describe(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        if item.get("type") == "json_invalid":  # its "where" is a character offset
            parts.append(f"the body is not valid JSON ({item.get('ctx', {}).get('error', '')})")
            continue
        parts.append(f"{field_path(item) or 'body'}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request could not be read"


# Answers any route may give: the key (401, 403), the body's size (413), what it holds (400,
# 404, 409, 422), the rate (429), and a model, store or disk that cannot serve (503, 507).
ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 422, 429, 503, 507)
ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                # Only the OpenAI-compatible routes send these two, as OpenAI does.
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
                # The person's line, when it was stored before the turn failed.
                "stored": {
                    "type": "object",
                    "required": ["thread", "seq"],
                    "properties": {"thread": {"type": "string"}, "seq": {"type": "integer"}},
                },
            },
        }
    },
}
# Answers streamed as Server-Sent Events when the request asks for ``stream``.
STREAMING_PATHS = {"/v1/bots/{bot}/turns", "/v1/chat/completions"}


def declare_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Declare in an OpenAPI ``schema`` what the server really answers: every error as
    :data:`ERROR_SCHEMA` (FastAPI's own 422 shape is not what the handlers send), and the
    event streams beside JSON."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status in ERROR_STATUSES:
                responses[str(status)] = {"description": HTTPStatus(status).phrase, **error}
            if path in STREAMING_PATHS:
                content = responses["200"].setdefault("content", {})
                # Each event's data is JSON of its own kind (docs/server.md).
                content["text/event-stream"] = {}
    return schema

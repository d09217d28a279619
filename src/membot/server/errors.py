"""Every error the server answers is JSON ``{"error": {"type", "message"}}`` with its status.

membot's own errors are translated here, once, at the adapter boundary; a request the
framework cannot read gets the same shape, and nothing answers a bare 500.
"""

from __future__ import annotations

import logging

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
)

log = logging.getLogger(__name__)

# Most specific first: the first class an error is an instance of decides its answer.
STATUS_OF: tuple[tuple[type[MembotError], int, str], ...] = (
    (AuthError, 401, "unauthorized"),
    (NotFoundError, 404, "not_found"),
    (ConflictError, 409, "conflict"),
    (EmbedderMismatchError, 409, "embedder_mismatch"),
    (ImportFormatError, 400, "bad_import"),
    (ConfigError, 400, "invalid_request"),
    (ProviderError, 503, "provider_unavailable"),
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
}


class ApiError(Exception):
    """An answer other than success, decided by the server itself (scope, size, rate)."""

    def __init__(
        self, status: int, message: str, kind: str | None = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind or TYPE_OF_STATUS.get(status, "error")
        self.message = message
        self.headers = headers or {}


def model_unavailable(error: str, thread: str, seq: int) -> ApiError:
    """503 for a turn the model did not answer: the person's line is stored (once), so the
    client sends the next line rather than this one again."""
    return ApiError(
        503,
        f"the model did not answer: {error}. Your line was stored (thread {thread!r}, "
        f"seq {seq}); send the next line when the model is back.",
        kind="llm_unavailable",
        # OpenAI's clients retry a 5xx on their own, which would store the line again;
        # they obey this header.
        headers={"x-should-retry": "false"},
    )


def error_body(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message}}


def error_response(status: int, kind: str, message: str, headers: dict | None = None):
    return JSONResponse(error_body(kind, message), status_code=status, headers=headers)


def status_of(error: MembotError) -> tuple[int, str]:
    for cls, status, kind in STATUS_OF:
        if isinstance(error, cls):
            return status, kind
    return 400, "invalid_request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(request: Request, error: ApiError):
        request.state.error_type = error.kind
        return error_response(error.status, error.kind, error.message, error.headers)

    @app.exception_handler(MembotError)
    async def _membot(request: Request, error: MembotError):
        status, kind = status_of(error)
        request.state.error_type = kind
        return error_response(status, kind, str(error))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError):
        request.state.error_type = "invalid_request"
        return error_response(422, "invalid_request", _describe(error))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException):
        kind = TYPE_OF_STATUS.get(error.status_code, "error")
        request.state.error_type = kind
        return error_response(error.status_code, kind, str(error.detail), error.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception):
        # A bug: logged with its traceback for the operator, never shown to the caller.
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        request.state.error_type = "internal"
        return error_response(500, "internal", "membot failed unexpectedly; see the server log")


def _describe(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        parts.append(f"{where or 'body'}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request could not be read"

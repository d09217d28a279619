"""The FastAPI application: error handling, request accounting, and the routers of each
front end (REST, OpenAI-compatible, MCP) over one :class:`Service`."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from membot import LLM, ConfigError, EmbedderMismatchError, LLMPool, Memory, resolve_llm
from membot.server import imports, openai_api, person_links, person_memory, rest, sms_route
from membot.server.errors import (
    ApiError,
    declare_errors,
    error_response,
    install_error_handlers,
)
from membot.server.import_jobs import DEFAULT_MAX_IMPORT_MB, ImportJobs
from membot.server.imports import IMPORTS_PATH
from membot.server.mcp import mount_mcp, run_mcp_sessions
from membot.server.ratelimit import parse_rate
from membot.server.service import MAX_BODY_BYTES, Service
from membot.server.webapp import mount_web

log = logging.getLogger(__name__)

DESCRIPTION = """\
membot's memory over HTTP. Every request to `/v1/...` and `/mcp` carries a key:
`Authorization: Bearer KEY` (`membot keys create`); `POST /v1/web/signin` carries the sign-in
link's one-time key there instead. `/healthz`, `/metrics`, the web app (`/`, `/web/`), these
pages and `POST /sms/twilio` (signed by Twilio) take none. Errors are JSON
`{"error": {"type", "message"}}`.
"""


def create_app(
    memory: Memory,
    *,
    llm: LLM | None = None,
    llms: LLMPool | None = None,
    rate_limit: int = 0,
    public_url: str | None = None,
    twilio: sms_route.TwilioSettings | None = None,
    imports_dir: Path | None = None,
    max_import_mb: int = DEFAULT_MAX_IMPORT_MB,
) -> FastAPI:
    """The server over ``memory``; ``llm`` answers for bots whose profile names no model
    (default: the bundled SmolLM2); ``rate_limit``: requests a minute per key (0: none);
    ``twilio``: the SMS route's settings (without them it answers 503); ``imports_dir``: where
    uploaded exports and their jobs' state are kept (default: a folder in the system's
    temporary folder), ``max_import_mb`` the largest export taken."""
    service = Service(
        memory, llm=llm, llms=llms, rate_limit=rate_limit, public_url=public_url,
        imports=ImportJobs(imports_dir), max_import_mb=max_import_mb,
    )  # fmt: skip
    app = FastAPI(
        title="membot", version="0.1.0", description=DESCRIPTION, lifespan=run_mcp_sessions,
        docs_url=None, redoc_url=None,  # /docs is served offline by mount_web
        # No redirect from "/x/" to "/x": a browser follows a 307 with the same method and
        # key, so a DELETE meant for something under a person would forget the person.
        redirect_slashes=False,
    )  # fmt: skip
    app.state.service = service
    app.state.sms = sms_route.SmsGateway(twilio, public_url)
    install_error_handlers(app)
    app.add_middleware(RequestAccounting)
    _add_health_routes(app)
    app.include_router(rest.router)
    app.include_router(imports.router)
    app.include_router(person_memory.router)
    app.include_router(person_links.router)
    app.include_router(openai_api.router)
    app.include_router(sms_route.router)
    mount_mcp(app, service)
    mount_web(app)
    _declare_errors_in_schema(app)
    return app


def _declare_errors_in_schema(app: FastAPI) -> None:
    """``/openapi.json`` with the error answers declared (:func:`declare_errors`)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = declare_errors(build())
        return app.openapi_schema

    # FastAPI's documented way to extend the schema ("Extending OpenAPI"): replace the method.
    app.openapi = openapi  # type: ignore[method-assign]


# Set by ``membot serve --workers N`` to its own pid, for its workers to end with it.
SUPERVISOR_VARIABLE = "MEMBOT_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1  # Linux's prctl option: a signal for this process when its parent dies


def end_with_supervisor(env: Mapping[str, str]) -> None:
    """In a worker of ``membot serve --workers N``, have Linux end this process (SIGTERM)
    when the supervisor does: a supervisor killed alone (SIGKILL, the OOM killer) left its
    workers serving the port, and a new ``membot serve`` could not bind it (a probe).
    Elsewhere, and off Linux, nothing."""
    supervisor = env.get(SUPERVISOR_VARIABLE, "")
    if not supervisor.isdigit() or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("this worker cannot be set to end with its supervisor")
        return
    if os.getppid() != int(supervisor):  # it died before the request took hold
        os.kill(os.getpid(), signal.SIGTERM)


def app_from_environment() -> FastAPI:
    """The app ``membot serve`` starts in each worker, configured by the environment it
    sets (``MEMBOT_DB``, ``MEMBOT_EMBEDDER``, ``MEMBOT_LLM``, ...)."""
    env = os.environ
    end_with_supervisor(env)
    rate_limit = parse_rate(env.get("MEMBOT_RATE_LIMIT") or "0", "MEMBOT_RATE_LIMIT")
    memory = Memory(
        env.get("MEMBOT_DB") or None,
        embedder=env.get("MEMBOT_EMBEDDER") or None,  # None: the store's own
        embedder_key_env=env.get("MEMBOT_EMBEDDER_KEY_ENV") or None,
    )
    memory.warm_up(shared_memory=True)  # before the first request, not during it
    spec = env.get("MEMBOT_LLM") or None
    llm = resolve_llm(spec, key_env=env.get("MEMBOT_LLM_KEY_ENV") or None) if spec else None
    imports_dir = env.get("MEMBOT_IMPORTS_DIR") or None
    return create_app(
        memory,
        llm=llm,
        rate_limit=rate_limit,
        public_url=env.get("MEMBOT_PUBLIC_URL") or None,
        twilio=sms_route.TwilioSettings.from_environment(env),
        imports_dir=Path(imports_dir) if imports_dir else None,
        max_import_mb=_megabytes(env.get("MEMBOT_MAX_IMPORT_MB"), "MEMBOT_MAX_IMPORT_MB"),
    )


def _megabytes(value: str | None, name: str) -> int:
    if not value:
        return DEFAULT_MAX_IMPORT_MB
    if not value.strip().isdigit() or int(value) < 1:
        raise ConfigError(f"{name} is a whole number of megabytes, from 1; not {value!r}")
    return int(value)


class RequestAccounting:
    """Refuse bodies past the documented size and addresses holding a NUL, and count every
    request in the metrics.

    Plain ASGI rather than ``BaseHTTPMiddleware``, which runs the rest of each request in a
    task of its own behind in-memory streams: work every request paid for nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        service: Service = scope["app"].state.service
        state = scope.setdefault("state", {})
        status = 500

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        size = dict(scope["headers"]).get(b"content-length", b"")
        most = _body_limit(service, scope)
        too_large = f"request bodies are limited to {most // (1024 * 1024)} MB"
        received = 0

        async def counting_body() -> Message:
            # A body sent in chunks has no Content-Length to refuse up front: it is counted
            # as it is read, and refused once past the limit (a route reads its whole body
            # before it does anything).
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > most:
                    raise HTTPException(413, too_large)
            return message

        try:
            if size.isdigit() and int(size) > most:
                response = error_response(413, "too_large", too_large, path=scope["path"])
                state["error_type"] = "too_large"
                await response(scope, receive, noting_status)
            elif _holds_nul(scope):
                # A name with a NUL in the path or query reached PostgreSQL, which cannot keep
                # one, and was answered 503 "the store failed". No name holds one.
                path = scope["path"]
                response = error_response(400, "invalid_request", NUL_IN_ADDRESS, path=path)
                state["error_type"] = "invalid_request"
                await response(scope, receive, noting_status)
            else:
                await self.app(scope, counting_body, noting_status)
        except Exception:
            state.setdefault("error_type", "internal")  # answered 500 by the outermost layer
            raise
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            service.metrics.count_request(scope["method"], route, status, state.get("error_type"))


def _body_limit(service: Service, scope: Scope) -> int:
    """The largest body a request may send: an export's upload is larger than the rest."""
    if scope["method"] == "POST" and IMPORTS_PATH.match(scope["path"]):
        return service.max_import_bytes
    return MAX_BODY_BYTES


READY_SECONDS = 2.0  # how long /readyz waits for the store
NUL_IN_ADDRESS = "the address holds a NUL character (%00), which no name holds: remove it"


def _holds_nul(scope: Scope) -> bool:
    """Whether the request's path (decoded) or query string holds a NUL."""
    query = scope.get("query_string", b"")
    return "\x00" in scope["path"] or b"%00" in query or b"\x00" in query


def _add_health_routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["operations"], summary="Liveness: the process answers.")
    async def healthz() -> dict[str, str]:
        # On the event loop, not a worker thread: while the store is down every thread may
        # wait on it, and a liveness probe stalled 27 s behind them (an operator's probe).
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["operations"],
        summary="Readiness: the process answers and reads its store (503 while it cannot).",
    )
    def readyz(request: Request) -> dict[str, str]:
        # /healthz answered 200 all the while PostgreSQL was down (a probe): a load balancer
        # asking it kept sending turns to a server that could only refuse them.
        service: Service = request.app.state.service
        # A store that fails is the usual 503, without its location; within READY_SECONDS,
        # not the 30 s a request waits for a connection (a probe: health checks time out).
        try:
            service.memory.check_store(READY_SECONDS)
        except EmbedderMismatchError as error:  # re-embedded by another process: restart
            raise ApiError(503, f"{error}", "embedder_mismatch") from error
        return {"status": "ok"}

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=PlainTextResponse,
        summary="Prometheus metrics of this worker process.",
    )
    def metrics(request: Request) -> Response:
        service: Service = request.app.state.service
        return Response(service.metrics.text(), media_type="text/plain; version=0.0.4")

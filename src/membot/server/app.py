"""The FastAPI application: error handling, request accounting, and the routers of each
front end (REST, OpenAI-compatible, MCP) over one :class:`Service`."""

from __future__ import annotations

import os

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from membot import LLM, LLMPool, Memory, resolve_llm
from membot.server import openai_api, rest
from membot.server.errors import error_response, install_error_handlers
from membot.server.mcp import mount_mcp, run_mcp_sessions
from membot.server.service import MAX_BODY_BYTES, Service

DESCRIPTION = """\
membot's memory over HTTP. Every request but `/healthz` carries a key:
`Authorization: Bearer KEY` (`membot keys create`). Errors are JSON
`{"error": {"type", "message"}}`.
"""


def create_app(
    memory: Memory,
    *,
    llm: LLM | None = None,
    llms: LLMPool | None = None,
    rate_limit: int = 0,
    public_url: str | None = None,
) -> FastAPI:
    """The server over ``memory``; ``llm`` answers for bots whose profile names no model
    (default: the bundled SmolLM2); ``rate_limit``: requests a minute per key (0: none)."""
    service = Service(memory, llm=llm, llms=llms, rate_limit=rate_limit, public_url=public_url)
    app = FastAPI(
        title="membot", version="0.1.0", description=DESCRIPTION, lifespan=run_mcp_sessions
    )
    app.state.service = service
    install_error_handlers(app)
    app.middleware("http")(_account)
    _add_health_routes(app)
    app.include_router(rest.router)
    app.include_router(openai_api.router)
    mount_mcp(app, service)
    return app


def app_from_environment() -> FastAPI:
    """The app ``membot serve`` starts in each worker, configured by the environment it
    sets (``MEMBOT_DB``, ``MEMBOT_EMBEDDER``, ``MEMBOT_LLM``, ...)."""
    env = os.environ
    memory = Memory(env.get("MEMBOT_DB") or None, embedder=env.get("MEMBOT_EMBEDDER", "minilm"))
    memory.warm_up()
    spec = env.get("MEMBOT_LLM") or None
    llm = resolve_llm(spec, key_env=env.get("MEMBOT_LLM_KEY_ENV") or None) if spec else None
    return create_app(
        memory,
        llm=llm,
        rate_limit=int(env.get("MEMBOT_RATE_LIMIT", "0")),
        public_url=env.get("MEMBOT_PUBLIC_URL") or None,
    )


async def _account(request: Request, call_next) -> Response:
    """Refuse bodies past the documented size, and count every request in the metrics."""
    size = request.headers.get("content-length", "")
    if size.isdigit() and int(size) > MAX_BODY_BYTES:
        response = error_response(
            413, "too_large", f"request bodies are limited to {MAX_BODY_BYTES // (1024 * 1024)} MB"
        )
        request.state.error_type = "too_large"
    else:
        response = await call_next(request)
    route = request.scope.get("route")
    service: Service = request.app.state.service
    service.metrics.count_request(
        request.method,
        getattr(route, "path", "unmatched"),
        response.status_code,
        getattr(request.state, "error_type", None),
    )
    return response


def _add_health_routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["operations"], summary="Liveness: the process answers.")
    def healthz() -> dict[str, str]:
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

"""The web app at ``/``: static HTML, CSS and JavaScript modules shipped in the package (no
CDN, no build step), the security headers of every answer, and the sign-in link's exchange.

The browser keeps its key in ``sessionStorage`` and sends it only in the ``Authorization``
header, never in a cookie: another site can make a browser send cookies, not headers, so no
request from elsewhere carries the key and there is nothing for a CSRF token to guard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from membot import redeem_signin_key
from membot.server.auth import bearer_token, service_of

ASSETS = Path(__file__).parent / "web"
# No inline script or style, nothing from another origin, no framing: text a stranger wrote
# that slipped into the page still could not run.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
# FastAPI's API pages load Swagger UI and ReDoc with inline script: they keep the other
# headers, not the policy.
API_DOCS = ("/docs", "/redoc")

router = APIRouter()


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    # no-cache: a browser asks again (cheaply, by ETag) so a new version is picked up.
    return FileResponse(ASSETS / "index.html", headers={"Cache-Control": "no-cache"})


@router.post("/v1/web/signin", tags=["web"])
def sign_in_with_link(request: Request) -> dict[str, Any]:
    """Trade the one-time key of the link ``membot serve`` printed for a browser session's
    admin key (valid a day); the link works once."""
    new = redeem_signin_key(service_of(request).memory, bearer_token(request))
    return new.to_json()


def mount_web(app: FastAPI) -> None:
    """The page at ``/``, its assets under ``/web/``, and the headers on every answer."""
    app.include_router(router)
    app.mount("/web", StaticFiles(directory=ASSETS), name="web")
    app.add_middleware(SecurityHeaders)


class SecurityHeaders:
    """Add :data:`SECURITY_HEADERS` to every HTTP answer (plain ASGI, as RequestAccounting)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope["path"].startswith(API_DOCS)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [
                    (name, value)
                    for name, value in SECURITY_HEADERS
                    if name not in present and not (docs and name == b"content-security-policy")
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)

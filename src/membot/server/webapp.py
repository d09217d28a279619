"""The web app at ``/``: static HTML, CSS and JavaScript modules shipped in the package (no
CDN, no build step), the security headers of every answer, and the sign-in link's exchange.

The browser keeps its key in ``sessionStorage`` and sends it only in the ``Authorization``
header, never in a cookie: another site can make a browser send cookies, not headers, so no
request from elsewhere carries the key and there is nothing for a CSRF token to guard.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from membot.server.auth import bearer_token, service_of
from membot.service import redeem_signin_key

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
# The API page loads Swagger UI with inline script: it keeps the other headers, not the
# policy. Its script and style are served from here (fastapi-offline's copies), not from a
# CDN, so the page works offline like the rest of membot. No ReDoc page: its script fetches
# a logo from Redocly's CDN, which no option turns off.
API_DOCS = ("/docs",)
DOCS_ASSETS = "/docs-assets"

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
    """The page at ``/``, its assets under ``/web/``, the API pages, and the headers on
    every answer."""
    app.include_router(router)
    app.mount("/web", StaticFiles(directory=ASSETS), name="web")
    _mount_api_docs(app)
    app.add_middleware(SecurityHeaders)


def _mount_api_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI over ``/openapi.json``, with its assets served by this app (the
    app is made with FastAPI's own pages off: they load a CDN's)."""
    from fastapi.openapi.docs import get_swagger_ui_html

    bundled = Path(str(resources.files("fastapi_offline") / "static"))
    app.mount(DOCS_ASSETS, StaticFiles(directory=bundled), name="docs-assets")

    @app.get(API_DOCS[0], include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )


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

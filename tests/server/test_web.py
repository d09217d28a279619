"""The web app's server side, without a browser: the page and its assets, the security
headers of every answer, the streamed turn, the routes the pages use, the sign-in link."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import Server

from membot.server.webapp import ASSETS
from membot.service import create_signin_key

HUMAN_TEXT_SINKS = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(")


def test_the_page_and_its_assets_come_from_the_package_with_a_strict_policy(server: Server):
    page = server.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    for rule in (
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "base-uri 'none'",
    ):
        assert rule in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    for src in re.findall(r'(?:src|href)="([^"]+)"', page.text):
        assert src.startswith("/web/"), src  # nothing from another site: it works offline
        asset = server.client.get(src)
        assert asset.status_code == 200, src
    script = server.client.get("/web/js/app.js")
    assert "javascript" in script.headers["content-type"]
    assert "<script>" not in page.text.replace('<script type="module" src=', "")


def test_every_answer_has_the_headers_and_the_api_pages_keep_their_scripts(server: Server):
    refused = server.client.get("/v1/bots")
    assert refused.status_code == 401
    assert "frame-ancestors 'none'" in refused.headers["content-security-policy"]
    assert refused.headers["x-content-type-options"] == "nosniff"
    docs = server.client.get("/docs")  # Swagger UI runs inline script: no policy there
    assert docs.status_code == 200 and "content-security-policy" not in docs.headers
    assert server.client.get("/web/nothing.js").status_code == 404


def test_the_api_page_loads_nothing_from_outside(server: Server):
    """/docs names only this server's assets (FastAPI's own page loads a CDN's), and those
    assets are served; no ReDoc page (its script fetches a logo from a CDN)."""
    html = server.client.get("/docs")
    assert html.status_code == 200 and "swagger-ui" in html.text
    assert not re.search(r"https?://|[\"'(]//", html.text)
    assets = re.findall(r"""(?:src|href)=["'](/[^"']+)""", html.text)
    assert len(assets) == 3  # script, style, icon
    for asset in assets:
        served = server.client.get(asset)
        assert served.status_code == 200 and len(served.content) > 1000, asset
    assert server.client.get("/redoc").status_code == 404
    assert server.client.get("/openapi.json").json()["info"]["title"] == "membot"


def test_the_scripts_never_parse_text_as_html():
    scripts = sorted(ASSETS.glob("js/*.js"))
    assert len(scripts) >= 8
    for script in scripts:
        source = script.read_text(encoding="utf-8")
        assert not HUMAN_TEXT_SINKS.search(source), script.name
        assert "http://" not in source and "//cdn" not in source, script.name


def _events(response) -> list[dict]:
    return [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]


def test_a_streamed_turn_sends_the_reply_as_written_then_the_whole_trace(server: Server, admin):
    server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    server.llm.enqueue('{"response": "Hello Sam, nice to meet you again.", "citation_ids": []}')
    response = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t1", "text": "Hi, I am Sam", "stream": True},
        headers=admin,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    texts = [event["text"] for event in events[:-1]]
    assert len(texts) > 1 and set(events[-1]) == {"turn"}
    turn = events[-1]["turn"]
    assert "".join(texts) == turn["response"] == "Hello Sam, nice to meet you again."
    assert turn["prompt"] and turn["tokens"]["budget"] and "memory_total" in turn["timings_ms"]
    assert [line.text for line in server.memory.history(user="sam", bot="coach")] == [
        "Hi, I am Sam",
        "Hello Sam, nice to meet you again.",
    ]


def test_a_streamed_turn_whose_model_fails_midway_ends_with_an_error_event(server: Server, admin):
    server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    server.llm.enqueue('{"response": "Half a reply that goes on and on!error connection lost')
    response = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "t1", "text": "Hi", "stream": True},
        headers=admin,
    )
    events = _events(response)
    assert events[-1]["error"]["type"] == "llm_unavailable"
    assert "stored" in events[-1]["error"]["message"]
    lines = server.memory.history(user="sam", bot="coach")
    assert [line.text for line in lines] == ["Hi"]  # the person's line, once


def test_who_am_i_people_and_a_documents_passages(server: Server, admin, tmp_path: Path):
    server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    server.client.post("/v1/bots", json={"name": "other"}, headers=admin)
    person = server.as_key(server.key(bot="coach", user="sam"))
    assert server.client.get("/v1/me", headers=admin).json()["scope"] == "admin"
    me = server.client.get("/v1/me", headers=person).json()
    assert (me["scope"], me["bot"], me["user"]) == ("person", "coach", "sam")
    assert "key" not in me
    for user in ("sam", "alex"):
        server.client.post(
            "/v1/bots/coach/turns",
            json={"user": user, "thread": "t1", "text": "hello", "dry_run": True},
            headers=admin,
        )
    assert server.client.get("/v1/bots/coach/users", headers=admin).json() == {
        "users": ["alex", "sam"]
    }
    assert server.client.get("/v1/bots/coach/users", headers=person).json() == {"users": ["sam"]}
    assert server.client.get("/v1/bots/other/users", headers=person).status_code == 404

    document = tmp_path / "grind.md"
    document.write_text("# Grind\nFine for espresso.\n\n# Milk\nSteam it to 60 degrees.\n")
    with document.open("rb") as sent:
        files = {"files": ("grind.md", sent, "text/markdown")}
        assert server.client.post("/v1/bots/coach/documents", files=files, headers=admin).is_success
    chunks = server.client.get("/v1/bots/coach/documents/grind.md/chunks", headers=person).json()
    assert [(c["heading"], c["text"]) for c in chunks["chunks"]] == [
        ("Grind", "Fine for espresso."),
        ("Milk", "Steam it to 60 degrees."),
    ]
    missing = server.client.get("/v1/bots/coach/documents/none.md/chunks", headers=admin)
    assert missing.status_code == 404


def test_a_template_error_names_its_setting(server: Server, admin):
    server.client.post("/v1/bots", json={"name": "coach"}, headers=admin)
    for template, said in (("{NOPE}", "may not use {NOPE}"), ("{oops", "malformed")):
        answer = server.client.patch("/v1/bots/coach", json={"story_fmt": template}, headers=admin)
        message = answer.json()["error"]["message"]
        assert answer.status_code == 400 and message.startswith("story_fmt") and said in message


def test_the_signin_link_key_is_traded_once_for_a_session_key(server: Server, admin):
    link = create_signin_key(server.memory)
    as_link = server.as_key(link.secret)
    # Not an admin key before its trade: it worked as one any number of times (a probe).
    unspent = server.client.get("/v1/bots", headers=as_link)
    assert unspent.status_code == 401 and "a sign-in link's" in unspent.json()["error"]["message"]
    made = server.client.post("/v1/web/signin", headers=as_link)
    assert made.status_code == 200 and made.json()["scope"] == "admin"
    session = server.as_key(made.json()["key"])
    assert server.client.get("/v1/bots", headers=session).status_code == 200
    again = server.client.post("/v1/web/signin", headers=as_link)
    assert again.status_code == 401  # the link works once, and the browser is told so
    assert again.json()["error"]["message"].startswith("that sign-in link was used already")
    assert server.client.get("/v1/bots", headers=as_link).status_code == 401
    odd = server.client.post("/v1/web/signin", headers={"Authorization": "Bearer clé".encode()})
    assert odd.status_code == 401  # not a 500: a token that is not ASCII is no key
    other = server.client.post("/v1/web/signin", headers=admin)
    assert other.status_code == 401 and "sign-in link" in other.json()["error"]["message"]
    first = create_signin_key(server.memory)
    second = create_signin_key(server.memory)  # a new link retires the one before
    assert (
        server.client.post("/v1/web/signin", headers=server.as_key(first.secret)).status_code == 401
    )
    assert server.client.post("/v1/web/signin", headers=server.as_key(second.secret)).is_success

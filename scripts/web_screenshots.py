"""Refresh the web app's screenshots in docs/web/ (desktop and a 360 px phone).

Runs ``membot serve`` on a fresh store in a temporary folder, on 127.0.0.1, with the bundled
MiniLM and scripted replies (so every run shows the same conversation), and drives Debian's
chromium through Playwright: sign in with the printed link, build a bot, upload
examples/espresso.md, talk over two threads, remember the first, look at the memory, import
a generated ChatGPT export (benchmarks/generated_exports.py), link Sam's text messages.

    .venv/bin/python scripts/web_screenshots.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import ViewportSize, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from generated_exports import write_export  # noqa: E402

from membot.service import sms_sender_name  # noqa: E402

OUT = ROOT / "docs" / "web"
DESKTOP: ViewportSize = {"width": 1440, "height": 960}
PHONE: ViewportSize = {"width": 360, "height": 740}
# Key points are dated within the conversation they come from, or they are left out (the
# grounding check): the conversation is today's.
TODAY = datetime.now(UTC).date().isoformat()
REPLIES = [
    {"response": "Nice to meet you, Sam! Flat whites are a **fine** choice.", "citation_ids": []},
    {
        "response": "Grind it *a little finer than table salt*: 18 grams for a double shot.",
        "citation_ids": ["e1"],
    },
    {
        "points": [
            f"{TODAY}: Sam's birthday is on 14 March.",
            f"{TODAY}: Sam loves flat whites.",
        ],
        "categories": ["preferences", "events"],
    },
    {
        "response": "Welcome back, Sam! A **flat white**, as always:\n\n- a double shot\n"
        "- about 120 ml of steamed milk",
        "citation_ids": ["h1", "e1"],
    },
    {"response": "Hello! I'm Bea.", "citation_ids": []},
    {"response": "Got it, Sam: I'll keep your beans in mind.", "citation_ids": []},
]
# The person's phone, as the SMS route names it (a keyed hash; the number is made up).
TEXTER = sms_sender_name("+15550100042", "the screenshots' own secret")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="membot-shots-") as folder:
        process, link = serve(Path(folder))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=shutil.which("chromium"),
                    args=[
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-background-networking",
                    ],
                )
                desktop = browser.new_page(viewport=DESKTOP)
                desktop.set_default_timeout(30_000)
                tour(desktop, link)
                import_tour(desktop, Path(folder))
                phone = browser.new_page(viewport=PHONE, device_scale_factor=2)
                phone.set_default_timeout(30_000)
                phone_tour(phone, desktop)
                link_tour(desktop)
                browser.close()
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    for shot in sorted(OUT.glob("*.png")):
        print(f"{shot.relative_to(ROOT)}: {shot.stat().st_size // 1024} KB")


def serve(folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = folder / "replies.json"
    script.write_text(json.dumps([json.dumps(reply) for reply in REPLIES]))
    log = folder / "serve.log"
    command = [
        sys.executable,
        "-m",
        "membot",
        "--db",
        str(folder / "shots.db"),
        "--llm",
        f"script:{script}",
        "serve",
        "--port",
        str(port),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMBOT_CACHE_DIR": str(folder / "cache")}
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"http://\S+#signin=\S+", log.read_text())
        if found and _answers(port):
            return process, found[0]
        if process.poll() is not None:
            sys.exit(f"membot serve exited:\n{log.read_text()}")
        time.sleep(0.5)
    process.kill()
    sys.exit(f"membot serve did not start:\n{log.read_text()}")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def tour(page, link: str) -> None:
    base = link.split("#")[0]
    page.goto(base)
    shot(page, "signin-desktop")
    page.goto(link)
    expect(page.get_by_role("heading", name="Bots")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("barista")
    page.get_by_label("The bot's name in the prompt").fill("Bea")
    page.get_by_label("The person's name in the prompt").fill("Sam")
    page.get_by_role("button", name="Create bot").click()
    expect(page.get_by_role("heading", name="Bot barista")).to_be_visible()
    page.get_by_label("Upload documents (text, Markdown, HTML, PDF)").set_input_files(
        ROOT / "examples" / "espresso.md"
    )
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.locator(".document .title")).to_have_text(["espresso.md"])
    page.get_by_role("button", name="Passages").click()
    template = page.get_by_label("story_fmt", exact=True)
    template.fill("The story so far: {FEED} {NOPE}")
    page.get_by_role("button", name="Save profile").click()
    expect(template).to_have_attribute("aria-invalid", "true")
    template.scroll_into_view_if_needed()
    shot(page, "bot-desktop", full=False)

    page.goto(f"{base}#/chat/barista/sam/monday")
    say(page, "Hi, I'm Sam. My birthday is on 14 March and I love flat whites.")
    say(page, "How fine should I grind for a flat white?")
    page.get_by_role("button", name="End thread").click()
    page.get_by_role("button", name="Yes, remember it").click()
    expect(page.locator(".msg.ending")).to_be_visible()
    page.goto(f"{base}#/chat/barista/sam/friday")
    say(page, "Hi Bea, it's Sam again. My usual flat white, please: how much steamed milk goes in?")
    shot(page, "chat-desktop", full=True)
    page.goto(f"{base}#/memory/barista/sam")
    expect(page.get_by_role("heading", name="Memory of sam with barista")).to_be_visible()
    page.get_by_label("Search what sam and the bot said").fill("flat white")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator(".results .match").first).to_be_visible()
    shot(page, "memory-desktop", full=True)


def import_tour(page, folder: Path) -> None:
    """A ChatGPT export of 120 messages imported as Sam's history, its report shown."""
    export = folder / "conversations.json"
    write_export(export, messages=120)
    page.goto(f"{page.url.split('#')[0]}#/import")
    page.get_by_label("Person").fill("sam")
    page.get_by_label("Export file").set_input_files(export)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator(".import-report")).to_contain_text("Stored 120 lines", timeout=120_000)
    shot(page, "import-desktop", full=True)


def phone_tour(page, desktop) -> None:
    key = desktop.evaluate("sessionStorage.getItem('membot.key')")
    base = desktop.url.split("#")[0]
    page.goto(base)
    page.evaluate("key => sessionStorage.setItem('membot.key', key)", key)
    page.goto(f"{base}#/chat/barista/sam/friday")
    expect(page.locator(".msg.bot").first).to_be_visible()
    say(page, "And who are you?")
    page.locator(".messages .msg").last.scroll_into_view_if_needed()
    shot(page, "chat-phone", full=False)
    page.locator(".inspector").scroll_into_view_if_needed()
    shot(page, "inspector-phone", full=False)
    page.goto(f"{base}#/memory/barista/sam")
    expect(page.locator(".summaries")).to_be_visible()
    page.locator(".summaries").scroll_into_view_if_needed()
    shot(page, "memory-phone", full=False)


def link_tour(page) -> None:
    """Sam's text messages linked with Sam: a code shown on Sam's Memory page, then entered
    as the phone's identity (through the API, as the SMS route does for a text LINK <code>)."""
    page.goto(f"{page.url.split('#')[0]}#/memory/barista/sam")
    card = page.locator(".links-card")
    card.get_by_role("button", name="Get a code").click()
    code = card.locator(".link-code").inner_text()
    shot(page, "link-code-desktop", element=card)
    said = {"user": TEXTER, "thread": "texts", "text": "Hi, it's Sam, texting. Beans next week?"}
    call(page, "POST", "/v1/bots/barista/turns", said)
    call(page, "POST", f"/v1/bots/barista/users/{TEXTER}/links", {"code": code})
    page.reload()
    expect(card.locator(".identity .title")).to_have_text(["sam", "text messages"])
    shot(page, "link-linked-desktop", element=card)


def call(page, method: str, path: str, body: dict) -> None:
    """One API request with the page's own key, as the page makes them."""
    status = page.evaluate(
        """async ([method, path, body]) => (await fetch(path, {method, body: JSON.stringify(body),
            headers: {Authorization: `Bearer ${sessionStorage.getItem("membot.key")}`,
                      "Content-Type": "application/json"}})).status""",
        [method, path, body],
    )
    if status != 200:
        sys.exit(f"{method} {path} answered {status}")


def say(page, text: str) -> None:
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
    expect(box).to_be_enabled()
    box.fill(text)
    box.press("Enter")
    expect(page.get_by_role("button", name=re.compile("Inspect the memory")).last).to_be_visible()
    expect(page.locator(".msg.bot[aria-busy]")).to_have_count(0)


def shot(page, name: str, full: bool = False, element=None) -> None:
    """The page (the whole of it with ``full``), or only ``element``."""
    page.wait_for_timeout(300)  # let the status line and scrolling settle
    page.evaluate("document.getElementById('status').textContent = ''")
    if element is not None:
        element.screenshot(path=OUT / f"{name}.png")
    else:
        page.screenshot(path=OUT / f"{name}.png", full_page=full)


if __name__ == "__main__":
    main()

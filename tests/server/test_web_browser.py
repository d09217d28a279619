"""The web app in a real browser: Debian's Chromium driven by Playwright, against the server
on a loopback port (a real store, the hashing embedder, the scripted model).

Every page is watched: a JavaScript dialog (what ``alert(1)`` in a stranger's text would
open), an uncaught error, a console error (a blocked inline handler is one) or a request
outside the app's own paths fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import LiveServer

from membot.service.keys import create_key, revoke_key

CHROMIUM = shutil.which("chromium")
if CHROMIUM is None and os.environ.get("MEMBOT_REQUIRE_BROWSER") == "1":  # CI: never skipped
    raise RuntimeError("MEMBOT_REQUIRE_BROWSER=1 but Debian's chromium is not on PATH")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (make test installs it: apt-get install chromium)",
)
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'")
expect = playwright_api.expect
# A page's own waits are 15 s (set_default_timeout below); assertions wait as long: a step
# that embeds (a key point corrected, a line sent) can pass 5 s on 2 busy cores.
expect.set_options(timeout=15_000)

XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "<script>alert('script')</script>"
APP_PATH = re.compile(r"^/($|web/|v1/)")


@dataclass
class Watch:
    """What a page did that it must not: dialogs, errors, requests elsewhere."""

    origin: str
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)
    allowed_failures: set[tuple[str, int]] = field(default_factory=set)

    def attach(self, page) -> None:
        def on_dialog(dialog) -> None:
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        def on_console(message) -> None:
            if message.type != "error":
                return
            where = message.location.get("url", "")
            status = re.search(r"status of (\d{3})", message.text)
            path = where.removeprefix(self.origin).split("?")[0]
            if status and (path, int(status[1])) in self.allowed_failures:
                return  # a refusal the test asked for
            self.errors.append(f"{message.text} ({where})")

        def on_request(request) -> None:
            url = request.url
            if url.startswith(("data:", "blob:")):
                return
            if not url.startswith(self.origin) or not APP_PATH.match(url[len(self.origin) :]):
                self.strays.append(url)

        page.on("dialog", on_dialog)
        page.on("console", on_console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("request", on_request)

    def allow(self, path: str, status: int) -> None:
        self.allowed_failures.add((path, status))

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a dialog opened: {self.dialogs}"
        assert self.errors == [], self.errors
        assert self.strays == [], f"requests outside the app: {self.strays}"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield launched
        launched.close()


@dataclass
class App:
    server: LiveServer
    page: object
    watch: Watch

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.server.url}/{fragment}")

    def sign_in(self, key: str) -> None:
        self.open()
        self.page.get_by_label("API key").fill(key)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_role("button", name="Sign out")).to_be_visible()

    def reply(self, response: str, citations: tuple[str, ...] = ()) -> None:
        """Queue the model's next reply, in the JSON shape a bot with citations asks for."""
        self.server.llm.enqueue(json.dumps({"response": response, "citation_ids": list(citations)}))

    def say(self, text: str) -> None:
        box = self.page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
        box.fill(text)
        box.press("Enter")
        expect(self.page.locator(".msg.bot[aria-busy]")).to_have_count(0)


def _app(browser, live_server: LiveServer, **context) -> Iterator[App]:
    page = browser.new_page(**context)
    page.set_default_timeout(15_000)
    watch = Watch(live_server.url)
    watch.attach(page)
    yield App(live_server, page, watch)
    page.close()


@pytest.fixture
def app(browser, live_server: LiveServer) -> Iterator[App]:
    yield from _app(browser, live_server, viewport={"width": 1400, "height": 1000})


@pytest.fixture
def phone(browser, live_server: LiveServer) -> Iterator[App]:
    yield from _app(browser, live_server, viewport={"width": 360, "height": 740})


def test_build_a_bot_talk_over_two_threads_recall_remember_and_forget(app: App, tmp_path: Path):
    page = app.page
    app.sign_in(app.server.key(admin=True))

    # Build: a bot, a template error shown beside its field, a threshold saved.
    page.get_by_label("Name", exact=True).fill("barista")
    page.get_by_label("The bot's name in the prompt").fill("Bea")
    page.get_by_role("button", name="Create bot").click()
    expect(page.get_by_role("heading", name="Bot barista", exact=True)).to_be_visible()
    expect(page.get_by_label("bot_name", exact=True)).to_have_value("Bea")
    app.watch.allow("/v1/bots/barista", 400)
    template = page.get_by_label("story_fmt", exact=True)
    original = template.input_value()
    assert "{" in original  # the stored template, shown to be edited
    template.fill("Story so far: {NOPE}")
    page.get_by_role("button", name="Save profile").click()
    expect(template).to_have_attribute("aria-invalid", "true")
    expect(page.locator(f"#{template.get_attribute('id')}-error")).to_contain_text(
        "story_fmt may not use {NOPE}"
    )
    template.fill(original)
    page.get_by_label("threshold", exact=True).fill("0.2")
    page.get_by_role("button", name="Save profile").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    assert app.server.memory.bot_settings("barista").threshold == 0.2

    # A document: uploaded, listed, its passages shown as text.
    document = tmp_path / "espresso.txt"  # plain text keeps its markup as it is
    document.write_text(f"Grind fine for a flat white. {XSS_SCRIPT}\n")
    page.get_by_label("Upload documents (text, Markdown, HTML, PDF)").set_input_files(document)
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.locator(".document .title")).to_have_text(["espresso.txt"])
    page.get_by_role("button", name="Passages").click()
    expect(page.locator(".chunks")).to_contain_text(XSS_SCRIPT)

    # Thread one: what Sam says (markup included) is shown as text; the reply as Markdown.
    app.open("#/chat/barista/sam/monday")
    app.reply(
        f"Noted, **Sam**! {XSS_IMG} [a trap](javascript:alert(2)) [the guide](https://example.org/guide)"
    )
    app.say(f"I love flat whites {XSS_IMG} {XSS_SCRIPT}")
    messages = page.locator(".messages")
    expect(messages.locator(".msg.human")).to_contain_text(f"I love flat whites {XSS_IMG}")
    reply = messages.locator(".msg.bot").last
    expect(reply.locator("strong")).to_have_text("Sam")
    expect(reply).to_contain_text(XSS_IMG)
    expect(reply.locator("a")).to_have_count(1)  # javascript: stays text
    expect(reply.locator("a")).to_have_attribute("href", "https://example.org/guide")
    expect(reply.locator("a")).to_have_attribute("rel", re.compile("noopener"))
    assert page.locator("main img, main script").count() == 0

    # End it with yes: the summary is kept (with the stranger's markup, as text).
    app.server.llm.enqueue(
        json.dumps(
            {
                "points": [f"HUMAN loves flat whites {XSS_IMG} {XSS_SCRIPT}"],  # dated today
                "categories": ["preferences"],
            }
        )
    )
    page.get_by_role("button", name="End thread").click()
    page.get_by_role("button", name="Yes, remember it").click()
    ending = page.locator(".msg.ending")
    expect(ending).to_contain_text("Remembered")
    expect(ending).to_contain_text(XSS_IMG)
    # Ended here, the thread takes a new line all the same: the page says so at once.
    expect(ending).to_contain_text("A new line takes this conversation up again")

    # Thread two: the first thread's line is recalled in the inspector, cited, marked.
    page.get_by_role("button", name="New thread").click()
    app.reply("You love flat whites.", citations=("h1",))
    app.say("Which coffee do I love, flat whites?")
    inspector = page.locator(".inspector")
    expect(inspector).to_contain_text("thread monday")
    matched = inspector.locator("mark")
    expect(matched.first).to_contain_text("I love flat whites")
    expect(inspector.locator(".hints")).to_contain_text(XSS_IMG)
    inspector.get_by_role("button", name="Show hint h1").click()
    expect(inspector.locator("[id$='-hint-h1']")).to_be_focused()
    expect(
        inspector.get_by_role("img", name=re.compile(r"prompt \d+ of \d+ tokens"))
    ).to_be_visible()
    expect(inspector.locator(".timings")).to_contain_text("memory_total")
    inspector.get_by_text("The exact prompt").click()
    expect(inspector.locator(".prompt")).to_contain_text("Which coffee do I love")
    # A model that cannot cite (the bundled one): the memories whose words the reply used.
    app.server.llm.writes_json = False
    app.server.llm.enqueue("Flat whites, of course.")
    app.say("Which coffee do I love?")
    cited = page.locator(".inspect").filter(has=page.get_by_role("heading", name="Citations"))
    expect(cited).to_contain_text("Found by the reply's words (scripted cannot write JSON")
    expect(cited.get_by_role("button", name="Show hint h1")).to_be_visible()
    app.server.llm.writes_json = True

    # Back in the ended thread: the page says a new line takes it up again.
    page.locator(".threads").get_by_role("button", name=re.compile("monday")).click()
    expect(page.get_by_role("heading", name="Thread monday")).to_be_visible()
    expect(page.locator(".msg.ending")).to_contain_text("takes this conversation up again")

    # Memory: the summary with its dates and categories, search, then forget the thread.
    app.open("#/memory/barista/sam")
    summaries = page.locator(".summaries")
    expect(summaries).to_contain_text("HUMAN loves flat whites")
    expect(summaries.locator(".tags")).to_have_text("preferences")
    page.get_by_label("Search what sam and the bot said").fill("flat whites")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator(".results .match").first).to_contain_text("flat whites")
    monday = page.locator(".thread-item", has_text="monday")
    monday.get_by_role("button", name="Forget thread").click()
    page.get_by_role("dialog").get_by_role("button", name="Forget thread").click()
    expect(page.locator(".thread-item", has_text="monday")).to_have_count(0)
    expect(page.get_by_text("No summaries kept")).to_be_visible()
    assert app.server.memory.summaries(user="sam", bot="barista") == []
    assert page.locator("main img, main script").count() == 0
    app.watch.assert_clean()


def test_talk_with_it_opens_the_chat_as_the_person_last_talked_as(app: App):
    """Going from the chat to a bot's page and back by "Talk with it" kept the bot but lost
    the person, who had to be typed again."""
    page = app.page
    app.server.memory.create_bot("barista")
    app.sign_in(app.server.key(admin=True))
    app.open("#/chat/barista/sam/monday")
    expect(page.get_by_role("heading", name="Thread monday")).to_be_visible()

    app.open("#/bots/barista")
    page.get_by_role("link", name="Talk with it").click()

    expect(page.get_by_label("Talk as (the person's name)")).to_have_value("sam")
    expect(page.get_by_role("heading", name=re.compile(r"^Thread "))).to_be_visible()
    assert "/chat/barista/sam/" in page.url
    app.open("#/memory")  # offered there too, not opened
    expect(page.get_by_label("Person", exact=True)).to_have_value("sam")
    app.watch.assert_clean()


def test_a_person_key_talks_and_cannot_open_another_persons_page(app: App):
    memory = app.server.memory
    memory.create_bot("coach")
    memory.add("Bob's secret: the safe code is 4711", user="bob", bot="coach", thread="t1")
    app.sign_in(app.server.key(bot="coach", user="sam"))
    page = app.page
    expect(page.locator("#nav a")).to_have_text(["Chat", "Memory", "Import"])  # no building
    expect(page.locator(".who-talks")).to_contain_text("You are sam, talking with coach")
    app.reply("Hello Sam.")
    app.say("Hi there")
    expect(page.locator(".msg.bot").last).to_contain_text("Hello Sam.")

    app.watch.allow("/v1/bots/coach/users/bob/threads", 403)
    app.watch.allow("/v1/bots/coach/users/bob/memories", 403)
    app.watch.allow("/v1/bots/coach/users/bob/memory", 403)
    app.open("#/memory/coach/bob")
    expect(page.get_by_role("heading", name="Not allowed", exact=True)).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("only as its own person")
    assert "4711" not in page.content()
    app.open("#/bots/coach")  # building is not a person key's: the chat instead
    expect(page.get_by_role("heading", name="Chat", exact=True)).to_be_visible()
    app.open("#/memory")
    expect(page.get_by_role("heading", name="Memory of sam with coach", exact=True)).to_be_visible()
    app.watch.assert_clean()


def test_a_person_imports_their_claude_export_and_sees_what_was_left_out(app: App, tmp_path: Path):
    from export_files import claude_export, write_zip

    app.server.memory.create_bot("coach")
    conversations = claude_export()
    del conversations[0]["chat_messages"][2]  # the long paste: this test is about the page
    conversations[1]["name"] = f"Cats {XSS_IMG}"
    conversations[1]["chat_messages"].append({"uuid": "x", "sender": "robot", "text": XSS_SCRIPT})
    export = write_zip(tmp_path / "claude-export.zip", conversations)
    app.sign_in(app.server.key(bot="coach", user="sam"))
    page = app.page
    page.get_by_role("link", name="Import").click()
    expect(page.get_by_role("heading", name="Import your history")).to_be_visible()
    page.get_by_label("Export file").set_input_files(export)
    page.get_by_role("button", name="Import", exact=True).click()
    report = page.locator(".import-report")
    expect(report).to_contain_text("Stored 8 lines of 2 conversations.")
    expect(page.locator(".import-counts")).to_contain_text("claude-export.zip (claude) · done")
    expect(report).to_contain_text("1 the model's reasoning")
    expect(report.locator(".problems")).to_contain_text("unknown sender 'robot'")
    assert page.locator("main img, main script").count() == 0
    assert re.search(r"#/import/coach/[0-9a-f]{24}$", page.url)
    page.reload()  # the address follows the job again
    expect(report).to_contain_text("Stored 8 lines of 2 conversations.")
    page.get_by_role("link", name="See sam's memory").click()
    expect(page.locator(".thread-item .title")).to_contain_text([f"Cats {XSS_IMG}"])
    app.watch.assert_clean()


def test_a_refused_line_stays_in_the_box_and_errors_can_be_read(app: App):
    """A 40,000-character line vanished: the box was emptied and the refusal was shown out of
    sight. And errors were drawn red on red, and never went away. Then the box cut a longer
    paste at 32,000 characters without a word."""
    app.server.memory.create_bot("coach")
    app.sign_in(app.server.key(admin=True))
    page = app.page
    app.open("#/chat/coach")  # no person yet: "New thread" says what is missing
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
    person = page.get_by_label("Talk as (the person's name)")
    expect(box).to_be_disabled()
    background = "node => getComputedStyle(node).backgroundColor"
    assert box.evaluate(background) != person.evaluate(background)  # looks disabled too
    page.get_by_role("button", name="New thread").click()
    expect(page.get_by_role("status")).to_contain_text("Enter the person's name first")
    person.fill("sam")  # done as asked: the request goes away
    page.get_by_role("button", name="Open").click()
    expect(box).to_be_enabled()
    expect(page.locator("#status")).to_have_text("")
    assert box.get_attribute("maxlength") is None  # a longer paste is kept whole
    too_long = "x" * 1_000_001
    box.evaluate("(node, text) => { node.value = text; }", too_long)  # pasted past the limit
    box.press("Enter")
    beside = page.locator(f"#{box.get_attribute('id')}-error")
    expect(beside).to_contain_text("1000001 characters")
    expect(beside).to_contain_text("limited to 1000000")
    expect(beside).to_be_in_viewport()
    expect(page.locator(".msg")).to_have_count(0)  # not sent, so not shown as sent
    assert box.input_value() == too_long
    # The server's own 413 (a limit the page does not know) is shown the same way.
    app.watch.allow("/v1/bots/coach/turns", 413)
    refusal = {"error": {"type": "too_large", "message": "a line is limited to 100 characters"}}
    page.route("**/v1/bots/coach/turns", lambda route: route.fulfill(status=413, json=refusal))
    box.fill("A line the server refuses")
    box.press("Enter")
    expect(beside).to_contain_text("Not sent: a line is limited to 100 characters")
    expect(page.locator(".msg")).to_have_count(0)
    assert box.input_value() == "A line the server refuses"
    page.unroute("**/v1/bots/coach/turns")
    assert app.server.memory.count_lines() == 0
    colours = page.evaluate(
        """() => { const status = document.getElementById('status');
        status.className = 'status error'; status.textContent = 'Not Found';
        const style = getComputedStyle(status);
        return [style.color, style.backgroundColor]; }"""
    )
    assert colours[0] != colours[1], colours
    page.locator("#status").click()
    expect(page.locator("#status")).to_have_text("")
    # A model that cannot cite (the bundled one): the inspector says so, not "cited nothing".
    app.server.llm.writes_json = False
    box.fill("")
    app.server.llm.enqueue("Hello Sam.")
    app.say("Hello")
    expect(beside).to_have_text("")
    expect(page.locator(".inspect").filter(has_text="No citations")).to_contain_text(
        # not "citations off: scripted"; nothing it said came from a memory
        "No citations: scripted cannot write JSON reliably; the reply used no memory's words."
    )
    # A line stored before its turn failed stays out of the box: sent again, it would be
    # stored twice.
    app.server.llm.enqueue("!error the model is down", "!error still down", "!error down")
    app.watch.allow("/v1/bots/coach/turns", 503)
    box.fill("Are you there?")
    box.press("Enter")
    expect(page.locator(".msg.bot .error").last).to_contain_text("Your line was stored")
    expect(page.locator(".msg.human").last).to_contain_text("Are you there?")
    assert box.input_value() == ""
    assert [line.text for line in app.server.memory.history(user="sam")][-1] == "Are you there?"
    app.watch.assert_clean()


def test_a_line_sent_with_a_revoked_key_is_not_shown_as_sent(app: App):
    """Sent with a revoked key, the line looked sent and the refusal was shown as the bot's
    words, and an uncaught error went to the console."""
    memory = app.server.memory
    memory.create_bot("coach")
    made = create_key(memory, bot="coach", user="sam")
    app.sign_in(made.secret)
    page = app.page
    app.reply("Hello Sam.")
    app.say("Hi there")
    expect(page.locator(".threads .meta")).to_have_text(["2 lines"])  # the page is done
    revoke_key(memory, made.key.id)
    app.watch.allow("/v1/bots/coach/turns", 401)
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
    box.fill("Still there?")
    box.press("Enter")
    beside = page.locator(f"#{box.get_attribute('id')}-error")
    expect(beside).to_contain_text("no longer valid")
    expect(beside).to_contain_text("sign in again")
    expect(page.locator(".msg.human")).to_have_text([re.compile("Hi there")])
    expect(page.locator(".msg.bot")).to_have_count(1)
    expect(page.locator(".msg.bot")).not_to_contain_text("revoked")
    assert box.input_value() == "Still there?"
    app.watch.assert_clean()


def test_the_chat_shows_the_bot_and_person_a_line_goes_to(app: App):
    """What the chat shows and where a line goes drifted apart: another person opened under
    the last one's inspector, a bot chosen in the list but not opened, a name with "/" that
    left the last person on screen, a bot in the address that does not exist."""
    memory = app.server.memory
    memory.create_bot("barista")
    memory.create_bot("coach", bot_name="Cy")
    memory.add("Just one line", user="kim", bot="barista", thread="solo")
    app.sign_in(app.server.key(admin=True))
    page = app.page
    app.open("#/chat/nosuchbot/sam/x")
    expect(page.get_by_role("status")).to_contain_text("No bot named nosuchbot")
    expect(page.get_by_label("Bot", exact=True)).to_have_value("barista")

    # A new thread has nothing to end; the bot's lines carry its name from the profile.
    app.open("#/chat/coach/sam")
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
    expect(box).to_be_enabled()  # the thread has loaded
    end = page.get_by_role("button", name="End thread")
    expect(end).to_be_disabled()
    app.reply("Hi Sam.")
    app.say("I am sam")
    expect(page.locator(".msg.bot .who")).to_contain_text(["Cy"])
    expect(end).to_be_enabled()
    inspector = page.locator(".inspector")
    expect(inspector.locator(".prompt")).to_contain_text("I am sam")

    # Another person: nothing of sam's turn stays in the inspector.
    person = page.get_by_label("Talk as (the person's name)")
    person.fill("alex")
    page.get_by_role("button", name="Open").click()
    expect(page).to_have_url(re.compile("/chat/coach/alex/"))
    expect(box).to_be_enabled()  # alex's thread has loaded
    expect(inspector).not_to_contain_text("I am sam")
    expect(inspector).to_contain_text("Send a line")

    # A name typed but not opened: alex's thread is still shown, so nothing can be sent to
    # it until Open (a line went to the person shown, not the one named).
    person_error = page.locator(f"#{person.get_attribute('id')}-error")
    person.fill("jo")
    expect(person_error).to_contain_text("Open to talk as jo")
    expect(box).to_be_disabled()
    person.fill("alex")
    expect(box).to_be_enabled()
    expect(person_error).to_have_text("")

    # A person the server will not open (here, a failing store) is said, and shows nobody.
    threads = "/v1/bots/coach/users/zed/threads"
    app.watch.allow(threads, 503)
    failure = {"error": {"kind": "store", "message": "the store failed"}}
    page.route(f"**{threads}", lambda route: route.fulfill(status=503, json=failure))
    person.fill("zed")
    page.get_by_role("button", name="Open").click()
    expect(page.get_by_role("status")).to_contain_text("Could not open zed's threads")
    expect(box).to_be_disabled()
    expect(inspector).to_contain_text("Send a line")
    page.unroute(f"**{threads}")
    person.fill("alex")
    page.get_by_role("button", name="Open").click()
    expect(box).to_be_enabled()

    # Another bot chosen in the list: the chat is that bot's, and so is the next line.
    page.get_by_label("Bot", exact=True).select_option("barista")
    expect(page).to_have_url(re.compile("/chat/barista/alex/"))
    app.reply("Hello Alex.")
    app.say("Hello barista")
    expect(page.locator(".msg.bot .who")).to_contain_text(["barista"])
    assert [line.text for line in memory.history(user="alex", bot="barista")] == [
        "Hello barista",
        "Hello Alex.",
    ]
    assert memory.history(user="alex", bot="coach") == []

    # A name with "/" cannot be part of the address: refused, and alex is not left showing.
    person.fill("a/b")
    page.get_by_role("button", name="Open").click()
    expect(page.locator(f"#{person.get_attribute('id')}-error")).to_contain_text('cannot hold "/"')
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator(".threads li")).to_have_count(0)
    expect(box).to_be_disabled()
    expect(end).to_be_disabled()

    # One line is "1 line".
    app.open("#/chat/barista/kim")
    expect(page.locator(".threads .meta")).to_have_text(["1 line"])
    app.open("#/memory/barista/kim")
    expect(page.locator(".thread-item .meta")).to_contain_text(["1 line ·"])
    app.watch.assert_clean()


def test_replies_and_openings_that_end_late_land_where_they_belong(app: App, monkeypatch):
    """A reply that ended after another person was opened showed its prompt under them; two
    bots chosen quickly drew both threads into one list; an answer lost on the way made the
    page say "Not sent" of a line the server had stored, and sending it again stored it
    twice (a review's probes)."""
    memory = app.server.memory
    for bot in ("barista", "coach", "zed"):
        memory.create_bot(bot)
        memory.add(f"hello {bot}", user="sam", bot=bot, thread="t")
    app.sign_in(app.server.key(admin=True))
    page = app.page
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")

    # Two bots chosen at once: the list shows the last one's thread, once.
    app.open("#/chat/barista/sam/t")
    expect(page.locator(".msg")).to_have_count(1)
    select = page.get_by_label("Bot", exact=True)
    select.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(page).to_have_url(re.compile("/chat/zed/sam/t"))
    expect(box).to_be_enabled()
    expect(page.locator(".msg .body")).to_have_text(["hello zed"])

    # Sam's reply ends after alex is opened: alex's inspector stays empty.
    real = memory.recall

    def slow(*args, **kwargs):
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "recall", slow)
    app.reply("Hi Sam.")
    box.fill("I am sam")
    box.press("Enter")
    page.get_by_label("Talk as (the person's name)").fill("alex")
    page.get_by_role("button", name="Open").click()
    expect(page).to_have_url(re.compile("/chat/zed/alex/"))
    expect(box).to_be_enabled()
    page.wait_for_function("() => !document.querySelector('.msg.bot[aria-busy]')")
    page.wait_for_timeout(2000)  # sam's reply has ended by now
    assert [line.text for line in memory.history(user="sam", bot="zed")][-1] == "Hi Sam."
    expect(page.locator(".inspector-slot")).not_to_contain_text("I am sam")
    monkeypatch.setattr(memory, "recall", real)

    # The answer to a stored line is lost on the way: the thread is shown as the server
    # holds it, and the line is not offered again.
    app.open("#/chat/zed/sam/t")
    expect(box).to_be_enabled()

    def lost(route):
        route.fetch()  # the server takes the turn and stores both lines
        route.abort("connectionreset")  # the page never sees the answer

    app.reply("Yes, here.")
    page.route("**/v1/bots/zed/turns", lost)
    box.fill("Are you there?")
    box.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("The answer was lost")
    expect(page.locator(".msg.human .body").last).to_have_text("Are you there?")
    assert box.input_value() == ""
    stored = [line.text for line in memory.history(user="sam", bot="zed", thread="t")]
    assert stored.count("Are you there?") == 1
    page.unroute("**/v1/bots/zed/turns")
    app.watch.errors.clear()  # the aborted request's console line


def _fits(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page is {width} px wide at a 360 px viewport"


def _unlabelled(page) -> list[str]:
    return page.evaluate(
        """[...document.querySelectorAll('input, select, textarea, button')]
        .filter(c => !(c.labels && c.labels.length) && !c.getAttribute('aria-label')
                     && !(c.textContent || '').trim())
        .map(c => c.outerHTML.slice(0, 80))"""
    )


def test_at_phone_width_from_the_keyboard(phone: App):
    page = phone.page
    phone.server.memory.create_bot("coach")
    phone.open()
    expect(page.get_by_label("API key")).to_be_focused()
    help_text = page.locator(".signin .help")
    expect(help_text.locator("code")).to_have_text("membot keys create")  # not `backticks`
    expect(help_text).not_to_contain_text("`")
    page.keyboard.type(phone.server.key(admin=True))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Bots", exact=True)).to_be_visible()
    _fits(page)
    assert _unlabelled(page) == []

    page.get_by_role("link", name="coach", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Bot coach", exact=True)).to_be_visible()
    _fits(page)
    assert _unlabelled(page) == []

    phone.open("#/chat/coach/sam/t1")
    box = page.get_by_label("Message (Enter sends, Shift+Enter a new line)")
    expect(box).to_be_enabled()
    box.focus()
    phone.reply("Hi Sam, *welcome*.")
    page.keyboard.type("Hello, I am Sam")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.bot em")).to_have_text("welcome")
    _fits(page)
    assert _unlabelled(page) == []
    # Tab from the message box reaches the buttons in order; Enter and Escape work on them.
    page.get_by_role("button", name="End thread").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("button", name="Yes, remember it")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert phone.server.memory.thread_state(bot="coach", user="sam", thread="t1").ended_at is None
    page.get_by_role("button", name=re.compile("Inspect the memory of reply")).focus()
    page.keyboard.press("Enter")
    expect(page.locator(".inspector")).to_contain_text("Token budget")
    _fits(page)

    phone.open("#/memory/coach/sam")
    expect(page.get_by_role("heading", name="Memory of sam with coach", exact=True)).to_be_visible()
    _fits(page)
    assert _unlabelled(page) == []
    phone.watch.assert_clean()


@pytest.mark.slow
def test_membot_serve_prints_a_one_time_signin_link(browser, tmp_path: Path):
    from test_serve_command import serve_subprocess

    with serve_subprocess(tmp_path) as server:
        # Printed before the server starts listening, so already in its output.
        found = re.search(r"http://\S+#signin=\S+", server.output())
        assert found, server.output()
        link = found[0]
        assert link.startswith(f"{server.url}/#signin=mb_")
        page = browser.new_page()
        page.set_default_timeout(15_000)
        watch = Watch(server.url)
        watch.attach(page)
        page.goto(link)
        expect(page.get_by_role("heading", name="Bots", exact=True)).to_be_visible()
        expect(page.locator("#who")).to_have_text("admin")
        # A new store opens on a bot to talk with, not an empty list.
        expect(page.locator(".title", has_text="membot")).to_be_visible()
        assert "no bots yet: made 'membot'" in server.output()
        assert "signin" not in page.url  # the code left the address bar
        watch.allow("/v1/web/signin", 401)
        other = browser.new_page()
        watch.attach(other)
        other.goto(link)  # the same link again: it worked once
        expect(other.get_by_text("The sign-in link did not work")).to_be_visible()
        watch.assert_clean()


def test_the_api_page_renders_the_schema_offline(browser, live_server: LiveServer):
    """Swagger UI draws the API from this server's files alone: every request the page
    makes stays on the server, and the routes appear."""
    page = browser.new_page()
    page.set_default_timeout(15_000)
    watch = Watch(live_server.url)
    watch.attach(page)
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(
        (live_server.url, "data:", "blob:")) else None)  # fmt: skip
    try:
        page.goto(f"{live_server.url}/docs")
        expect(page.locator(".opblock-summary-path").first).to_be_visible()
        expect(page.get_by_text("/v1/bots/{bot}/turns").first).to_be_visible()
    finally:
        page.close()
    assert outside == []
    assert watch.errors == [] and watch.dialogs == []


def test_a_person_sees_corrects_and_deletes_their_own_memory(app: App):
    """With their own key: the key points kept about them with their dates, one corrected
    (its old text shown as history), one deleted; one line deleted from a thread and one
    from the search's results, each asked first."""
    memory = app.server.memory
    memory.create_bot("coach")
    memory.add("My cat is called Miso", user="sam", bot="coach", thread="cats")
    memory.add("I row on Sundays", user="sam", bot="coach", thread="sport")
    memory.add("I swim on Mondays", user="sam", bot="coach", thread="sport")
    points = "- 2026-05-01: sam said: My cat is called Miso.\n- 2026-05-01: sam said: I row."
    memory.add_summary(bot="coach", user="sam", thread="cats", text=points)
    app.sign_in(app.server.key(bot="coach", user="sam"))
    page = app.page
    # The chat a person key opens on picks its thread first (and names it in the address).
    expect(page.get_by_role("heading", name=re.compile(r"^Thread "))).to_be_visible()
    app.open("#/memory")
    expect(page.get_by_role("heading", name="Memory of sam with coach", exact=True)).to_be_visible()
    kept = page.locator(".key-point")
    expect(kept).to_have_count(2)

    kept.first.get_by_role("button", name="Correct").click()
    page.get_by_label("Corrected key point").fill("My cat is called Luna.")
    page.get_by_role("button", name="Save correction").click()
    expect(page.locator(".key-point").first).to_contain_text("My cat is called Luna.")
    page.locator(".key-point").first.get_by_text("Corrected once").click()
    expect(page.locator(".key-point .history")).to_contain_text("sam said: My cat is called Miso.")

    page.locator(".key-point").nth(1).get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete key point").click()
    expect(page.locator(".key-point")).to_have_count(1)

    sport = page.locator(".thread-item", has_text="sport")
    sport.get_by_role("button", name="Lines").click()
    sport.get_by_role("button", name="Delete line: I row on Sundays").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete line").click()
    expect(sport.locator(".line")).to_have_count(1)

    page.get_by_label("Search what sam and the bot said").fill("swim")
    page.get_by_role("button", name="Search", exact=True).click()
    found = page.locator(".results .match", has_text="I swim on Mondays")
    found.get_by_role("button", name=re.compile("^Delete line")).click()
    page.get_by_role("dialog").get_by_role("button", name="Delete line").click()
    expect(found).to_have_count(0)

    assert [line.text for line in memory.history(user="sam")] == ["My cat is called Miso"]
    (point,) = memory.key_points(user="sam")
    assert point.text == "My cat is called Luna." and len(point.corrections) == 1
    app.watch.assert_clean()


def test_a_person_links_their_text_messages_and_another_identity(app: App):
    """ "Link another channel" on the Memory page: a code shown with its countdown and where
    to enter it (entered by the person's phone), a wrong code refused in place, a code from
    another identity entered, and the phone unlinked after asking. No address holds a code."""
    memory = app.server.memory
    memory.create_bot("coach")
    phone = "sms-" + "5a" * 16
    for person in ("sam", phone, "sam-mcp"):
        memory.add(f"Hello from {person}", user=person, bot="coach", thread="hello")
    memory.add("Texted on the bus", user=phone, bot="coach", thread="texts")
    addresses: list[str] = []
    app.page.on("request", lambda request: addresses.append(request.url))
    app.sign_in(app.server.key(bot="coach", user="sam"))
    page = app.page
    # The chat a person key opens on picks its thread first (and names it in the address).
    expect(page.get_by_role("heading", name=re.compile(r"^Thread "))).to_be_visible()
    app.open("#/memory/coach/sam")
    links = page.locator(".links-card")
    expect(links.locator(".identities")).to_contain_text("not linked with any other channel")

    links.get_by_role("button", name="Get a code").click()
    shown = links.locator(".link-code")
    expect(shown).to_have_text(re.compile(r"^[0-9A-Z]{4}-[0-9A-Z]{4}$"))
    code = shown.inner_text()
    expect(links.locator(".countdown")).to_have_text(re.compile(r"^(10:00|9:[0-5]\d)$"))
    expect(links).to_contain_text(f"LINK {code}")
    memory.link_with_code(code, user=phone, bot="coach")  # the phone texted LINK <code>
    app.open("#/memory")  # the page again, read afresh
    expect(links.locator(".identity .title")).to_have_text(["sam", "text messages"])
    # One memory: the phone's thread is listed too (named like sam's own), read as the phone's.
    texted = page.locator(".thread-item", has=page.locator(".badge", has_text="text messages"))
    texted = texted.filter(has=page.locator(".title", has_text="hello"))
    texted.get_by_role("button", name="Lines").click()
    expect(texted.locator(".line .text")).to_have_text([f"Hello from {phone}"])
    expect(texted.get_by_role("button", name="Forget thread")).to_have_count(0)  # not sam's
    # The chat talks as sam, in sam's own threads only.
    app.open("#/chat/coach/sam/hello")
    expect(page.locator(".threads .name")).to_have_text(["hello"])
    expect(page.locator(".msg")).to_have_text([re.compile("Hello from sam")])
    app.open("#/memory/coach/sam")

    app.watch.allow("/v1/bots/coach/users/sam/links", 400)
    box = links.get_by_label("Enter a code from another channel")
    box.fill("ZZZZ-ZZZZ")
    links.get_by_role("button", name="Link", exact=True).click()
    expect(links.locator(".error")).to_contain_text("not valid")
    other = memory.link_code(user="sam-mcp", bot="coach").code
    box.fill(other.lower())
    links.get_by_role("button", name="Link", exact=True).click()
    expect(links.locator(".identity .title")).to_have_text(["sam", "sam-mcp", "text messages"])

    links.get_by_role("button", name="Unlink text messages").click()
    page.get_by_role("dialog").get_by_role("button", name="Unlink").click()
    expect(links.locator(".identity .title")).to_have_text(["sam", "sam-mcp"])
    assert memory.linked(user="sam", bot="coach").linked == ("sam", "sam-mcp")
    assert memory.linked(user=phone, bot="coach").linked == (phone,)
    for made in (code, other):
        assert not [url for url in addresses if made in url or made.lower() in url]
    app.watch.assert_clean()

"""REST for linking a person's identities: a code made where the person is known, entered as
their identity on another channel; person keys act only as their own person, bot keys for any
person of their bot; wrong codes 400, too many 429; and no code in any log line, the access
log of a real uvicorn included."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from conftest import Server
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key

BASE = "/v1/bots/coach/users"


def known(memory: Memory, *people: str) -> None:
    """People the bot knows (a link code is made only for someone it knows)."""
    for person in people:
        memory.add(f"Hello, {person} here", user=person, thread="hello", bot="coach")


def test_a_person_links_two_identities_with_their_own_keys(server: Server) -> None:
    known(server.memory, "ana", "ana-mcp")
    web = server.as_key(server.key(bot="coach", user="ana"))
    mcp = server.as_key(server.key(bot="coach", user="ana-mcp"))

    made = server.client.post(f"{BASE}/ana/link-codes", headers=web)
    assert made.status_code == 200, made.text
    code = made.json()["code"]
    assert len(code.replace("-", "")) == 8 and made.json()["expires_at"]

    # Entered as typed by a person: lower case, a space for the hyphen.
    typed = code.replace("-", " ").lower()
    entered = server.client.post(f"{BASE}/ana-mcp/links", json={"code": typed}, headers=mcp)
    assert entered.status_code == 200, entered.text
    assert entered.json() == {"person": "ana-mcp", "linked": ["ana", "ana-mcp"]}
    seen = server.client.get(f"{BASE}/ana/links", headers=web).json()
    assert seen == {"person": "ana", "linked": ["ana", "ana-mcp"]}

    # Single use: the same code again is refused, as any wrong code is.
    again = server.client.post(f"{BASE}/ana-mcp/links", json={"code": code}, headers=mcp)
    assert again.status_code == 400 and "not valid" in again.json()["error"]["message"]

    split = server.client.delete(f"{BASE}/ana-mcp/links", headers=mcp)
    assert split.status_code == 200 and split.json()["linked"] == ["ana-mcp"]
    assert server.client.get(f"{BASE}/ana/links", headers=web).json()["linked"] == ["ana"]


def test_a_person_unlinks_one_of_their_identities_from_their_own_page(server: Server) -> None:
    known(server.memory, "ana", "ana-mcp", "sms-0123")
    coach = server.as_key(server.key(bot="coach"))
    for other in ("ana-mcp", "sms-0123"):
        code = server.client.post(f"{BASE}/ana/link-codes", headers=coach).json()["code"]
        linked = server.client.post(f"{BASE}/{other}/links", json={"code": code}, headers=coach)
        assert linked.status_code == 200, linked.text
    web = server.as_key(server.key(bot="coach", user="ana"))
    assert server.client.get(f"{BASE}/ana/links", headers=web).json()["linked"] == [
        "ana", "ana-mcp", "sms-0123"
    ]  # fmt: skip

    left = server.client.delete(f"{BASE}/ana/links/sms-0123", headers=web)
    assert left.status_code == 200 and left.json()["linked"] == ["ana", "ana-mcp"]
    # An identity that is not linked with the person is not theirs to unlink.
    known(server.memory, "bo")
    stranger = server.client.delete(f"{BASE}/ana/links/bo", headers=web)
    assert stranger.status_code == 404
    assert server.client.delete(f"{BASE}/ana/links/sms-0123", headers=web).status_code == 404


def test_a_bot_key_links_any_person_of_its_bot(server: Server) -> None:
    known(server.memory, "ana", "bo")
    coach = server.as_key(server.key(bot="coach"))
    code = server.client.post(f"{BASE}/ana/link-codes", headers=coach).json()["code"]
    linked = server.client.post(f"{BASE}/bo/links", json={"code": code}, headers=coach)
    assert linked.status_code == 200 and linked.json()["linked"] == ["ana", "bo"]


def test_another_persons_key_is_refused_and_another_bots_key_finds_nothing(
    server: Server,
) -> None:
    known(server.memory, "ana", "bo")
    bo = server.as_key(server.key(bot="coach", user="bo"))
    ana = server.as_key(server.key(bot="coach", user="ana"))
    code = server.client.post(f"{BASE}/ana/link-codes", headers=ana).json()["code"]

    assert server.client.post(f"{BASE}/ana/link-codes", headers=bo).status_code == 403
    assert server.client.get(f"{BASE}/ana/links", headers=bo).status_code == 403
    assert server.client.delete(f"{BASE}/ana/links", headers=bo).status_code == 403
    # bo cannot enter ana's code as ana either: a person key acts only as its own person.
    refused = server.client.post(f"{BASE}/ana/links", json={"code": code}, headers=bo)
    assert refused.status_code == 403
    other = server.as_key(server.key(bot="elsewhere"))
    assert server.client.post(f"{BASE}/ana/link-codes", headers=other).status_code == 404
    assert server.client.get(f"{BASE}/ana/links", headers=ana).json()["linked"] == ["ana"]


def test_a_wrong_code_is_400_and_too_many_are_429_with_retry_after(server: Server) -> None:
    known(server.memory, "ana", "bo")
    bo = server.as_key(server.key(bot="coach", user="bo"))
    answers = [
        server.client.post(f"{BASE}/bo/links", json={"code": "K7QF-3M9P"}, headers=bo)
        for _ in range(6)
    ]
    assert [answer.status_code for answer in answers[:5]] == [400] * 5
    first = answers[0].json()["error"]
    assert first["type"] == "invalid_request" and "not valid" in first["message"]
    assert answers[5].status_code == 429
    assert answers[5].json()["error"]["type"] == "rate_limited"
    assert float(answers[5].headers["Retry-After"]) > 0
    # Even the right code is refused while the wait lasts: guessing gains nothing.
    ana = server.as_key(server.key(bot="coach", user="ana"))
    code = server.client.post(f"{BASE}/ana/link-codes", headers=ana).json()["code"]
    blocked = server.client.post(f"{BASE}/bo/links", json={"code": code}, headers=bo)
    assert blocked.status_code == 429
    assert server.client.get(f"{BASE}/bo/links", headers=bo).json()["linked"] == ["bo"]


def test_making_codes_is_limited_too(server: Server) -> None:
    known(server.memory, "ana")
    ana = server.as_key(server.key(bot="coach", user="ana"))
    statuses = [
        server.client.post(f"{BASE}/ana/link-codes", headers=ana).status_code for _ in range(6)
    ]
    assert statuses == [200] * 5 + [429]


def test_a_code_for_someone_the_bot_does_not_know_is_404(server: Server) -> None:
    nobody = server.as_key(server.key(bot="coach", user="nobody"))
    answer = server.client.post(f"{BASE}/nobody/link-codes", headers=nobody)
    assert answer.status_code == 404


@pytest.mark.parametrize(
    "body", [{}, {"code": ""}, {"code": "x" * 65}, {"code": 12345678}], ids=str
)
def test_a_body_without_a_code_is_422(server: Server, body) -> None:
    known(server.memory, "ana")
    ana = server.as_key(server.key(bot="coach", user="ana"))
    answer = server.client.post(f"{BASE}/ana/links", json=body, headers=ana)
    assert answer.status_code == 422 and answer.json()["error"]["type"] == "invalid_request"


def test_no_code_reaches_a_log_line_nor_the_access_log(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    """Served by uvicorn with its access log on, every logger at DEBUG: codes made, entered
    right, wrong, and refused appear in no record."""
    known(memory, "ana", "ana-mcp")
    web = {"Authorization": f"Bearer {create_key(memory, bot='coach', user='ana').secret}"}
    mcp = {"Authorization": f"Bearer {create_key(memory, bot='coach', user='ana-mcp').secret}"}
    caplog.set_level(logging.DEBUG)
    with access_logged(create_app(memory, llm=ScriptedLLM())) as url:
        made = [httpx.post(f"{url}{BASE}/ana/link-codes", headers=web).json() for _ in range(2)]
        codes = [each["code"] for each in made]
        right = httpx.post(f"{url}{BASE}/ana-mcp/links", json={"code": codes[0]}, headers=mcp)
        wrong = httpx.post(f"{url}{BASE}/ana-mcp/links", json={"code": "ZZZZ-ZZZZ"}, headers=mcp)
    assert right.status_code == 200 and wrong.status_code == 400
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/link-codes" in logged and "/ana-mcp/links" in logged  # the access log was read
    for code in codes:
        assert code not in logged and code.replace("-", "") not in logged


class access_logged:
    """``app`` served by uvicorn on 127.0.0.1 with its access log going to the root logger
    (uvicorn's own logging setup would keep it from ``caplog``)."""

    def __init__(self, app) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None,
                                log_level="debug", access_log=True)  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        (sock,) = self.server.servers[0].sockets
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
SECRET = "ANA-SECRET-7731"


def as_typed(code: str, lower: bool, spaced: bool) -> str:
    """A code as a person may type it."""
    typed = code.lower() if lower else code
    return typed.replace("-", " ") if spaced else typed


typed_codes = st.builds(
    lambda letters, lower, spaced: as_typed(f"{letters[:4]}-{letters[4:]}", lower, spaced),
    st.text(CROCKFORD, min_size=8, max_size=8), st.booleans(), st.booleans(),
)  # fmt: skip
# What a stranger tries: a code's shape, anything at all, or a code ana used already.
guesses = st.lists(
    st.one_of(typed_codes, st.text(max_size=30), st.just("REPLAY")), min_size=1, max_size=7
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tries=guesses, lower=st.booleans(), spaced=st.booleans())
def test_guessing_or_replaying_codes_reaches_no_one(make_embedder, tries, lower, spaced) -> None:
    """A stranger's key entering guessed codes, anything at all, or a code another identity
    already used, through REST: each refused (400, 422, then 429), the stranger linked with
    no one, and nothing of ana's in the stranger's memory or search."""
    with tempfile.TemporaryDirectory() as folder:
        memory = Memory(Path(folder) / "store.db", embedder=make_embedder())
        try:
            known(memory, "ana", "ana-phone", "eve")
            memory.add(f"My locker code is {SECRET}", user="ana", thread="hello", bot="coach")
            memory.link_code(user="ana", bot="coach")  # a live code eve does not know
            used = memory.link_code(user="ana", bot="coach").code
            memory.link_with_code(used, user="ana-phone", bot="coach")
            eve = {"Authorization": f"Bearer {create_key(memory, bot='coach', user='eve').secret}"}
            with TestClient(create_app(memory, llm=ScriptedLLM())) as client:
                for guess in tries:
                    code = as_typed(used, lower, spaced) if guess == "REPLAY" else guess
                    answer = client.post(f"{BASE}/eve/links", json={"code": code}, headers=eve)
                    assert answer.status_code in (400, 422, 429), answer.text
                    assert SECRET not in answer.text
                seen = [
                    client.get(f"{BASE}/eve/links", headers=eve),
                    client.get(f"{BASE}/eve/memory", headers=eve),
                    client.get(f"{BASE}/eve/memory", params={"q": "locker"}, headers=eve),
                    client.get("/v1/bots/coach/search", params={"q": "locker code"}, headers=eve),
                ]
            assert [answer.status_code for answer in seen] == [200] * 4
            assert seen[0].json()["linked"] == ["eve"]
            assert all(SECRET not in answer.text for answer in seen)
            assert memory.linked(user="ana", bot="coach").linked == ("ana", "ana-phone")
        finally:
            memory.close()

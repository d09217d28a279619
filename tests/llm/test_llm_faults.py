"""The LLM endpoint misbehaves on purpose (a real HTTP server on 127.0.0.1): it refuses
connections, hangs, answers 429 or 500, or answers garbage. membot tries again a bounded
number of times within a deadline, then fails with a clear error; a turn's line is stored
exactly once, over HTTP (503 with the message) and on the command line (status 2)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import pytest
from fastapi.testclient import TestClient

from membot import Memory, OpenAICompatibleLLM, ProviderError
from membot.server import create_app
from membot.service.keys import create_key
from membot.store.sqlite_driver import sqlite3

MESSAGES = [{"role": "user", "content": "hi"}]
# ``endpoint`` (tests/conftest.py): a MisbehavingEndpoint on 127.0.0.1.


def closed_url() -> str:
    """A loopback port nobody listens on: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def llm_for(endpoint, **bounds: float) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM("m", endpoint.base_url, **bounds)


def test_a_refused_connection_is_tried_again_then_named() -> None:
    llm = OpenAICompatibleLLM("m", closed_url(), max_retries=2)
    # Waited 0.5 s, then 1 s: at least 1.5 s in all (more on a busy machine).
    with pytest.raises(ProviderError, match=r"cannot reach .*running\? \(3 tries in") as caught:
        llm.complete(MESSAGES, 10)
    spent = re.search(r"3 tries in (\d+\.\d) s\)", str(caught.value))
    assert spent is not None and float(spent.group(1)) >= 1.4


@pytest.mark.parametrize("status", ["429", "500"])
def test_429_and_500_are_tried_again_and_an_answer_after_them_is_taken(endpoint, status):
    endpoint.faults = [status, status]
    assert llm_for(endpoint, max_retries=2).complete(MESSAGES, 10) == "ok"
    waits = [
        later - earlier
        for earlier, later in zip(endpoint.chat_requests, endpoint.chat_requests[1:], strict=False)
    ]
    assert len(endpoint.chat_requests) == 3
    if status == "500":  # doubling waits; a 429 waits what Retry-After asks (0 here)
        assert waits[0] >= 0.45 and waits[1] >= 0.95


@pytest.mark.parametrize(
    ("status", "said"),
    [("429", "is rate limiting membot \\(429\\)"), ("500", "failed with status 500")],
)
def test_a_status_that_persists_fails_after_the_bounded_tries(endpoint, status, said) -> None:
    endpoint.then = status
    with pytest.raises(ProviderError, match=f"{said}.*\\(3 tries"):
        llm_for(endpoint, max_retries=2).complete(MESSAGES, 10)
    assert len(endpoint.chat_requests) == 3


def test_a_retry_after_past_the_deadline_gives_up_at_once(endpoint) -> None:
    endpoint.then, endpoint.retry_after = "429", "3600"
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"rate limiting .*\(1 try in"):
        llm_for(endpoint, max_retries=5, deadline=30).complete(MESSAGES, 10)
    assert time.monotonic() - started < 2
    assert len(endpoint.chat_requests) == 1


def test_a_hanging_endpoint_is_bounded_by_the_deadline(endpoint) -> None:
    endpoint.then = "hang"
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"did not answer within 1 s \(2 tries in"):
        llm_for(endpoint, timeout=1, max_retries=10, deadline=2.0).complete(MESSAGES, 10)
    assert time.monotonic() - started < 3.5  # not 11 tries of a second


@pytest.mark.parametrize("fault", ["garbage", "empty"])
def test_garbage_is_a_clear_error_and_not_tried_again(endpoint, fault: str) -> None:
    endpoint.then = fault
    with pytest.raises(ProviderError, match=r"openai:m@http://127\.0\.0\.1:\d+/v1"):
        llm_for(endpoint).complete(MESSAGES, 10)
    assert len(endpoint.chat_requests) == 1


def test_a_stream_is_tried_again_before_its_first_piece(endpoint) -> None:
    endpoint.faults = ["500"]
    assert list(llm_for(endpoint).stream(MESSAGES, 10)) == ["ok"]
    assert len(endpoint.chat_requests) == 2


def human_lines(memory: Memory, user: str) -> list[tuple[str, str]]:
    lines = memory.history(user=user, bot="coach", thread="t1")
    return [(line.role.value, line.text) for line in lines]


@pytest.mark.parametrize("fault", ["refused", "hang", "429", "500", "garbage"])
def test_a_turn_over_http_answers_503_and_stores_the_line_once(memory, endpoint, fault) -> None:
    memory.create_bot("coach")
    endpoint.then = fault
    url = closed_url() if fault == "refused" else endpoint.base_url
    llm = OpenAICompatibleLLM("m", url, timeout=0.5, max_retries=1, deadline=2)
    app = create_app(memory, llm=llm)
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    turn = {"user": "alice", "thread": "t1", "text": "Where do I run?"}
    with TestClient(app, raise_server_exceptions=False) as client:
        failed = client.post("/v1/bots/coach/turns", json=turn, headers=headers)
        assert failed.status_code == 503, failed.text
        assert failed.json()["error"]["type"] == "llm_unavailable"
        assert "Your line was stored (thread 't1', seq 1)" in failed.json()["error"]["message"]
        assert failed.headers["x-should-retry"] == "false"
        chat = {"model": "coach", "user": "alice", "messages": [{"role": "user", "content": "x"}]}
        assert client.post("/v1/chat/completions", json=chat, headers=headers).status_code == 503
        endpoint.then = "ok"
        if fault == "refused":
            llm.base_url, llm._client = endpoint.base_url, None  # the server is back
        again = client.post(
            "/v1/bots/coach/turns", json={**turn, "text": "And now?"}, headers=headers
        )
        assert again.status_code == 200, again.text
    lines = human_lines(memory, "alice")
    assert lines[0] == ("human", "Where do I run?")
    assert [text for role, text in lines].count("Where do I run?") == 1
    assert lines[-2:] == [("human", "And now?"), ("bot", "ok")]


def test_a_turn_on_the_command_line_says_why_and_stores_the_line_once(endpoint, tmp_path):
    endpoint.then = "500"
    db = tmp_path / "cli.db"
    models = [
        "--embedder",
        f"openai:e@{endpoint.base_url}",
        "--llm",
        f"openai:m@{endpoint.base_url}",
    ]
    say = ["say", "Where do I run?", "--user", "alice", "--thread", "t1"]
    command = [sys.executable, "-m", "membot", "--db", str(db), *models, *say]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result
    assert "failed with status 500 (3 tries in" in result.stderr.replace("\n", " ")
    assert "Traceback" not in result.stderr
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT role, text FROM lines").fetchall()
    connection.close()
    assert rows == [("human", "Where do I run?")]
    assert len(endpoint.chat_requests) == 3

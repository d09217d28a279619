"""``membot serve`` for real: a subprocess on 127.0.0.1, its first key, and the README's
curl lines run against it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

README = Path(__file__).parents[2] / "README.md"
KEY = re.compile(r"\bmb_[0-9a-f]{12}_[A-Za-z0-9_-]{43}\b")
README_PORT = 8080


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Served:
    def __init__(self, process: subprocess.Popen, port: int, log: Path) -> None:
        self.process, self.port, self.log = process, port, log
        self.url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serve_subprocess(tmp_path: Path) -> Iterator[Served]:
    """``membot serve`` on a free port with a scripted model, up, and stopped afterwards."""
    port = free_port()
    script = tmp_path / "replies.json"
    script.write_text("[]")  # every reply: "(scripted reply)"
    log = tmp_path / "serve.log"
    options = ["--db", str(tmp_path / "served.db"), "--llm", f"script:{script}"]
    command = [sys.executable, "-m", "membot", *options, "serve", "--port", str(port)]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ.copy(),
        )
    server = Served(process, port, log)
    try:
        _wait_until_up(server)
        yield server
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_subprocess(tmp_path) as server:
        yield server


def _wait_until_up(server: Served, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"membot serve exited:\n{server.output()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"membot serve did not answer in {seconds} s:\n{server.output()}")


def readme_curl_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- serve-curl", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("curl ")]


@pytest.mark.slow
def test_serve_prints_its_url_and_a_first_key_and_the_readme_curls_work(served: Served):
    printed = served.output()
    assert f"http://127.0.0.1:{served.port}/" in printed
    keys = KEY.findall(printed)
    # The first admin key, then the web app's one-time sign-in link (a loopback-only server).
    assert len(keys) == 2 and f"/#signin={keys[1]}" in printed, printed
    lines = readme_curl_lines()
    assert len(lines) >= 5
    env = {**os.environ, "MEMBOT_KEY": keys[0]}
    answers = []
    for line in lines:
        command = line.replace(f":{README_PORT}/", f":{served.port}/")
        done = subprocess.run(
            ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, (command, done.stderr)
        answer = json.loads(done.stdout)
        assert not answer.get("error"), (command, answer)
        answers.append(answer)
    assert answers[0] == {"status": "ok"}
    turn = next(answer for answer in answers if "response" in answer)
    assert turn["response"] == "(scripted reply)" and turn["bot"] == "coach"
    found = next(answer for answer in answers if set(answer) == {"matches"})
    assert any("Sundays" in match["text"] for match in found["matches"]), found


def test_only_a_store_without_an_active_key_gets_a_first_key(memory):
    from membot.cli.serve import _first_key
    from membot.service import list_keys, revoke_key

    _first_key(memory)
    _first_key(memory)
    (first,) = list_keys(memory)
    assert first.can_admin
    revoke_key(memory, first.id)
    _first_key(memory)  # every key revoked: the operator gets a working one again
    assert [key.state() for key in list_keys(memory)] == ["revoked", "active"]
    # A sign-in link's key is no API key: a store holding only one gets a first key.
    from membot.service import create_signin_key

    revoke_key(memory, list_keys(memory)[-1].id)
    create_signin_key(memory)
    _first_key(memory)
    assert [(key.state(), key.signin_only) for key in list_keys(memory)][-2:] == [
        ("active", True),
        ("active", False),
    ]


def test_the_workers_rate_limit_is_read_as_the_command_line_reads_it(monkeypatch, tmp_path):
    """``MEMBOT_RATE_LIMIT`` under another launcher: ``120`` or ``120/minute``; anything else
    a clear error naming the variable, before the store is opened."""
    from membot import ConfigError
    from membot.server.app import app_from_environment

    monkeypatch.setenv("MEMBOT_DB", str(tmp_path / "limits.db"))
    for value in ("3/hour", "three"):
        monkeypatch.setenv("MEMBOT_RATE_LIMIT", value)
        with pytest.raises(ConfigError, match=f"MEMBOT_RATE_LIMIT wants N/minute, got '{value}'"):
            app_from_environment()
    assert not (tmp_path / "limits.db").exists()
    monkeypatch.setenv("MEMBOT_RATE_LIMIT", "3/minute")
    app = app_from_environment()
    try:
        assert app.state.service.limiter.per_minute == 3
    finally:
        app.state.service.memory.close()

"""The server in process or on a loopback port: a real store, the hashing embedder, a scripted
model, real keys; and ``membot serve`` as real processes (``start_serve``)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

import membot
from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key

SERVER_START_SECONDS = 10


@dataclass
class Server:
    memory: Memory
    llm: ScriptedLLM
    client: TestClient

    def key(self, **scope) -> str:
        return create_key(self.memory, **scope).secret

    def as_key(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def server(memory: Memory) -> Iterator[Server]:
    llm = ScriptedLLM()
    app = create_app(memory, llm=llm)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Server(memory, llm, client)


@pytest.fixture
def admin(server: Server) -> dict[str, str]:
    """Headers of an admin key."""
    return server.as_key(server.key(admin=True))


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a background thread; yields its base URL.

    The socket is bound before uvicorn starts, so the port is free and known up front."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start; see the log above")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(SERVER_START_SECONDS)
        sock.close()


@dataclass
class LiveServer:
    """The app served on a real loopback port, for clients that speak HTTP themselves."""

    memory: Memory
    llm: ScriptedLLM
    url: str  # http://127.0.0.1:PORT, without a path

    def key(self, **scope) -> str:
        return create_key(self.memory, **scope).secret


@pytest.fixture
def live_server(memory: Memory) -> Iterator[LiveServer]:
    llm = ScriptedLLM()
    with serving(create_app(memory, llm=llm)) as url:
        yield LiveServer(memory, llm, url)


@pytest.fixture
def serve():
    """:func:`serving`, for a test that builds its own app: ``with serve(app) as url``."""
    return serving


PID = re.compile(r'pid="(\d+)"')
TURNS = re.compile(r"^membot_turns_total\{.*\}\s+(\S+)$", re.MULTILINE)


class ServeProcess:
    """``membot serve`` as a subprocess in its own process group, stopped as a group."""

    def __init__(self, db: str | Path, cache: Path, workers: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        source = str(Path(membot.__file__).resolve().parents[1])  # this checkout's membot
        env = {**os.environ, "MEMBOT_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
        options = ["--db", str(db), "--embedder", "minilm", "--llm", "script:"]
        serve = ["serve", "--port", str(port), "--workers", str(workers)]
        command = [sys.executable, "-m", "membot", *options, *serve]
        self.process = subprocess.Popen(command, env=env, start_new_session=True)

    def wait_until_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"membot serve exited ({self.process.returncode})"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"membot serve did not answer /healthz in {timeout:.0f} s")

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)
        except ProcessLookupError:
            pass

    def turns_by_worker(self, workers: int) -> dict[str, float]:
        """Each worker's turn count (by pid), read from ``/metrics`` on new connections until
        every worker has answered one; a worker's metrics carry its own pid only."""
        counts: dict[str, float] = {}
        for _ in range(300):
            text = httpx.get(f"{self.url}/metrics", headers={"Connection": "close"}).text
            pids = set(PID.findall(text))  # none until the worker has counted a request
            if len(pids) == 1:
                counts[pids.pop()] = sum(float(value) for value in TURNS.findall(text))
            if len(counts) == workers:
                return counts
        raise AssertionError(f"only workers {sorted(counts)} answered /metrics")


@pytest.fixture
def start_serve(minilm) -> Iterator[Callable[..., ServeProcess]]:
    """Start ``membot serve`` processes on a store (a path or URL) with the session's MiniLM
    (already exported, so the workers need not export it again); all stopped after."""
    cache = minilm.onnx_path.parent.parent
    started: list[ServeProcess] = []

    def start(db: str | Path, workers: int = 2) -> ServeProcess:
        started.append(ServeProcess(db, cache, workers))
        return started[-1]

    yield start
    for server in started:
        server.stop()

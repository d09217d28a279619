"""The server in process or on a loopback port: a real store, the hashing embedder, a scripted
model, real keys."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from membot import Memory, ScriptedLLM
from membot.keys import create_key
from membot.server import create_app

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

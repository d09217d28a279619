"""The server in process: a real store, the hashing embedder, a scripted model, real keys."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from membot import Memory, ScriptedLLM
from membot.keys import create_key
from membot.server import create_app


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

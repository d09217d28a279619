"""Shared fixtures: an isolated home for every test, a small real embedder, the real MiniLM,
and the stores: SQLite on a file, PostgreSQL (with pgvector) started once per session by
``pgserver``, a fresh database per test.

Every test runs with ``MEMBOT_DB``, ``MEMBOT_CACHE_DIR`` and the platform's user data folder
pointed into its own ``tmp_path``, so nothing reads or writes the real home. The bundled MiniLM
is loaded once per session by the ``minilm`` fixture; tests that need it are marked ``slow``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from membot import Memory
from membot.embed import default_embedder
from membot.turn.tokens import default_token_counter

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """A small real embedder: a hashed bag of words, identical in every process.

    Texts sharing words score high, texts without a common word score 0. ``calls`` records each
    batch it was asked to embed, so tests can count embeddings.
    """

    def __init__(self, name: str = "hash-bow", dimension: int = 256) -> None:
        self.name = name
        self._dimension = dimension
        self.calls: list[list[str]] = []

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def embedded(self) -> list[str]:
        return [text for batch in self.calls for text in batch]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        self.calls.append(texts)
        rows = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in WORD.findall(text.lower()) or ["<no words>"]:
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                row[int.from_bytes(digest, "big") % self._dimension] += 1.0
        if not texts:
            return rows
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="session", autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home folder for the whole session: nothing a test runs, membot or a library under
    it, may write to the real one."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            patch.setenv(name, str(home / name.lower()))
        yield home


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every place membot keeps state at ``tmp_path``; no real keys, no network."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMBOT_DB", str(home / "default.db"))
    monkeypatch.setenv("MEMBOT_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("MEMBOT_EMBEDDER", "MEMBOT_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL 16 with pgvector (the ``pgserver`` package bundles both), started once
    for the session on a Unix socket; yields its URL. ``vector`` is made in template1, so every
    database created for a test has it.

    Its data folder is not under pytest's tmp folder: pytest removes old ones when another
    session starts, which would pull the database from under a session still running."""
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="membot-pg-"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(folder))  # pgserver's lock file goes here
        import pgserver  # reads XDG_RUNTIME_DIR when imported

        server = pgserver.get_server(folder / "data", cleanup_mode="delete")
        url = server.get_uri()
        template = url.replace("/postgres?", "/template1?")
        with psycopg.connect(template, autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield url
        server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


_databases = itertools.count()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The URL of a new, empty database on the session's PostgreSQL, dropped after the test."""
    import psycopg

    name = f"membot_test_{next(_databases)}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield postgres_server.replace("/postgres?", f"/{name}?")
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


STORE_KINDS = ("sqlite", "postgresql")


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store of each kind lives: a SQLite file, then a PostgreSQL database. A test
    asking for it runs once per kind."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def make_store(store_url: str) -> Iterator[Callable[[], Any]]:
    """Open the test's store (SQLite or PostgreSQL, per ``store_url``); closed after."""
    from membot.store import open_store

    opened: list[Any] = []

    def make() -> Any:
        opened.append(open_store(store_url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def make_embedder() -> Callable[..., HashingEmbedder]:
    """Build a :class:`HashingEmbedder`: ``make_embedder(name=..., dimension=...)``."""
    return HashingEmbedder


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def token_counter():
    """The real token counter (the bundled SmolLM2 vocabulary), loaded once."""
    return default_token_counter()


class MemoryMaker:
    """Opens ``Memory`` objects on the test's store (``location``: ``memory.db`` in
    ``tmp_path``, or the PostgreSQL database of a test run on both stores); closed after."""

    def __init__(self, location: str | Path) -> None:
        self.location = location
        self.opened: list[Memory] = []

    def __call__(self, embedder: Any = None, path: str | Path | None = None) -> Memory:
        memory = Memory(path or self.location, embedder=embedder or HashingEmbedder())
        self.opened.append(memory)
        return memory


@pytest.fixture
def make_memory(tmp_path: Path) -> Iterator[MemoryMaker]:
    maker = MemoryMaker(tmp_path / "memory.db")
    yield maker
    for memory in maker.opened:
        memory.close()


@pytest.fixture
def memory(
    request: pytest.FixtureRequest, make_memory: MemoryMaker, embedder: HashingEmbedder
) -> Memory:
    """A Memory on SQLite; on each store for a test marked
    ``@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)``, and then
    ``make_memory()`` opens more on the same database."""
    if getattr(request, "param", "sqlite") == "postgresql":
        make_memory.location = request.getfixturevalue("postgres_url")
    return make_memory(embedder)


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory):
    """The default bundled all-MiniLM-L6-v2 embedder, loaded once for the whole session.

    Built the way ``Memory(embedder="minilm")`` builds it, with its model files in a session
    folder under the test tmp dir, never in the real cache.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMBOT_CACHE_DIR", str(tmp_path_factory.mktemp("minilm-cache")))
        model = default_embedder()
    model.embed(["warm up"])
    return model


class Cli:
    """Runs ``membot`` in-process on one store, the way a person types it."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.runner = CliRunner()

    def run(self, *args: str, llm: str | None = None, input: str | None = None) -> Result:
        from membot.cli import app

        options = ["--db", str(self.db)] + (["--llm", llm] if llm else [])
        return self.runner.invoke(app, [*options, *args], input=input)

    def ok(self, *args: str, **options: Any) -> Result:
        result = self.run(*args, **options)
        assert result.exit_code == 0, (result.output, result.exception)
        return result

    def json(self, *args: str, **options: Any) -> Any:
        return json.loads(self.ok(*args, "--json", **options).stdout)

    def say(self, text: str, user: str, thread: str, **options: Any) -> dict[str, Any]:
        if "llm" not in options:
            return self.json("say", text, "--user", user, "--thread", thread, "--dry-run")
        return self.json("say", text, "--user", user, "--thread", thread, **options)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "cli.db")


@pytest.fixture
def script(tmp_path: Path) -> Callable[..., str]:
    """Write replies for ``--llm script:PATH``; returns the spec string."""

    def write(*replies: str) -> str:
        path = tmp_path / "script.json"
        path.write_text(json.dumps(list(replies)))
        return f"script:{path}"

    return write


class OpenAIStyleServer:
    """A real HTTP server on 127.0.0.1 speaking the two OpenAI endpoints membot calls.

    ``requests`` records (path, JSON body, Authorization header); ``status`` makes every call
    answer with that HTTP status instead; ``reply`` is the chat answer. A chat request with a
    ``response_format`` type in ``refused_formats`` is answered 400, as servers without it do.
    ``stream: true`` is answered with server-sent events, ``reply`` in ``piece_size``
    pieces; with ``break_after`` set the connection closes after that many.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], str | None]] = []
        self.status = 200
        self.reply = "Hello from the server"
        self.refused_formats: set[str] = set()
        self.piece_size = 4
        self.break_after: int | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            # Not unit length and out of order: the client must sort by index and normalise.
            data = [
                {"object": "embedding", "index": index, "embedding": [3.0, 4.0, float(index)]}
                for index in range(len(body["input"]))
            ]
            return {
                "object": "list",
                "data": data[::-1],
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"  {self.reply}\n"},
                }
            ],
        }

    def status_for(self, body: dict[str, Any]) -> int:
        if (body.get("response_format") or {}).get("type") in self.refused_formats:
            return 400
        return self.status

    def stream_events(self, body: dict[str, Any]) -> Iterator[bytes]:
        """The chat answer as OpenAI streams it: one chunk per piece, then [DONE]."""
        pieces = [
            self.reply[i : i + self.piece_size] for i in range(0, len(self.reply), self.piece_size)
        ]
        for piece in pieces:
            chunk = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append((self.path, body, self.headers.get("Authorization")))
                status = server.status_for(body)
                if status == 200 and body.get("stream"):
                    events = list(server.stream_events(body))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    # The whole length is promised, so a break is a broken reply.
                    self.send_header("Content-Length", str(sum(map(len, events))))
                    self.end_headers()
                    for event in events[: server.break_after]:
                        self.wfile.write(event)
                        self.wfile.flush()
                    return
                if status != 200:
                    payload = {"error": {"message": "no", "type": "invalid_request_error"}}
                else:
                    payload = server.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def openai_server() -> Iterator[OpenAIStyleServer]:
    server = OpenAIStyleServer()
    yield server
    server.close()


# A chat endpoint that misbehaves on purpose (tests/llm/test_llm_faults.py, imports).
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}

PIECE = {"index": 0, "finish_reason": None, "delta": {"content": "ok"}}
CHUNK = {**COMPLETION, "object": "chat.completion.chunk", "choices": [PIECE]}
STREAM = f"data: {json.dumps(CHUNK)}\n\ndata: [DONE]\n\n".encode()


class MisbehavingEndpoint:
    """An OpenAI-style chat endpoint whose next answers are scripted faults.

    ``faults`` is consumed one per chat request: ``"hang"`` (no answer for ``hang_seconds``),
    ``"429"`` (with ``Retry-After: retry_after``), ``"500"``, ``"garbage"`` (200, not JSON),
    ``"empty"`` (200, JSON without choices) or ``"ok"``; when it runs out, ``then`` answers.
    Embedding requests are answered (a 3-number vector per text), the first
    ``embeddings_answered`` of them when it is set, and 500 after those."""

    def __init__(self, *faults: str, then: str = "ok") -> None:
        self.faults = list(faults)
        self.then = then
        self.chat_requests: list[float] = []  # when each chat request came
        self.hang_seconds = 5.0
        self.retry_after = "0"
        self.embeddings_answered: int | None = None
        self.embedding_requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_fault(self) -> str:
        self.chat_requests.append(time.monotonic())
        return self.faults.pop(0) if self.faults else self.then

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/embeddings"):
                    endpoint.embedding_requests += 1
                    limit = endpoint.embeddings_answered
                    if limit is not None and endpoint.embedding_requests > limit:
                        return self.answer(500, {"error": {"message": "down", "type": "server"}})
                    vectors = [[1.0, float(len(text)), 0.5] for text in body["input"]]
                    data = [
                        {"object": "embedding", "index": index, "embedding": vector}
                        for index, vector in enumerate(vectors)
                    ]
                    return self.answer(200, {"object": "list", "data": data, "model": "e"})
                fault = endpoint.next_fault()
                if fault == "hang":
                    time.sleep(endpoint.hang_seconds)
                    return self.answer(200, COMPLETION)
                if fault == "429":
                    error = {"error": {"message": "slow down", "type": "rate_limit"}}
                    return self.answer(429, error, {"Retry-After": endpoint.retry_after})
                if fault == "500":
                    return self.answer(500, {"error": {"message": "boom", "type": "server"}})
                if fault == "garbage":
                    return self.answer(200, b"<html>502 Bad Gateway</html>")
                if fault == "empty":
                    return self.answer(200, {"id": "x", "object": "chat.completion"})
                if body.get("stream"):
                    return self.answer(200, STREAM, {"Content-Type": "text/event-stream"})
                return self.answer(200, COMPLETION)

            def answer(self, status: int, payload: Any, headers: dict | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    headers = {"Content-Type": "application/json", **(headers or {})}
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting: what a hang is for

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def endpoint() -> Iterator[MisbehavingEndpoint]:
    server = MisbehavingEndpoint()
    yield server
    server.close()

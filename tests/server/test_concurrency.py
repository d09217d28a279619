"""Turns at the same time: in one process under uvicorn, and over two worker processes.

The first test sends 50 turns at once to the real app on a loopback socket and reads the store
back through ``Memory``; the second starts ``membot serve --workers 2`` and shows a line
written through one worker recalled through the other.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import uvicorn

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key

PEOPLE, THREADS, TURNS_EACH = 5, 5, 2


@pytest.fixture
def served(memory: Memory) -> Iterator[str]:
    """The real app under uvicorn on 127.0.0.1 in a background thread: its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    app = create_app(memory, llm=ScriptedLLM())  # no replies queued: every call answers alike
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        assert server.started, "uvicorn did not start in 10 s"
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()


def test_fifty_turns_at_once_store_every_line_once_in_order(served: str, memory: Memory):
    memory.create_bot("coach")
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    asks = [
        (f"person{p}", f"thread{t}", f"person {p} thread {t} turn {n}: note {p * 100 + t * 10 + n}")
        for p in range(PEOPLE)
        for t in range(THREADS)
        for n in range(TURNS_EACH)
    ]
    start = threading.Barrier(len(asks))

    def send(ask: tuple[str, str, str]) -> httpx.Response:
        user, thread, text = ask
        with httpx.Client(base_url=served, headers=headers, timeout=60) as client:
            start.wait()  # every request leaves together
            return client.post(
                "/v1/bots/coach/turns", json={"user": user, "thread": thread, "text": text}
            )

    with ThreadPoolExecutor(len(asks)) as pool:
        responses = list(pool.map(send, asks))

    assert [r.status_code for r in responses if r.status_code != 200] == []
    lines = [line for p in range(PEOPLE) for line in memory.history(user=f"person{p}", bot="coach")]
    assert len(lines) == len(asks) * 2 == memory.count_lines()
    human = Counter(line.text for line in lines if line.role == "human")
    assert human == Counter(text for _, _, text in asks)  # every line stored, once
    by_thread: dict[tuple[str, str], list] = {}
    for line in lines:
        by_thread.setdefault((line.person, line.thread), []).append(line)
    for thread_lines in by_thread.values():
        assert [line.seq for line in thread_lines] == list(range(1, TURNS_EACH * 2 + 1))
        assert [line.role for line in thread_lines] == ["human", "bot"] * TURNS_EACH
    stored = {line.id: line for line in lines}
    for response in responses:
        trace = response.json()
        said, reply = trace["line"], trace["reply_line"]
        # Each reply is stored right after the line it answers, in the same thread.
        assert reply["seq"] == said["seq"] + 1
        assert stored[reply["id"]].thread == stored[said["id"]].thread == trace["thread"]
        assert stored[said["id"]].text == said["text"]


def test_turns_on_different_threads_never_wait_for_each_others_lock(memory: Memory):
    service = create_app(memory, llm=ScriptedLLM()).state.service
    held = service.thread_lock("coach", "sam", "t1")
    with held:
        assert service.thread_lock("coach", "sam", "t1") is held
        others = [service.thread_lock("coach", f"person {n}", "t1") for n in range(2000)]
        free = [lock.acquire(blocking=False) for lock in others]
        assert all(free)  # no other thread's lock is the one held
        for lock in others:
            lock.release()


def _served_by(server, before: dict[str, float]) -> str:
    """The worker whose turn count moved since ``before`` (one turn was sent)."""
    after = server.turns_by_worker(2)
    (moved,) = [pid for pid, count in after.items() if count != before.get(pid, 0)]
    before.clear()
    before.update(after)
    return moved


@pytest.mark.slow
def test_a_line_stored_through_one_worker_is_recalled_through_the_other(cli, start_serve):
    key = cli.json("keys", "create", "--admin")["key"]
    cli.ok("bot", "create", "coach")
    server = start_serve(cli.db, workers=2)
    headers = {"Authorization": f"Bearer {key}", "Connection": "close"}  # a new connection each

    def turn(user: str, thread: str, text: str) -> dict:
        response = httpx.post(
            f"{server.url}/v1/bots/coach/turns",
            json={"user": user, "thread": thread, "text": text},
            headers=headers,
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return response.json()

    try:
        server.wait_until_up(timeout=120)
        # Both workers answer turns (and so load their vector index) before the line exists.
        # The kernel hands a new connection to whichever worker accepts it first: the same
        # one 40 times in a row once, on two busy cores. So turns are sent, a pause between,
        # until both have answered one, for up to two minutes.
        counts = server.turns_by_worker(2)
        warmed: set[str] = set()
        deadline, number = time.monotonic() + 120, 0
        while len(warmed) < 2 and time.monotonic() < deadline:
            turn("someone else", "warm-up", f"warming up, line {number}")
            warmed.add(_served_by(server, counts))
            number += 1
            time.sleep(0.1)
        assert len(warmed) == 2, f"one worker answered all {number} turns of two minutes"
        if Path("/proc/self/environ").exists():  # both workers run with the tuned allocator
            for pid in counts:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                arenas = os.environ.get("MALLOC_ARENA_MAX", "2")  # the operator's, else 2
                assert f"MALLOC_ARENA_MAX={arenas}".encode() in environ, pid

        # Each try: a person says something through one worker, then asks about it; kept
        # when the kernel handed the question to the other worker.
        said = "My sister's parrot is called Captain Biscuit."
        for attempt in range(20):
            person = f"sam {attempt}"
            turn(person, "news", said)
            writer = _served_by(server, counts)
            trace = turn(person, "asking", "What is my sister's parrot called?")
            if _served_by(server, counts) != writer:
                break
        else:
            raise AssertionError("20 times the question went to the worker that stored the line")
        assert said in json.dumps(trace["recalled"]), trace["recalled"]
    finally:
        server.stop()  # the fixture stops it too; here it frees the cores at once


def test_the_workers_socket_answers_kept_alive_connections_without_nagle():
    from membot.cli.serve import listening_socket

    config = uvicorn.Config("membot.server:app_from_environment", host="127.0.0.1", port=0)
    listener = listening_socket(config)

    async def accepted_nodelay() -> int:
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[int] = loop.create_future()

        class Accept(asyncio.Protocol):
            def connection_made(self, transport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Accept, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        try:
            return await asyncio.wait_for(accepted, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0  # asyncio set TCP_NODELAY on the connection


def test_workers_end_with_a_supervisor_killed_alone(cli, start_serve):
    """SIGKILL of membot serve's own process left its workers serving the port, and a new
    membot serve could not bind it (a probe of multi-worker serving)."""
    import signal
    import time

    server = start_serve(cli.db, workers=2)
    server.wait_until_up(120)
    os.kill(server.process.pid, signal.SIGKILL)  # the supervisor alone, not its group
    server.process.wait(10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{server.url}/healthz", timeout=1)
        except httpx.TransportError:
            return  # nobody serves the port any more
        time.sleep(0.2)
    raise AssertionError("the workers kept serving after their supervisor was killed")

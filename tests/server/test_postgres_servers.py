"""Many servers, one database: two ``membot serve`` processes, each with two workers, on one
PostgreSQL. Turns sent at once to both on one thread keep its seq unique and gapless, and a
line written through one server is recalled through the other at the next turn."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from membot import Memory
from membot.service.keys import create_key

TURNS_AT_ONCE = 24


@pytest.mark.slow
def test_two_servers_on_one_postgresql_share_one_memory(postgres_url, minilm, start_serve):
    memory = Memory(postgres_url, embedder=minilm)
    memory.create_bot("coach")
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    servers = [start_serve(postgres_url, workers=2) for _ in range(2)]
    for server in servers:
        server.wait_until_up(timeout=180)

    def turn(server_index: int, user: str, thread: str, text: str) -> dict:
        response = httpx.post(
            f"{servers[server_index].url}/v1/bots/coach/turns",
            json={"user": user, "thread": thread, "text": text},
            headers={**headers, "Connection": "close"},  # a new connection: any worker
            timeout=120,
        )
        assert response.status_code == 200, response.text
        return response.json()

    # Both servers (and so some of their workers) load sam's scope before the line exists.
    for index in (0, 1, 0, 1):
        turn(index, "sam", "warm-up", f"warming up through server {index}")

    # Turns on one thread through both servers at once.
    start = threading.Barrier(TURNS_AT_ONCE)

    def at_once(number: int) -> dict:
        start.wait()
        return turn(number % 2, "ann", "shared", f"turn number {number} of ann")

    with ThreadPoolExecutor(TURNS_AT_ONCE) as pool:
        traces = list(pool.map(at_once, range(TURNS_AT_ONCE)))
    history = memory.history(user="ann", thread="shared")
    assert [line.seq for line in history] == list(range(1, 2 * TURNS_AT_ONCE + 1))
    said = Counter(line.text for line in history if line.role == "human")
    assert said == Counter(f"turn number {n} of ann" for n in range(TURNS_AT_ONCE))
    assert {trace["line"]["id"] for trace in traces} == {
        line.id for line in history if line.role == "human"
    }

    # Written through one server, recalled through the other at the next turn.
    told = "My sister's parrot is called Captain Biscuit."
    turn(0, "sam", "news", told)
    asked = turn(1, "sam", "asking", "What is my sister's parrot called?")
    assert told in json.dumps(asked["recalled"]), asked["recalled"]
    told_back = "The spare key is under the blue flower pot."
    turn(1, "sam", "news", told_back)
    asked_back = turn(0, "sam", "asking", "Where is the spare key?")
    assert told_back in json.dumps(asked_back["recalled"]), asked_back["recalled"]
    memory.close()

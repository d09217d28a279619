"""Soak ``membot serve``: 32 clients for a bounded time (default 10 minutes) on 127.0.0.1, with
the errors, the server's memory over time and the turn latency percentiles of each minute.

The server is started as ``benchmarks/serve_load.py`` starts it (its helpers: a copy of the
store of the 5 LoCoMo dev conversations, ``--llm script:``, which answers at once, every
worker warmed). Each client, a thread of this script with its own kept-alive connection, is
its own person and talks as people do, round after round: ``--turns-per-thread`` turns in a
new thread (LoCoMo questions, each numbered so that every line is new and embedded), a
search of its memory, the thread's lines, ending the thread, then forgetting it. Forgetting
keeps the store's size bounded, so memory that grows over the run is memory the server
keeps, not lines it was asked to hold.

The server's memory is the resident set (RSS) of all its processes (``membot serve`` and
its workers), read from /proc every few seconds. The first ``--warmup-minutes`` are
warm-up (caches filling, the allocator's arenas growing); growth is the RSS at the end
against the RSS at the end of warm-up (goal: under 10 %). Latency is the client's, request
to parsed response, of turns only; the other requests count towards errors.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--clients 32] [--workers 2]
        [--warmup-minutes 1] [--turns-per-thread 10] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
from machine import announce
from serve_load import BOT, Served, built_store, percentile, questions, warm

# Share of the RSS at the end of warm-up the server may grow by over the run.
GROWTH_GOAL = 0.10


def group_rss_bytes(group: int) -> int:
    """Resident memory of the live processes of a process group (Linux /proc)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:  # the fields after the name: state, ppid, pgrp, ...
                total += int((stat.parent / "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile
    return total


@dataclass
class Minute:
    """What the clients saw in one minute of the soak, and the server's RSS at its end."""

    minute: int
    turn_ms: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0
    rss_mb: float = 0.0


@dataclass
class Soak:
    """Everything the clients and the memory sampler recorded, shared between threads."""

    started: float
    minutes: list[Minute]
    errors: Counter = field(default_factory=Counter)  # "what: status type" or the exception
    error_messages: dict[str, str] = field(default_factory=dict)  # the first of each kind
    samples: list[tuple[float, float]] = field(default_factory=list)  # (seconds, RSS MB)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def minute_of(self, moment: float) -> Minute:
        index = min(int((moment - self.started) // 60), len(self.minutes) - 1)
        return self.minutes[index]

    def record(self, what: str, began: float, response: httpx.Response | None, error: str = ""):
        took = (time.perf_counter() - began) * 1000
        with self.lock:
            minute = self.minute_of(began)
            minute.requests += 1
            if response is None or response.status_code >= 300:
                minute.errors += 1
                kind, message = _error_of(what, response, error)
                self.errors[kind] += 1
                self.error_messages.setdefault(kind, message)
            elif what == "turn":
                minute.turn_ms.append(took)


def _error_of(what: str, response: httpx.Response | None, error: str) -> tuple[str, str]:
    """The kind of a failed request ("turn: 503 store_unavailable") and its message."""
    if response is None:
        return f"{what}: {error}", error
    try:
        body = response.json()["error"]
        return f"{what}: {response.status_code} {body['type']}", body["message"]
    except (ValueError, KeyError, TypeError):
        return f"{what}: {response.status_code}", response.text[:300]


class Client:
    """One person talking with the bot over one kept-alive connection, round after round."""

    def __init__(self, served: Served, soak: Soak, number: int, asks: Asks, turns: int):
        self.http = httpx.Client(
            base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}, timeout=60
        )
        self.soak, self.asks, self.turns = soak, asks, turns  # turns a thread
        self.user = f"soak-{number}"
        self.person = f"/v1/bots/{BOT}/users/{self.user}"

    def call(self, what: str, method: str, path: str, **options) -> httpx.Response | None:
        began = time.perf_counter()
        try:
            response = self.http.request(method, path, **options)
            response.json()  # read as a client would: an answer that is not JSON is an error
        except (httpx.HTTPError, ValueError) as error:
            self.soak.record(what, began, None, type(error).__name__)
            return None
        self.soak.record(what, began, response)
        return response

    def run(self, deadline: float) -> None:
        with self.http:
            for round_number in itertools.count():
                if time.monotonic() >= deadline:
                    return
                self.talk(f"round-{round_number}", deadline)

    def talk(self, thread: str, deadline: float) -> None:
        """One conversation: turns, a search, its lines, its end, and forgetting it."""
        asked = ""
        for _ in range(self.turns):
            if time.monotonic() >= deadline:
                break
            asked = next(self.asks)
            body = {"user": self.user, "thread": thread, "text": asked}
            self.call("turn", "POST", f"/v1/bots/{BOT}/turns", json=body)
        params = {"user": self.user, "q": asked or "hello", "k": 5}
        self.call("search", "GET", f"/v1/bots/{BOT}/search", params=params)
        self.call("lines", "GET", f"{self.person}/threads/{thread}/lines")
        self.call("end", "POST", f"{self.person}/threads/{thread}/end", json={"remember": False})
        self.call("forget", "DELETE", f"{self.person}/threads/{thread}")


class Asks:
    """LoCoMo's questions, round after round, each numbered: no line is said twice, so none
    is answered from the embedding cache. Shared by the clients."""

    def __init__(self) -> None:
        self.asked = questions()
        self.counter = itertools.count()
        self.lock = threading.Lock()

    def __iter__(self) -> Asks:
        return self

    def __next__(self) -> str:
        with self.lock:
            number = next(self.counter)
        return f"{self.asked[number % len(self.asked)]} (#{number})"


def sample_memory(served: Served, soak: Soak, stop: threading.Event, every: float) -> None:
    while True:
        now = time.perf_counter()
        megabytes = group_rss_bytes(served.process.pid) / 2**20
        with soak.lock:
            soak.samples.append((round(now - soak.started, 1), round(megabytes, 1)))
            soak.minute_of(now).rss_mb = round(megabytes, 1)
        if stop.wait(every):
            return


def soak(served: Served, args: argparse.Namespace) -> Soak:
    seconds = args.minutes * 60
    record = Soak(time.perf_counter(), [Minute(n + 1) for n in range(max(1, args.minutes))])
    asks = Asks()
    clients = [Client(served, record, n, asks, args.turns_per_thread) for n in range(args.clients)]
    stop = threading.Event()
    sampler = threading.Thread(target=sample_memory, args=(served, record, stop, args.sample))
    sampler.start()
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=client.run, args=(deadline,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    sampler.join()
    return record


@dataclass(frozen=True)
class MinuteRow:
    minute: int
    turns: int
    requests: int
    errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    rss_mb: float

    @classmethod
    def of(cls, minute: Minute) -> MinuteRow:
        def at(share: float) -> float:
            return round(percentile(minute.turn_ms, share), 1) if minute.turn_ms else 0.0

        return cls(
            minute=minute.minute,
            turns=len(minute.turn_ms),
            requests=minute.requests,
            errors=minute.errors,
            p50_ms=at(0.50),
            p95_ms=at(0.95),
            p99_ms=at(0.99),
            rss_mb=minute.rss_mb,
        )


def summary(record: Soak, rows: list[MinuteRow], warmup: int, load: tuple[float, float]) -> dict:
    steady = [row for row in rows if row.minute > warmup] or rows[-1:]
    after_warmup = rows[min(warmup, len(rows)) - 1].rss_mb
    end = rows[-1].rss_mb
    growth = (end - after_warmup) / after_warmup if after_warmup else 0.0
    return {
        "errors": sum(record.errors.values()),
        "errors_by_kind": dict(record.errors),
        "error_messages": record.error_messages,
        "rss_after_warmup_mb": after_warmup,
        "rss_end_mb": end,
        "rss_peak_mb": max(mb for _, mb in record.samples),
        "rss_growth": round(growth, 4),
        "growth_goal_met": growth < GROWTH_GOAL,
        "p99_ms_steady_min": min(row.p99_ms for row in steady),
        "p99_ms_steady_max": max(row.p99_ms for row in steady),
        "load_at_start": round(load[0], 1),
        "load_at_end": round(load[1], 1),
    }


def report(rows: list[MinuteRow], result: dict, args: argparse.Namespace) -> None:
    print(
        f"{'minute':>6} {'turns':>6} {'requests':>8} {'errors':>6} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p99 ms':>7} {'RSS MB':>7}"
    )
    for row in rows:
        print(
            f"{row.minute:>6} {row.turns:>6} {row.requests:>8} {row.errors:>6} "
            f"{row.p50_ms:>7} {row.p95_ms:>7} {row.p99_ms:>7} {row.rss_mb:>7}"
        )
    growth = result["rss_growth"] * 100
    print(
        f"{args.clients} clients, {args.workers} workers, {args.minutes} minutes "
        f"({args.warmup_minutes} of warm-up); load average {result['load_at_start']} at the "
        f"start, {result['load_at_end']} at the end"
    )
    print(f"errors: {result['errors']} {result['errors_by_kind'] or ''}".rstrip())
    for kind, message in result["error_messages"].items():
        print(f"  first {kind}: {message}")
    print(
        f"server RSS: {result['rss_after_warmup_mb']} MB after warm-up, "
        f"{result['rss_end_mb']} MB at the end ({growth:+.1f} %; goal under "
        f"{GROWTH_GOAL:.0%}: {'met' if result['growth_goal_met'] else 'NOT met'}), "
        f"peak {result['rss_peak_mb']} MB"
    )
    print(
        f"p99 of turns a minute after warm-up: {result['p99_ms_steady_min']} to "
        f"{result['p99_ms_steady_max']} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=10, help="how long the soak runs")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="membot serve --workers")
    parser.add_argument("--warmup-minutes", type=int, default=1)
    parser.add_argument("--turns-per-thread", type=int, default=10)
    parser.add_argument("--sample", type=float, default=5, help="seconds between RSS readings")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    announce()
    if not 0 < args.warmup_minutes < args.minutes:
        parser.error("--warmup-minutes must be at least 1 and less than --minutes")
    store = built_store()
    with tempfile.TemporaryDirectory(prefix="membot-soak-") as folder:
        served = Served(store, args.workers, Path(folder))
        try:
            warm(served, args.workers)
            load_at_start = os.getloadavg()[0]
            record = soak(served, args)
            load = (load_at_start, os.getloadavg()[0])
        finally:
            served.stop()
    rows = [MinuteRow.of(minute) for minute in record.minutes]
    result = summary(record, rows, args.warmup_minutes, load)
    if args.json:
        minutes = [asdict(row) for row in rows]
        print(json.dumps({**result, "minutes": minutes, "rss_samples": record.samples}, indent=2))
    else:
        report(rows, result, args)
    sys.exit(1 if result["errors"] else 0)


if __name__ == "__main__":
    main()

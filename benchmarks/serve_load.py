"""Load on ``membot serve``: turns a second and latency percentiles for 1, 8 and 32 clients at
once, on 1 and 2 worker processes, over a store holding the 5 LoCoMo dev conversations.

Each measurement starts a fresh ``membot serve --llm script:`` on 127.0.0.1 (a copy of the built
store, 2,760 lines; the bot shares memory across people, so every turn searches all of them;
the scripted LLM answers at once) and warms every worker. Then each client, a thread of this
script with its own kept-alive connection, acts as its own person in its own thread and posts
``POST /v1/bots/bench/turns`` back to back with the LoCoMo questions (each question once a
measurement, so the embedding cache never answers for the person's line), until the
measurement's turn count or time limit is reached.

Latency is the client's, request to parsed response. ``memory ms`` is the server's median
``timings_ms.memory_total`` (the turn but the LLM, waits for other requests' locks
included); ``embed ms`` its median time to embed the person's line. The scripted reply is
the same text every turn, so its embedding comes from the embedding cache: a model's new
reply would cost about one more ``embed ms``. ``server`` and ``driver CPU ms`` are the CPU
time a turn of the server's processes and of this script, which share the same cores.

    .venv/bin/python benchmarks/serve_load.py [--workers 1 2] [--clients 1 8 32]
        [--turns 600] [--seconds 30] [--repeat 1] [--json]

The store is built once (about a minute) into ``$TMPDIR/membot-serve-load`` and copied for
each measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The exported model and the import's embeddings are kept between runs; each server gets its
# own embedding cache (Served), so no measurement finds its questions embedded by an earlier one.
os.environ["MEMBOT_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "membot-serve-load", "cache")

import httpx
from machine import announce
from turn_latency import LOCOMO, build_store

import membot
from membot import Memory
from membot.embed import default_embedder
from membot.service.keys import create_key

WORK = Path(tempfile.gettempdir()) / "membot-serve-load"
BOT = "bench"
PID = re.compile(r'pid="(\d+)"')
TURNS = re.compile(r"^membot_turns_total\{.*\}\s+(\S+)$", re.MULTILINE)


@dataclass
class Run:
    """What the clients saw, and the CPU the server and this script spent meanwhile."""

    latencies_ms: list[float] = field(default_factory=list)
    memory_ms: list[float] = field(default_factory=list)  # timings_ms.memory_total
    embed_ms: list[float] = field(default_factory=list)  # timings_ms.embed: the line's
    errors: int = 0
    seconds: float = 0.0
    server_cpu_s: float = 0.0
    driver_cpu_s: float = 0.0


@dataclass(frozen=True)
class Result:
    workers: int
    clients: int
    turns: int
    errors: int
    turns_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    memory_ms: float  # server side, median
    embed_ms: float  # server side, median: embedding the person's line
    server_cpu_ms: float  # a turn
    driver_cpu_ms: float  # a turn
    turns_by_worker: list[int]
    load: float  # the machine's 1-minute load average as the measurement began

    @classmethod
    def of(cls, workers: int, clients: int, run: Run, by_worker: list[int], load: float) -> Result:
        done = len(run.latencies_ms)
        return cls(
            workers=workers,
            clients=clients,
            turns=done,
            errors=run.errors,
            turns_per_s=round(done / run.seconds, 1),
            p50_ms=round(percentile(run.latencies_ms, 0.50), 1),
            p95_ms=round(percentile(run.latencies_ms, 0.95), 1),
            p99_ms=round(percentile(run.latencies_ms, 0.99), 1),
            memory_ms=round(statistics.median(run.memory_ms), 1),
            embed_ms=round(statistics.median(run.embed_ms), 1),
            server_cpu_ms=round(run.server_cpu_s * 1000 / done, 1),
            driver_cpu_ms=round(run.driver_cpu_s * 1000 / done, 1),
            turns_by_worker=by_worker,
            load=round(load, 1),
        )


COLUMNS = (
    ("workers", "workers", "{:>7}"),
    ("clients", "clients", "{:>7}"),
    ("turns", "turns", "{:>5}"),
    ("errors", "errors", "{:>6}"),
    ("turns/s", "turns_per_s", "{:>7}"),
    ("p50 ms", "p50_ms", "{:>6}"),
    ("p95 ms", "p95_ms", "{:>6}"),
    ("p99 ms", "p99_ms", "{:>6}"),
    ("memory ms", "memory_ms", "{:>9}"),
    ("embed ms", "embed_ms", "{:>8}"),
    ("server CPU ms", "server_cpu_ms", "{:>13}"),
    ("driver CPU ms", "driver_cpu_ms", "{:>13}"),
    ("load", "load", "{:>4}"),
    ("turns by worker", "turns_by_worker", "{}"),
)


def row(values: list[str]) -> str:
    return " ".join(fmt.format(value) for (_, _, fmt), value in zip(COLUMNS, values, strict=True))


def questions() -> list[str]:
    """Every LoCoMo dev question, once."""
    data = json.loads(LOCOMO.read_text())
    return list(dict.fromkeys(qa["question"] for sample in data for qa in sample["qa"]))


def built_store() -> Path:
    """The 5 LoCoMo dev conversations in a store, built once and kept in ``WORK``."""
    db = WORK / "locomo-dev.db"
    if not db.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        partial = WORK / "building.db"
        for stale in WORK.glob("building.db*"):
            stale.unlink()
        build_store(partial)
        partial.rename(db)
    default_embedder().embed(["the model exported to the cache"])
    return db


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def group_cpu_seconds(group: int) -> float:
    """User + system CPU seconds of the live processes of a process group (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # the fields after the name: state, ppid, pgrp, ...
            total += int(fields[11]) + int(fields[12])
    return total / tick


class Served:
    """``membot serve`` as a subprocess in its own process group, on a copy of the store."""

    def __init__(self, store: Path, workers: int, folder: Path) -> None:
        self.db = folder / "served.db"
        shutil.copy(store, self.db)
        memory = Memory(self.db, embedder=default_embedder())
        self.key = create_key(memory, admin=True).secret
        memory.close()
        cache = folder / "cache"
        cache.mkdir()
        (cache / "models").symlink_to(WORK / "cache" / "models", target_is_directory=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "MEMBOT_CACHE_DIR": str(cache)}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(membot.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
        )
        options = ["--db", str(self.db), "--llm", "script:"]  # script: every reply at once
        serve = ["serve", "--port", str(port), "--workers", str(workers)]
        command = [sys.executable, "-m", "membot", *options, *serve]
        # The server's banner goes to stderr, so that --json prints only JSON on stdout.
        self.process = subprocess.Popen(command, env=env, start_new_session=True, stdout=sys.stderr)
        self._wait_until_up(timeout=120)

    def _wait_until_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"membot serve exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit(f"membot serve did not answer in {timeout:.0f} s")

    def turn_counts(self, workers: int) -> dict[str, float]:
        """Turns each worker has answered (by pid), read from ``/metrics`` on new connections
        until every worker has answered one (bounded); a worker's metrics carry its pid only."""
        counts: dict[str, float] = {}
        for _ in range(500):
            text = httpx.get(f"{self.url}/metrics", headers={"Connection": "close"}).text
            pids = set(PID.findall(text))  # none until the worker has counted a request
            if len(pids) == 1:
                counts[pids.pop()] = sum(float(value) for value in TURNS.findall(text))
            if len(counts) >= workers:
                break
        return counts

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass


def warm(served: Served, workers: int) -> None:
    """Turns until every worker has answered 10 (index loaded, model sessions made)."""
    headers = {"Authorization": f"Bearer {served.key}", "Connection": "close"}
    deadline = time.monotonic() + 120
    for number in range(1000):
        body = {"user": "warm-up", "thread": "warm-up", "text": f"warming up, turn {number}"}
        httpx.post(f"{served.url}/v1/bots/{BOT}/turns", json=body, headers=headers, timeout=60)
        counts = served.turn_counts(workers) if number % 5 == 4 else {}
        if len(counts) >= workers and min(counts.values()) >= 10:
            return
        if time.monotonic() > deadline:
            break
    raise SystemExit("the workers could not all be warmed in 120 s")


def drive(served: Served, clients: int, asks: list[str], seconds: float) -> Run:
    """``clients`` threads posting turns back to back until ``asks`` or ``seconds`` run out."""
    run = Run()
    lock = threading.Lock()
    pending = iter(asks)
    deadline = time.monotonic() + seconds
    start = threading.Barrier(clients + 1, timeout=120)

    def client(number: int) -> None:
        headers = {"Authorization": f"Bearer {served.key}"}
        with httpx.Client(base_url=served.url, headers=headers, timeout=60) as session:
            session.get("/healthz")  # connected before the clock starts
            start.wait()
            while time.monotonic() < deadline:
                with lock:
                    text = next(pending, None)
                if text is None:
                    return
                body = {"user": f"client {number}", "thread": "load", "text": text}
                began = time.perf_counter()
                try:
                    response = session.post(f"/v1/bots/{BOT}/turns", json=body)
                    timings = response.json().get("timings_ms", {})
                except httpx.HTTPError as error:
                    print(f"client {number}: {error!r}", file=sys.stderr)
                    response, timings = None, {}
                took = (time.perf_counter() - began) * 1000
                with lock:
                    if response is None or response.status_code != 200:
                        run.errors += 1
                        continue
                    run.latencies_ms.append(took)
                    run.memory_ms.append(timings["memory_total"])
                    run.embed_ms.append(timings["embed"])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    server_cpu, driver_cpu = group_cpu_seconds(served.process.pid), time.process_time()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    run.seconds = time.perf_counter() - began
    run.server_cpu_s = group_cpu_seconds(served.process.pid) - server_cpu
    run.driver_cpu_s = time.process_time() - driver_cpu
    return run


def measure(store: Path, workers: int, clients: int, turns: int, seconds: float) -> Result:
    asks = questions()[:turns]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="membot-load-") as folder:
        served = Served(store, workers, Path(folder))
        try:
            warm(served, workers)
            before = served.turn_counts(workers)
            run = drive(served, clients, asks, seconds)
            after = served.turn_counts(workers)
        finally:
            served.stop()
    by_worker = sorted((int(after[pid] - before.get(pid, 0)) for pid in after), reverse=True)
    return Result.of(workers, clients, run, by_worker, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--turns", type=int, default=600, help="most turns a measurement")
    parser.add_argument("--seconds", type=float, default=30, help="longest a measurement")
    parser.add_argument("--repeat", type=int, default=1, help="measure everything N times")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    announce()
    store = built_store()
    results = []
    if not args.json:
        print(row([title for title, _, _ in COLUMNS]), flush=True)
    # Worker counts side by side for each client count, so a busy spell on a shared machine
    # slows both alike.
    cells = [(w, c) for _ in range(args.repeat) for c in args.clients for w in args.workers]
    for workers, clients in cells:
        result = measure(store, workers, clients, args.turns, args.seconds)
        results.append(result)
        if not args.json:
            print(row([getattr(result, name) for _, name, _ in COLUMNS]), flush=True)
    if args.json:
        print(json.dumps([asdict(result) for result in results], indent=2))


if __name__ == "__main__":
    main()

"""``GET /metrics``: turns, errors by type, request counts and the turn's step latencies, in
Prometheus text format. Each worker process counts its own (label ``pid``)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

# Milliseconds, from a 1 ms embedding to a slow LLM reply.
BUCKETS_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
STEPS = ("embed", "store", "search", "assemble", "llm", "memory_total")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pid = str(os.getpid())
        self.turns = Counter(
            "membot_turns",
            "Turns answered (or stored, when the LLM failed).",
            ["bot", "outcome", "pid"],
            registry=self.registry,
        )
        self.errors = Counter(
            "membot_errors",
            "Requests answered with an error, by type.",
            ["type", "pid"],
            registry=self.registry,
        )
        self.requests = Counter(
            "membot_requests",
            "HTTP requests, by route and status.",
            ["method", "route", "status", "pid"],
            registry=self.registry,
        )
        self.steps = Histogram(
            "membot_turn_step_seconds",
            "Time of each step of a turn.",
            ["step", "pid"],
            buckets=BUCKETS_SECONDS,
            registry=self.registry,
        )

    def count_turn(self, bot: str, timings_ms: dict[str, float], failed: bool) -> None:
        self.turns.labels(bot, "llm_failed" if failed else "answered", self.pid).inc()
        for step in STEPS:
            if step in timings_ms and (step != "llm" or timings_ms[step] > 0):
                self.steps.labels(step, self.pid).observe(timings_ms[step] / 1000)

    def count_request(self, method: str, route: str, status: int, error: str | None) -> None:
        self.requests.labels(method, route, str(status), self.pid).inc()
        if error:
            self.errors.labels(error, self.pid).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)

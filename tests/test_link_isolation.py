"""Isolation of linked people as a property: for any people, links and unlinks, a person's
search, history and view reach their own lines and those of the identities linked with them,
never anyone else's; and guessed or replayed codes never link.

Hypothesis draws a few identities of one bot (some named like text-message senders), each
saying lines that carry a marker word of its own, and a run of steps: a code made by one
and entered by another, an unlink, a guessed code, a used code entered again. A model of
the groups (sets of identities) is kept beside the store; after the steps every identity's
reads are checked against it, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from membot import LinkCodeError, Memory, TooManyAttemptsError
from membot.memory.person_links import ALPHABET

BOT = "membot"
NAMES = ("ana", "sms-7f3a9c", "ana-mcp", "bo", "sms-0b41d2")
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Step:
    kind: str  # "link", "unlink", "guess", "replay"
    first: int
    second: int
    guess: str = ""


def marker(name: str) -> str:
    return "mk" + "".join(letter for letter in name if letter.isalnum())


@st.composite
def plans(draw: st.DrawFn) -> tuple[int, list[Step]]:
    people = draw(st.integers(min_value=2, max_value=len(NAMES)))
    index = st.integers(min_value=0, max_value=people - 1)
    code = st.text(alphabet=ALPHABET, min_size=8, max_size=8)
    step = st.builds(
        Step, st.sampled_from(("link", "link", "unlink", "guess", "replay")), index, index, code
    )
    return people, draw(st.lists(step, max_size=8))


class Groups:
    """The model: who is linked with whom."""

    def __init__(self, names: list[str]) -> None:
        self.of = {name: {name} for name in names}

    def link(self, first: str, second: str) -> None:
        merged = self.of[first] | self.of[second]
        for name in merged:
            self.of[name] = merged

    def unlink(self, name: str) -> None:
        rest = self.of[name] - {name}
        for other in rest:
            self.of[other] = rest
        self.of[name] = {name}


def run_plan(memory: Memory, people: int, steps: list[Step]) -> Groups:
    names = list(NAMES[:people])
    for name in names:
        memory.add(f"I said {marker(name)} here", user=name, bot=BOT, thread="t1")
    groups, used, clock = Groups(names), [], NOW
    for step in steps:
        # 13 minutes a step: past every failure window, and at most 4 codes an hour before
        # this one, so the rate limits never decide here.
        clock += timedelta(minutes=13)
        first, second = names[step.first], names[step.second]
        if step.kind == "link":
            code = memory.link_code(user=first, bot=BOT, now=clock).code
            if first == second:
                with pytest.raises(LinkCodeError):
                    memory.link_with_code(code, user=second, bot=BOT, now=clock)
                continue
            memory.link_with_code(code, user=second, bot=BOT, now=clock)
            groups.link(first, second)
            used.append(code)
        elif step.kind == "unlink":
            memory.unlink(user=first, bot=BOT)
            groups.unlink(first)
        else:
            entered = step.guess if step.kind == "guess" else (used[-1] if used else step.guess)
            with pytest.raises((LinkCodeError, TooManyAttemptsError)):
                memory.link_with_code(entered, user=second, bot=BOT, now=clock)
    return groups


def check(memory: Memory, groups: Groups) -> None:
    for name, group in groups.of.items():
        assert memory.linked(user=name, bot=BOT).linked == tuple(sorted(group)), name
        for other in groups.of:
            found = memory.search(f"said {marker(other)}", user=name, bot=BOT, k=20)
            persons = {match.line.person for match in found}
            assert persons <= group, (name, other, persons)
            if other in group:  # not vacuous: a linked identity's line is found
                assert any(marker(other) in match.line.text for match in found), (name, other)
        assert {line.person for line in memory.history(user=name, bot=BOT)} == group
        seen = memory.person_memory(user=name, bot=BOT)
        assert {line.person for thread in seen.threads for line in thread.lines} == group


def check_plan(location: str, embedder: Any, plan: tuple[int, list[Step]]) -> None:
    memory = Memory(location, embedder=embedder)
    try:
        check(memory, run_plan(memory, *plan))
    finally:
        memory.close()


@contextmanager
def store_location(postgres_server: str | None = None) -> Iterator[str]:
    """A fresh store for one example: a SQLite file, or a new PostgreSQL database."""
    if postgres_server is None:
        with tempfile.TemporaryDirectory(prefix="membot-links-") as folder:
            yield str(Path(folder) / "store.db")
        return
    import psycopg

    name = f"membot_links_{next(DATABASES)}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_server.replace("/postgres?", f"/{name}?")
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


DATABASES = itertools.count()


@EXAMPLES
@given(plan=plans())
def test_linked_people_see_their_group_and_nobody_else_on_sqlite(plan, make_embedder) -> None:
    note(f"plan: {plan!r}")
    with store_location() as location:
        check_plan(location, make_embedder(), plan)


@settings(EXAMPLES, max_examples=8)
@given(plan=plans())
def test_linked_people_see_their_group_and_nobody_else_on_postgresql(
    plan, make_embedder, postgres_server: str
) -> None:
    note(f"plan: {plan!r}")
    with store_location(postgres_server) as location:
        check_plan(location, make_embedder(), plan)

"""``membot end``, ``membot end-idle`` and ``membot memories`` in-process, with the real bundled
embedder and the scripted LLM."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot import ConfigError, Memory, Role
from membot.store import ThreadKey

pytestmark = pytest.mark.slow

# Dated today, the day the lines are said: a point must fall within the thread's days.
TODAY = datetime.now(UTC).date().isoformat()
POINTS = {
    "points": [f"{TODAY}: Alice is allergic to peanuts", f"{TODAY}: Alice loves green tea"],
    "categories": ["health", "Preferences"],
}


def flat(text: str) -> str:
    return " ".join(text.split())


def ended_at(db: Path, embedder, thread: str, user: str = "alice") -> datetime | None:
    memory = Memory(db, embedder=embedder)
    try:
        state = memory.store.thread_state(ThreadKey("membot", user, thread))
        assert state is not None
        return state.ended_at
    finally:
        memory.close()


def test_end_with_remember_yes_keeps_a_summary_that_memories_lists(cli, script, minilm) -> None:
    cli.say("I am allergic to peanuts and I love green tea.", "alice", "t1")

    ending = cli.json("end", "--user", "alice", "--thread", "t1", "--remember", "yes",
                      llm=script(json.dumps(POINTS)))  # fmt: skip

    assert ending["decision"] == "kept" and ending["ended_at"].endswith("Z")
    listed = cli.json("memories", "--user", "alice")
    assert listed == [ending["remembered"]]
    (summary,) = listed
    assert summary["kind"] == "summary" and summary["thread"] == "t1"
    assert summary["text"] == (
        f"- {TODAY}: Alice is allergic to peanuts\n- {TODAY}: Alice loves green tea"
    )
    assert summary["categories"] == ["health", "preferences"]
    for key in ("created_at", "covers_from", "covers_to"):
        assert datetime.fromisoformat(summary[key]).tzinfo is not None
        assert summary[key].endswith("Z")
    assert ended_at(cli.db, minilm, "t1") is not None

    table = flat(cli.ok("memories", "--user", "alice").stdout)
    assert "membot / t1" in table and "health, preferences" in table
    assert "peanuts" in table and TODAY in table  # wrapped to the console width
    assert cli.json("memories", "--user", "bob") == []


def test_memories_shows_each_thread_name_whole(cli, make_memory) -> None:
    """Two threads of one minute ("chat-2026-11-26-102701", "…102759") were cut to the same
    "chat-2026-11-26-1027…" in the table (a walkthrough)."""
    memory = make_memory(path=cli.db)
    for thread in ("chat-2026-11-26-102701", "chat-2026-11-26-102759"):
        memory.add("I keep bees on the roof.", user="alice", thread=thread)
        points = "- keeps bees on the roof of the building, three hives, since last spring" * 3
        memory.add_summary(bot="membot", user="alice", thread=thread, text=points)
    shown = cli.ok("memories", "--user", "alice").stdout
    assert "membot / chat-2026-11-26-102701" in shown
    assert "membot / chat-2026-11-26-102759" in shown


def test_end_with_remember_no_derives_nothing_and_loads_no_model(cli, script, minilm) -> None:
    cli.say("I am allergic to peanuts.", "alice", "t1")
    llm = script(json.dumps(POINTS))

    result = cli.ok("end", "--user", "alice", "--thread", "t1", "--remember", "no", llm=llm)

    assert "ended thread 't1' of 'alice'" in flat(result.stderr)
    assert "not remembered: nothing was derived" in flat(result.stdout)
    assert json.loads(Path(llm.removeprefix("script:")).read_text()) == [json.dumps(POINTS)]
    assert ended_at(cli.db, minilm, "t1") is not None
    assert "nothing is remembered about 'alice'" in cli.ok("memories", "-u", "alice").stderr
    assert len(cli.json("history", "--user", "alice")) == 1  # the line stays


def test_end_with_a_policy_that_drops_says_why(cli, script, minilm) -> None:
    cli.ok("bot", "set", "membot", "remember_policy", "never keep health details")
    cli.say("I am allergic to peanuts.", "alice", "t1")
    verdict = {"decision": "drop", "reason": "it is all health"}
    llm = script(json.dumps(POINTS), json.dumps(verdict))

    result = cli.ok("end", "-u", "alice", "-t", "t1", "--remember", "yes", llm=llm)

    assert "nothing remembered: it is all health" in flat(result.stdout)
    assert cli.json("memories", "--user", "alice") == []


def test_end_without_remember_and_without_a_terminal_refuses(cli, minilm) -> None:
    cli.say("Hello.", "alice", "t1")

    asked = cli.run("end", "--user", "alice", "--thread", "t1")
    assert isinstance(asked.exception, ConfigError)
    assert "pass --remember yes or --remember no" in str(asked.exception)

    bad = cli.run("end", "--user", "alice", "--thread", "t1", "--remember", "maybe")
    assert isinstance(bad.exception, ConfigError)
    assert "--remember wants yes or no, got 'maybe'" in str(bad.exception)
    assert ended_at(cli.db, minilm, "t1") is None


def test_end_of_an_unknown_thread_says_so(cli, minilm) -> None:
    cli.say("Hello.", "alice", "t1")

    result = cli.run("end", "--user", "alice", "--thread", "t9", "--remember", "no")

    assert isinstance(result.exception, ConfigError)
    assert "'alice' has no thread 't9' with bot 'membot'" in str(result.exception)


def test_end_idle_ends_only_threads_idle_past_the_timeout(cli, script, minilm) -> None:
    cli.say("A fresh line.", "alice", "recent")
    memory = Memory(cli.db, embedder=minilm)
    old = datetime.now(UTC) - timedelta(days=2)
    memory.add("An old line.", user="alice", thread="old", role=Role.HUMAN, created_at=old)
    memory.close()
    llm = script(json.dumps(POINTS))

    endings = cli.json("end-idle", llm=llm)

    assert [(e["user"], e["thread"], e["decision"]) for e in endings] == [
        ("alice", "old", "not asked to remember")
    ]
    assert ended_at(cli.db, minilm, "old") is not None
    assert ended_at(cli.db, minilm, "recent") is None
    assert "ended 0 idle threads" in cli.ok("end-idle").stderr

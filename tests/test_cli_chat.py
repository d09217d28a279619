"""``membot chat``: the interactive loop, driven through stdin in-process."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot import BotSettings, ConfigError, Memory
from membot.cli.chat import HELP
from membot.store import ThreadKey

pytestmark = pytest.mark.slow


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_chat_session_answers_remembers_and_explains(cli, script, minilm) -> None:
    cli.ok("bot", "set", "membot", "threshold", "0.3")
    session = (
        "\n".join(
            [
                "/help",
                "/recall",
                "I work in logistics at a shipping company.",
                "/new",
                "Where do I work? In logistics?",
                "/recall",
                "/dance",
                "",
                "/quit",
            ]
        )
        + "\n"
    )
    llm = script("Noted.", "At a shipping company.")

    result = cli.run("chat", "--user", "alice", "--thread", "first", llm=llm, input=session)

    assert result.exit_code == 0, result.output
    shown = flat(result.stdout)
    assert "user alice, thread first" in shown
    assert "/recall what memory the last reply used" in shown
    assert "no reply yet" in shown
    assert "ai> Noted." in shown and "ai> At a shipping company." in shown
    assert "new thread chat-" in shown
    assert "first — score" in shown and "(matched now)" in shown
    assert "*1" in shown  # the matched line is starred
    assert "unknown command /dance" in shown
    assert "prompt " in shown and f" of {BotSettings().prompt_budget} tokens" in shown
    history = json.loads(cli.ok("history", "--user", "alice", "--json").stdout)
    assert [line["role"] for line in history] == ["human", "bot", "human", "bot"]
    assert history[0]["thread"] == "first" and history[2]["thread"].startswith("chat-")


def test_a_chat_turn_whose_llm_fails_says_so_and_goes_on(cli, script, minilm) -> None:
    llm = script("!error the model is down", "Back.")
    result = cli.run("chat", "-u", "alice", "-t", "t1", llm=llm, input="hello\nagain\n")

    assert result.exit_code == 0
    assert "error: the model is down (your line was stored)" in flat(result.stderr)
    assert "ai> Back." in flat(result.stdout)
    history = json.loads(cli.ok("history", "--user", "alice", "--json").stdout)
    assert [line["text"] for line in history] == ["hello", "again", "Back."]


# Dated today, the day the lines are said: a point must fall within the thread's days.
TODAY = datetime.now(UTC).date().isoformat()
POINTS = {"points": [f"{TODAY}: alice is allergic to peanuts"], "categories": ["health"]}


def test_end_asks_and_on_yes_remembers_then_starts_a_new_thread(cli, script, minilm) -> None:
    session = "I am allergic to peanuts.\n/end\nyes\nHello again.\n/quit\n"
    llm = script("Noted.", json.dumps(POINTS), "Hi.")

    result = cli.run("chat", "-u", "alice", "-t", "first", llm=llm, input=session)

    assert result.exit_code == 0, result.output
    shown = flat(result.stdout)
    assert "Shall I remember this conversation? (yes/no)" in shown
    assert "ended thread first" in shown
    assert f"remembered [health]: - {TODAY}: alice is allergic to peanuts" in shown
    assert "new thread chat-" in shown and "ai> Hi." in shown
    again = cli.run("chat", "-u", "alice", "-t", "later", llm=script("You are."),
                    input="Am I allergic to peanuts?\n/recall\n/quit\n")  # fmt: skip
    recalled = flat(again.stdout)  # the summary a reply used is shown, not only lines
    assert "summary of first — score" in recalled and "alice is allergic to peanuts" in recalled
    (summary,) = cli.json("memories", "--user", "alice")
    assert (summary["kind"], summary["thread"]) == ("summary", "first")
    history = cli.json("history", "--user", "alice")
    assert [line["thread"] for line in history][:2] == ["first", "first"]
    assert [line["thread"] == "first" for line in history][2:] == [False] * 4
    assert "/end     end this conversation" in HELP


def test_end_on_no_remembers_nothing(cli, script, minilm) -> None:
    llm = script("Noted.", json.dumps(POINTS))

    result = cli.run("chat", "-u", "alice", "-t", "first", llm=llm,
                     input="I am allergic to peanuts.\n/end\nno\n/end\n")  # fmt: skip

    assert result.exit_code == 0, result.output
    shown = flat(result.stdout)
    assert "not remembered: nothing was derived" in shown
    assert "nothing was said in this thread yet" in shown  # the second /end, in a new thread
    assert cli.json("memories", "--user", "alice") == []
    left = json.loads(Path(llm.removeprefix("script:")).read_text())
    assert left == [json.dumps(POINTS)]  # no model call to end without remembering


def test_a_chat_ends_the_persons_idle_threads_first(cli, script, minilm) -> None:
    memory = Memory(cli.db, embedder=minilm)
    long_ago = datetime.now(UTC) - timedelta(days=3)
    memory.add("An old conversation.", user="alice", thread="old", created_at=long_ago)
    memory.add("Bob's old conversation.", user="bob", thread="bobs", created_at=long_ago)
    memory.close()

    result = cli.run("chat", "-u", "alice", "-t", "new", llm=script(), input="/quit\n")

    assert result.exit_code == 0, result.output
    assert "ended 1 idle thread(s) without remembering: old" in flat(result.stdout)
    memory = Memory(cli.db, embedder=minilm)
    old = memory.store.thread_state(ThreadKey("membot", "alice", "old"))
    bobs = memory.store.thread_state(ThreadKey("membot", "bob", "bobs"))
    memory.close()
    assert old is not None and old.ended_at is not None
    assert bobs is not None and bobs.ended_at is None  # only the person chatting
    assert cli.json("memories", "--user", "alice") == []


def test_recalled_lines_and_names_with_square_brackets_show_as_said(cli, script) -> None:
    """rich reads "[/]" as a closing style: /recall's table and the thread's name crashed."""
    cli.ok("bot", "set", "membot", "threshold", "0.3")
    said = "I keep my notes in [/] brackets at the [bold] logistics office"
    session = f"{said}\n/new\nWhere are my notes at the logistics office?\n/recall\n/[x]\n/quit\n"
    result = cli.run("chat", "--user", "al", "--thread", "[one]", llm=script("ok", "ok"),
                     input=session)  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = flat(result.stdout)
    assert "thread [one]" in shown and "[one] — score" in shown
    assert flat(said) in shown and "unknown command /[x]" in shown


@pytest.mark.parametrize("answer", ["yes.", "Yes please", "y", "sure"])
def test_end_takes_a_yes_by_its_first_word(cli, script, minilm, answer: str) -> None:
    llm = script("Noted.", json.dumps(POINTS))
    result = cli.run("chat", "-u", "alice", "-t", "first", llm=llm,
                     input=f"I am allergic to peanuts.\n/end\n{answer}\n/quit\n")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "remembered [health]" in flat(result.stdout)
    assert len(cli.json("memories", "--user", "alice")) == 1


def test_end_takes_an_unclear_answer_as_no_and_says_so(cli, script, minilm) -> None:
    llm = script("Noted.", json.dumps(POINTS))
    result = cli.run("chat", "-u", "alice", "-t", "first", llm=llm,
                     input="I am allergic to peanuts.\n/end\nmaybe later\n/quit\n")  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = flat(result.stdout)
    assert "'maybe later' is neither yes nor no: taken as no" in shown
    assert "not remembered: nothing was derived" in shown
    assert cli.json("memories", "--user", "alice") == []


@pytest.mark.parametrize(
    ("option", "name", "message"),
    [
        ("-t", "..", "the thread name '..' cannot be or hold '..'"),
        ("-u", "", "a line needs a user name"),
        ("-b", "a/b", "the bot name 'a/b' holds '/'"),
    ],
)
def test_a_name_no_line_can_have_stops_the_chat_before_it_starts(
    cli, script, option: str, name: str, message: str
) -> None:
    """They started the chat, and then every line was refused, with exit 0."""
    result = cli.run("chat", option, name, llm=script(), input="hello\n/quit\n")
    assert isinstance(result.exception, ConfigError), result.output
    assert message in str(result.exception)
    assert "you>" not in result.stdout


def test_an_idle_thread_chat_ended_says_how_to_remember_it(cli, script, minilm) -> None:
    """Consent is never assumed: the chat ends idle threads without remembering, and names
    the command that remembers one once the person said yes."""
    memory = Memory(cli.db, embedder=minilm)
    long_ago = datetime.now(UTC) - timedelta(days=3)
    memory.add("I am allergic to peanuts.", user="alice", thread="old", created_at=long_ago)
    memory.close()

    shown = flat(cli.run("chat", "-u", "alice", "-t", "new", llm=script(), input="/quit\n").stdout)

    hint = "to remember one: membot end --bot membot --user alice --thread old --remember yes"
    assert f"without remembering: old ({hint})" in shown
    points = {"points": ["alice is allergic to peanuts"], "categories": ["health"]}
    command = hint.removeprefix("to remember one: membot ").split()
    cli.ok(*command, llm=script(json.dumps(points)))
    (summary,) = cli.json("memories", "--user", "alice")
    assert summary["thread"] == "old" and "peanuts" in summary["text"]

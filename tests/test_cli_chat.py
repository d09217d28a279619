"""``membot chat``: the interactive loop, driven through stdin in-process."""

from __future__ import annotations

import json

import pytest

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
    assert "prompt " in shown and " of 2048 tokens" in shown
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

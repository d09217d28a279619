"""Recall through the front ends, as a new user tries it (issue 30 item 6a): MCP ``recall``
right after ``remember`` finds the line, copies of a question come back as one block, and a
REST turn's trace says how many copies a match stands for."""

from __future__ import annotations

import pytest
from conftest import Server
from mcp_client import answer, serving, session_with_key

from membot import Memory, ScriptedLLM
from membot.server import create_app
from membot.service.keys import create_key

EXAM, ANSWER = "when is my exam?", "My exam is on 12 December."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def recalled_texts(recalled: dict) -> list[str]:
    return [line["text"] for block in recalled["blocks"] for line in block["lines"]]


@pytest.mark.anyio
async def test_mcp_recall_right_after_remember_finds_the_line(memory: Memory) -> None:
    app = create_app(memory, llm=ScriptedLLM())
    key = create_key(memory, bot="b", user="sam").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        await call("remember", {"text": ANSWER, "thread": "t1"})
        anywhere = answer(await call("recall", {"text": EXAM}))
        elsewhere = answer(await call("recall", {"text": EXAM, "thread": "t2"}))
        # A line written after the first recall read the person's lines is found as well.
        await call("remember", {"text": "My driving test is on 3 March.", "thread": "t1"})
        later = answer(await call("recall", {"text": "when is my driving test?"}))
        # Named, the thread's own latest lines are left out: a turn of it holds them already.
        same_thread = answer(await call("recall", {"text": EXAM, "thread": "t1"}))

    assert ANSWER in recalled_texts(anywhere) and ANSWER in recalled_texts(elsewhere)
    assert "My driving test is on 3 March." in recalled_texts(later)
    assert same_thread["blocks"] == []


@pytest.mark.anyio
async def test_mcp_recall_brings_the_answer_not_four_copies_of_the_question(memory) -> None:
    app = create_app(memory, llm=ScriptedLLM())
    key = create_key(memory, bot="b", user="sam").secret
    async with serving(app) as transport, session_with_key(transport, key) as session:
        call = session.call_tool
        for number, asked in enumerate((EXAM, "When is my exam?", "when is my exam", EXAM)):
            await call("remember", {"text": asked, "thread": f"t{number}"})
            reply = {"text": "No idea, sorry.", "thread": f"t{number}", "role": "bot"}
            await call("remember", reply)
        await call("remember", {"text": ANSWER, "thread": "t1"})
        recalled = answer(await call("recall", {"text": EXAM}))

    texts = recalled_texts(recalled)
    assert ANSWER in texts
    assert sum(text.casefold().startswith("when is my exam") for text in texts) == 1


def test_a_rest_turn_s_trace_counts_the_copies_a_match_stands_for(server: Server, admin) -> None:
    for number in range(3):
        server.memory.add("I keep bees on my roof!", user="sam", thread=f"t{number}", bot="coach")
    server.llm.enqueue('{"response": "Lovely", "citation_ids": []}')
    turn = server.client.post(
        "/v1/bots/coach/turns",
        json={"user": "sam", "thread": "now", "text": "my bees on the roof"},
        headers=admin,
    )
    assert turn.status_code == 200, turn.text
    (match,) = turn.json()["matches"]
    assert (match["text"], match["duplicates"]) == ("I keep bees on my roof!", 2)

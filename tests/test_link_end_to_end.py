"""One person across channels, end to end with the bundled MiniLM: a fact said on the web
is recalled in a text conversation once the two identities are linked, with the trace naming
the identity each recalled line came from, and no longer after they are unlinked."""

from __future__ import annotations

import pytest

from membot import Bot, Memory, ScriptedLLM

pytestmark = pytest.mark.slow

SMS = "sms-3c9e41d0"
FACT = "My sister Harriet moved to Kyoto last spring and teaches English there."
ASKED = "Where does my sister Harriet live now?"


def recalled_texts(turn) -> set[str]:
    return {line.text for block in turn.recalled for line in block.lines}


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_a_fact_said_on_the_web_is_recalled_over_sms_while_linked(
    memory: Memory, make_memory, minilm
) -> None:
    memory = make_memory(embedder=minilm)
    bot = Bot(memory, ScriptedLLM(["Noted."] * 8))
    bot.turn(FACT, user="ana", thread="web-1")
    bot.turn("I have a dentist appointment on Tuesday.", user="ana", thread="web-1")
    bot.turn("Hello, it's me on my phone.", user=SMS, thread="texts")

    before = bot.turn(ASKED, user=SMS, thread="texts")
    assert FACT not in recalled_texts(before)
    assert {match.line.person for match in memory.search(ASKED, user=SMS, k=20)} == {SMS}

    code = memory.link_code(user="ana", bot="membot")
    assert memory.link_with_code(code.code, user=SMS, bot="membot").linked == ("ana", SMS)

    linked = bot.turn(ASKED, user=SMS, thread="texts")
    assert FACT in recalled_texts(linked)
    trace = linked.to_json()
    block = next(b for b in trace["recalled"] if any(li["text"] == FACT for li in b["lines"]))
    assert block["person"] == "ana"  # the trace says which identity (channel) said it
    found = memory.search("Which city did Harriet move to?", user=SMS, k=5)
    fact = next(match for match in found if match.line.text == FACT)
    assert fact.to_json()["person"] == "ana"
    # Each line keeps the identity that said it; history spans both.
    assert {line.person for line in memory.history(user=SMS, bot="membot")} == {"ana", SMS}
    assert code.code not in linked.prompt and code.code not in str(trace)

    memory.unlink(user=SMS, bot="membot")
    after = bot.turn(ASKED, user=SMS, thread="texts")
    assert FACT not in recalled_texts(after)
    assert {match.line.person for match in memory.search(ASKED, user=SMS, k=20)} == {SMS}
    assert {match.line.person for match in memory.search(ASKED, user="ana", k=20)} == {"ana"}

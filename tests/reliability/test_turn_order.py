"""Two processes answering turns of one thread at the same moment (``membot serve --workers
2``, or the command line beside a server): each reply follows its own line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HashingEmbedder

from membot import Memory

TESTS = str(Path(__file__).resolve().parents[1])
pytestmark = pytest.mark.slow

# A process that says three lines in thread "t" of "sam", its model slow enough (0.3 s a
# reply) for the other process's turns to arrive while it writes.
TALKER = """
import sys, time
sys.path.insert(0, sys.argv[5])
from conftest import HashingEmbedder
from membot import Bot, Memory, ScriptedLLM

class Slow(ScriptedLLM):
    def complete(self, messages, max_tokens, *, schema=None):
        time.sleep(0.3)
        said = messages[-1]["content"]
        return f"reply to {said}"

memory = Memory(sys.argv[1], embedder=HashingEmbedder())
bot = Bot(memory, Slow())
open(sys.argv[3], "w").close()  # ready
while not __import__("os").path.exists(sys.argv[4]):  # go
    time.sleep(0.005)
for n in range(3):
    bot.turn(f"{sys.argv[2]}{n}", user="sam", thread="t")
"""


def test_two_processes_turns_of_one_thread_keep_each_reply_after_its_line(tmp_path: Path):
    """Before the store's turn lock, the lines of both came first and the replies after
    them (HHBB), each reply after the other process's line."""
    db = tmp_path / "m.db"
    go = tmp_path / "go"
    talkers = []
    for name in ("a", "b"):
        ready = tmp_path / f"{name}.ready"
        command = [sys.executable, "-c", TALKER, str(db), name, str(ready), str(go), TESTS]
        talkers.append((subprocess.Popen(command, stderr=subprocess.PIPE, text=True), ready))
    for _, ready in talkers:
        while not ready.exists():
            pass
    go.touch()
    for process, _ in talkers:
        assert process.wait(timeout=120) == 0, process.stderr.read()
    lines = Memory(db, embedder=HashingEmbedder()).history(user="sam", thread="t")
    assert len(lines) == 12
    for said, reply in zip(lines[::2], lines[1::2], strict=True):
        assert (said.role, reply.role) == ("human", "bot")
        assert reply.text == f"reply to {said.text}", [line.text for line in lines]

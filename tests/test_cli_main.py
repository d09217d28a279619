"""The installed ``membot`` script: errors a person meets are one clear line and a non-zero exit.

These run the real executable in a subprocess (about 5 s each), so there are only two.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MEMBOT = Path(sys.executable).with_name("membot")


def membot(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMBOT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def flat(text: str) -> str:
    """Messages as one line: the console wraps long ones at its width."""
    return " ".join(text.split())


def test_a_bad_setting_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    result = membot("--db", str(db), "bot", "set", "membot", "threshold", "high")

    assert result.returncode == 1
    assert "error: bot setting threshold wants a number, got 'high'" in flat(result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.slow
def test_an_unreachable_llm_fails_the_command_but_keeps_the_line(tmp_path: Path, cli) -> None:
    result = membot(
        "--db",
        str(cli.db),
        "--llm",
        "openai:x@http://127.0.0.1:9/v1",
        "say",
        "Are you there?",
        "--user",
        "alice",
        "--thread",
        "t1",
    )

    assert result.returncode != 0
    message = flat(result.stderr)
    assert message.startswith("error: cannot reach openai:x@http://127.0.0.1:9/v1")
    assert message.endswith("(your line was stored)")
    assert "Traceback" not in result.stderr
    history = json.loads(cli.ok("history", "--user", "alice", "--json").stdout)
    assert [(line["role"], line["text"]) for line in history] == [("human", "Are you there?")]

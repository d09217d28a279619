"""The worked example (docs/bots.md, once README's): its commands, run in-process with the
scripted replies of ``examples/worked_example.sh``, print what the page shows, and the page
says which run that is."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[1]


def flat(text: str) -> str:
    return " ".join(text.split())


def worked_example() -> str:
    page = (REPO / "docs" / "bots.md").read_text(encoding="utf-8")
    return page.split("\n## A worked example\n", 1)[1].split("\n## ", 1)[0]


def test_the_worked_examples_output_is_the_scripted_run_and_the_page_says_so(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typed as written, the commands answer with SmolLM2, whose `end` keeps nothing for a
    bot with a remember-policy: the README once showed the scripted run's output without
    saying so."""
    section = worked_example()
    assert "The output shown" in section and "is that scripted run's" in section
    assert "`examples/worked_example.sh` reproduces it" in section
    assert "nothing remembered: this bot has a remember policy" in section

    replies = tmp_path / "replies.json"
    shutil.copy(REPO / "examples" / "worked_example_replies.json", replies)
    monkeypatch.chdir(REPO)  # the block names examples/espresso.md
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    printed: dict[str, str] = {}
    shown: dict[str, list[str]] = {}
    command = ""
    for line in block.splitlines():
        if line.startswith("#"):
            shown.setdefault(command, []).append(line.lstrip("#").strip())
            continue
        command = line
        result = cli.ok(*shlex.split(line)[1:], llm=f"script:{replies}")
        printed[command] = result.stdout

    (end,) = [command for command in shown if command.startswith("membot end")]
    assert flat("\n".join(shown[end])) in flat(printed[end])
    (birthday,) = [command for command in shown if "birthday?" in command]
    assert shown[birthday] == [
        "history_matches: the summary s1 (score 0.357) and the monday lines; citations: s1"
    ]
    turn = json.loads(printed[birthday])
    summaries = [m for m in turn["history_matches"] if m["kind"] == "summary"]
    assert [(m["id"], round(m["score"], 3)) for m in summaries] == [("s1", 0.357)]
    blocks = [m["block"]["thread"] for m in turn["history_matches"] if m["kind"] == "lines"]
    assert blocks == ["monday"]
    assert [citation["id"] for citation in turn["citations"]] == ["s1"]

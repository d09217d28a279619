"""A bot's expertise: documents read, chunked and embedded beside the history, used in turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from membot import Bot, ConfigError, ImportFormatError, Memory, ScriptedLLM

GUIDE = """# Espresso guide

## Grind

Espresso needs a fine grind, finer than table salt. Dose eighteen grams of coffee.

## Water

Brew at ninety-three degrees with nine bars of pressure for twenty-eight seconds.
"""


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    path = tmp_path / "espresso.md"
    path.write_text(GUIDE, encoding="utf-8")
    return path


def test_a_document_is_chunked_embedded_listed_replaced_and_removed(memory: Memory, guide) -> None:
    info = memory.add_document(guide, bot="barista")
    assert (info.name, info.title, info.media) == ("espresso.md", "Espresso guide", "markdown")
    assert info.chunks >= 1
    ids, _ = memory.store.chunk_vectors(memory.store.bot_id("barista"))
    chunks = memory.store.chunks(ids.tolist())
    assert any("fine grind" in chunk.text for chunk in chunks)
    assert {chunk.heading for chunk in chunks} >= {"Grind", "Water"}
    guide.write_text("# Espresso guide\n\nUse fresh beans.\n", encoding="utf-8")
    again = memory.add_document(guide, bot="barista")
    assert [d.name for d in memory.documents("barista")] == ["espresso.md"]
    assert again.chunks == 1 and again.sha256 != info.sha256
    assert memory.documents("membot") == []  # another bot's expertise is its own
    assert memory.remove_document("espresso.md", bot="barista") is True
    assert memory.documents("barista") == []


def test_a_bad_file_stores_nothing(memory: Memory, tmp_path: Path, guide, caplog) -> None:
    memory.add_document(guide, bot="barista")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"not a pdf at all")
    with pytest.raises(ImportFormatError, match="not a readable PDF"):
        memory.add_document(bad, bot="barista")
    # pypdf's own warnings ("invalid pdf header") stood above that error on the terminal.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("pypdf")] == []
    with pytest.raises(ImportFormatError):
        memory.add_document(tmp_path / "missing.txt", bot="barista")
    assert [d.name for d in memory.documents("barista")] == ["espresso.md"]


def test_two_files_of_one_name_in_one_call_store_nothing(memory: Memory, tmp_path: Path) -> None:
    """Two files named plan.md in one add: both were said added, and the second replaced
    the first (a newcomer's walkthrough). Now neither is added, and the error says why."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "plan.md").write_text("Apples in spring.", encoding="utf-8")
    (tmp_path / "b" / "plan.md").write_text("Bananas in autumn.", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"two of the files are named 'plan\.md'"):
        memory.add_documents([tmp_path / "a" / "plan.md", tmp_path / "b" / "plan.md"], bot="b")
    assert memory.documents("b") == []


def test_a_bot_with_expertise_and_no_history_answers_from_its_documents(
    memory: Memory, guide
) -> None:
    memory.add_document(guide, bot="barista")
    memory.configure_bot("barista", expertise_min_score=-1.0)
    llm = ScriptedLLM(['{"response": "Use a fine grind.", "citation_ids": ["e1"]}'])
    turn = Bot(memory, llm, "barista").turn("How fine should the grind be?", user="u", thread="t")
    assert turn.history_matches == () and "unrelated to any prior" in turn.history_hints
    assert turn.expertise_matches and turn.expertise_matches[0]["source"] == "expertise"
    assert '<document citation_id="e1">\n[Espresso guide — Grind]' in turn.prompt
    assert turn.response == "Use a fine grind."
    ((cited),) = turn.citations
    assert (cited.id, cited.source) == ("e1", "expertise") and "fine grind" in cited.text
    assert turn.score == cited.score


def test_expertise_from_the_command_line(cli, guide: Path, tmp_path: Path) -> None:
    # A mistyped bot is an error, not a new bot holding the document (a walkthrough).
    typo = cli.run("expertise", "add", "--bot", "barista", str(guide))
    assert typo.exit_code != 0 and "`membot bot create barista` makes it" in str(typo.exception)
    cli.ok("bot", "create", "barista")
    cli.ok("expertise", "add", "--bot", "barista", str(guide))
    (listed,) = cli.json("expertise", "list", "--bot", "barista")
    assert listed["name"] == "espresso.md" and listed["chunks"] >= 1
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    result = cli.run("expertise", "add", "--bot", "barista", str(empty), str(guide))
    assert result.exit_code != 0 and isinstance(result.exception, ImportFormatError)
    cli.ok("expertise", "remove", "--bot", "barista", "espresso.md")
    assert cli.json("expertise", "list", "--bot", "barista") == []
    assert cli.run("expertise", "remove", "--bot", "barista", "espresso.md").exit_code != 0

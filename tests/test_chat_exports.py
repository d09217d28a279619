"""ChatGPT and Claude exports imported: what is stored (the path that was last seen, tool
calls, placeholders, times), told apart by their shape, imported again or after a stop
without a line twice, and malformed parts named and skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from export_files import (
    CHATGPT_LINES,
    CLAUDE_LINES,
    LISBON,
    T0,
    chatgpt_export,
    chatgpt_lisbon,
    chatgpt_same_title,
    claude_export,
    write_json,
    write_zip,
)
from test_import_resume import StopsAfter

from membot import ChatExport, ConfigError, ImportFormatError, Memory
from membot.memory.exports.conversation import thread_name
from membot.memory.exports.json_array import JsonArrayReader


def imported(memory: Memory, path: Path, fmt: str | None = None, **options: Any) -> int:
    with ChatExport(path, fmt, bot="membot", user="ana") as export:
        return memory.add_many(export.lines(), **options)


def stored(memory: Memory) -> list[tuple[str, str, str | None, str]]:
    return [
        (line.thread, str(line.role), line.speaker, line.text)
        for line in memory.history(user="ana")
    ]


def read(path: Path, fmt: str | None = None) -> tuple[list, ChatExport]:
    with ChatExport(path, fmt, bot="membot", user="ana") as export:
        return list(export.lines()), export


@pytest.mark.parametrize("write", [write_json, write_zip])
def test_a_chatgpt_export_is_stored_as_the_conversation_last_seen(
    make_memory, tmp_path: Path, write
) -> None:
    path = write(tmp_path / "export", chatgpt_export())
    lines, export = read(path)
    assert export.format == "chatgpt" and export.detected
    assert [(x.thread, str(x.role), x.speaker, x.text) for x in lines] == CHATGPT_LINES
    # Times are the messages' own, or their conversation's when they have none.
    assert lines[0].created_at.timestamp() == pytest.approx(T0)
    assert lines[-1].created_at.timestamp() == pytest.approx(T0 + 90_005)
    assert [line.ref for line in lines[:6]] == ["u1", "a1", "u2", "a2-call", "t1", "a3"]
    skipped = export.tally.skipped
    assert skipped["on abandoned branches"] == 2  # the first answer, the first edit
    assert skipped["system and hidden messages"] == 1
    assert skipped["custom instructions"] == 1
    assert skipped["the model's reasoning"] == 1


@pytest.mark.parametrize("write", [write_json, write_zip])
def test_a_claude_export_is_stored_with_its_tool_lines_and_files(
    make_memory, tmp_path: Path, write
) -> None:
    lines, export = read(write(tmp_path / "export", claude_export()))
    assert export.format == "claude" and export.detected
    assert [(x.thread, str(x.role), x.speaker, x.text) for x in lines] == CLAUDE_LINES
    assert [line.ref for line in lines[:4]] == ["m1", "m2", "m2#2", "m2#3"]
    assert lines[-1].created_at.isoformat() == "2024-06-03T18:00:04+02:00"
    assert export.tally.skipped["the model's reasoning"] == 1


@pytest.mark.parametrize(
    ("export", "expected"), [(chatgpt_export, CHATGPT_LINES), (claude_export, CLAUDE_LINES)]
)
def test_a_60000_character_paste_is_stored_whole(
    make_memory, tmp_path: Path, export, expected
) -> None:
    """A paste longer than a MiniLM reads is one line, stored whole (the line limit is
    1,000,000 characters)."""
    memory = make_memory()
    imported(memory, write_json(tmp_path / "export.json", export()))
    assert stored(memory) == expected


def test_an_export_imported_twice_stores_each_line_once(make_memory, embedder, tmp_path) -> None:
    path = write_zip(tmp_path / "export.zip", chatgpt_export())
    memory = make_memory(embedder)
    first = imported(memory, path)
    embedded = len(embedder.embedded)
    assert imported(memory, path) == 0
    assert len(embedder.embedded) == embedded  # nothing embedded again either
    assert memory.count_lines() == first


@pytest.mark.parametrize("batches", [0, 1, 2, 3])
def test_an_import_stopped_and_run_again_adds_what_is_missing(
    make_memory, make_embedder, tmp_path: Path, batches: int
) -> None:
    path = write_json(tmp_path / "export.json", chatgpt_export() + claude_like_chatgpt())
    whole = make_memory(make_embedder(), tmp_path / "whole.db")
    imported(whole, path, batch_size=3)

    first = make_memory(StopsAfter(make_embedder(), batches), tmp_path / "m.db")
    with pytest.raises(KeyboardInterrupt):
        imported(first, path, batch_size=3)
    assert first.count_lines() == 3 * batches
    first.close()
    again = make_memory(make_embedder(), tmp_path / "m.db")
    imported(again, path, batch_size=3)
    assert stored(again) == stored(whole)
    assert [line.seq for line in again.history(user="ana")
            if line.thread == f"{LISBON} · 67a1c2f0"] == list(range(1, 7))  # fmt: skip


def claude_like_chatgpt() -> list[dict[str, Any]]:
    """A few more ChatGPT conversations, for more batches."""
    more = []
    for n in range(3):
        conversation = chatgpt_same_title()
        conversation["conversation_id"] = conversation["id"] = f"{n}0000000-extra"
        more.append(conversation)
    return more


def test_a_later_export_with_more_conversations_adds_only_the_new_lines(
    make_memory, tmp_path: Path
) -> None:
    memory = make_memory()
    imported(memory, write_json(tmp_path / "old.json", [chatgpt_lisbon()]))
    grown = chatgpt_lisbon()
    grown["mapping"]["a3"]["children"] = ["u4"]
    grown["mapping"]["u4"] = {"id": "u4", "parent": "a3", "children": [], "message": {
        "id": "u4", "author": {"role": "user"}, "create_time": T0 + 500,
        "content": {"content_type": "text", "parts": ["And tram 12?"]}}}  # fmt: skip
    grown["current_node"] = "u4"
    newer = [chatgpt_same_title(), grown]  # another order, as a newer export may have
    assert imported(memory, write_json(tmp_path / "new.json", newer)) == 3
    lisbon = [line.text for line in memory.history(user="ana", thread=f"{LISBON} · 67a1c2f0")]
    assert lisbon[-1] == "And tram 12?"


def test_the_format_is_told_from_the_shape_or_checked_against_it(tmp_path: Path) -> None:
    chatgpt = write_json(tmp_path / "c.json", chatgpt_export())
    with pytest.raises(ImportFormatError, match="looks like a ChatGPT export, not a Claude"):
        ChatExport(chatgpt, "claude", bot="membot", user="ana")
    other = write_json(tmp_path / "o.json", [{"sample_id": "conv-1", "conversation": {}}])
    with pytest.raises(ImportFormatError, match=r"neither a ChatGPT one .* nor a Claude one"):
        ChatExport(other, None, bot="membot", user="ana")
    with pytest.raises(ImportFormatError, match="holds no conversations"):
        ChatExport(write_json(tmp_path / "e.json", []), None, bot="membot", user="ana")
    with pytest.raises(ConfigError, match="name the person"):
        ChatExport(chatgpt, None, bot="membot", user=None)


def test_a_zip_without_conversations_is_refused(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "photos.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("user.json", "{}")
    with pytest.raises(ImportFormatError, match=r"holds no conversations\.json"):
        ChatExport(path, None, bot="membot", user="ana")


def chatgpt_malformed() -> list[Any]:
    cycle = chatgpt_same_title()
    cycle["mapping"]["root"]["parent"] = "r"  # r -> q -> root -> r
    no_author = chatgpt_lisbon()
    del no_author["mapping"]["a1"]["message"]["author"]
    parts = chatgpt_same_title()
    parts["conversation_id"] = "parts000-x"
    parts["mapping"]["q"]["message"]["content"]["parts"] = {"0": "not a list"}
    lost = chatgpt_same_title()
    lost["conversation_id"] = "lost0000-x"
    lost["current_node"] = "gone"
    when = chatgpt_same_title()
    when["conversation_id"] = "when0000-x"
    when["mapping"]["r"]["message"]["create_time"] = "yesterday"
    return ["not a conversation", cycle, no_author, parts, lost, when]


def test_malformed_chatgpt_parts_are_named_and_skipped(make_memory, tmp_path: Path) -> None:
    lines, export = read(write_json(tmp_path / "bad.json", chatgpt_malformed()), "chatgpt")
    problems = export.tally.problems
    assert export.tally.problem_count == len(problems) == 6
    assert problems[0] == "conversation 1: skipped: not a conversation (an object) but str"
    assert re.match(r"conversation 2 \('New chat'\): skipped: mapping has a cycle", problems[1])
    assert problems[2] == f"conversation 3 ({LISBON!r}), message a1: no author.role"
    assert (
        problems[3]
        == "conversation 4 ('New chat'), message q: content.parts is not a list but dict"
    )
    assert "conversation 5 ('New chat'): skipped: current_node 'gone' names no node" in problems[4]
    assert problems[5] == (
        "conversation 6 ('New chat'), message r: create_time is not a time in seconds: 'yesterday'"
    )
    texts = [line.text for line in lines]
    assert "May is a lovely month for Lisbon: warm, few crowds." not in texts  # a1 skipped
    assert "Yes, that is tram 28. I count 6 main stops." in texts  # the rest of its thread
    assert texts[-1] == "What is a ledger?"  # the good message of the last conversation


def test_malformed_claude_parts_are_named_and_skipped(tmp_path: Path) -> None:
    conversations = claude_export()
    del conversations[0]["chat_messages"][2]  # the paste, too long before membot's new limit
    messages = conversations[1]["chat_messages"]
    messages.insert(0, {"uuid": "x1", "sender": "robot", "text": "beep"})
    messages.insert(1, {"uuid": "x2", "sender": "human", "text": 42, "created_at": "2024-01-01"})
    messages.insert(2, {"uuid": "x3", "sender": "human", "text": "hi", "created_at": "soon"})
    messages.insert(3, ["not", "a", "message"])
    conversations.append({"name": "no id", "chat_messages": []})
    conversations.append({"uuid": "u", "name": "n", "chat_messages": "nope"})
    lines, export = read(write_json(tmp_path / "bad.json", conversations))
    assert [p.split(": ")[0] for p in export.tally.problems] == [
        "conversation 2, message x1", "conversation 2, message x2", "conversation 2, message x3",
        "conversation 2, message 4", "conversation 3 ('no id')", "conversation 4 ('n')",
    ]  # fmt: skip
    assert "unknown sender 'robot'" in export.tally.problems[0]
    assert [line.text for line in lines[-2:]] == [
        "Remind me: my cat is called Pimenta.",
        "Noted: Pimenta.",
    ]


def test_a_file_that_is_not_json_is_refused_where_it_breaks(tmp_path: Path) -> None:
    whole = json.dumps(chatgpt_export())
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: whole.index('"title": "New chat"') + 30])
    export = ChatExport(cut, None, bot="membot", user="ana")
    read_lines = []
    with pytest.raises(ImportFormatError, match=r"cut.json: element 2 of the list: not JSON"):
        for line in export.lines():
            read_lines.append(line)
    export.close()
    assert len(read_lines) == 6  # the first conversation was read whole
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'[{"title": "caf\xe9"}]')
    with pytest.raises(ImportFormatError, match=r"not UTF-8 text .* at byte 15"):
        ChatExport(bad, None, bot="membot", user="ana")


def test_the_stream_reader_reads_the_list_in_any_chunk_size(tmp_path: Path) -> None:
    values = [{"a": "é" * 70, "b": [1, 2.5, None, True]}, 'x\\"y', 12345678901234567890, []]
    data = ("\ufeff [\n" + ",\n ".join(json.dumps(v, ensure_ascii=False) for v in values)
            + "\n]\n").encode()  # fmt: skip
    for chunk in (1, 2, 3, 7, 64, 1 << 20):
        path = tmp_path / "list.json"
        path.write_bytes(data)
        with path.open("rb") as handle:
            reader = JsonArrayReader(handle, "list.json", chunk_bytes=chunk)
            assert list(reader) == values
            assert reader.bytes_read == len(data)


def test_thread_names_are_names_membot_takes() -> None:
    assert thread_name("Trip\nto ./Lisbon", "abcdef0123") == "Trip to ./Lisbon · abcdef01"
    assert thread_name("a/../b", "12345678") == "a\u2215..\u2215b · 12345678"
    assert thread_name("   ", "12345678") == "Untitled · 12345678"
    long = thread_name("x" * 500, "12345678")
    assert len(long) == 200 and long.endswith("… · 12345678")


def test_the_import_command_says_which_format_it_chose_and_what_it_skipped(
    cli, tmp_path: Path
) -> None:
    path = str(write_zip(tmp_path / "chatgpt-export.zip", chatgpt_export()))
    refused = cli.run("import", path)
    assert isinstance(refused.exception, ConfigError)
    assert "name the person (--user NAME)" in str(refused.exception)
    first = " ".join(cli.ok("import", path, "--user", "ana").stderr.split())
    assert "reading chatgpt-export.zip as a ChatGPT export (told from its shape)" in first
    assert re.search(r"imported \d+ lines of 3 conversations: \d+ lines/s", first)
    assert "2 on abandoned branches" in first
    again = " ".join(cli.ok("import", path, "--user", "ana", "-f", "chatgpt").stderr.split())
    assert "as a ChatGPT export (as --format says)" in again
    assert re.search(r"imported 0 lines of 3 conversations \(\d+ were stored already\)", again)
    history = cli.json("history", "--user", "ana")
    assert history[0]["thread"] == f"{LISBON} · 67a1c2f0"
    assert history[0]["text"] == "I'm going to Lisbon in May with my sister Inês."


def test_the_readmes_import_commands_run(cli, tmp_path: Path, monkeypatch) -> None:
    """The commands of the README's "Bring your history", on the hand-written exports."""
    import shlex

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Bring your history\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    write_zip(tmp_path / "chatgpt-export.zip", chatgpt_export())
    write_json(tmp_path / "conversations.json", claude_export())
    commands = [line.split("#")[0] for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    for command in commands:
        cli.ok(*shlex.split(command)[1:])
    threads = {line["thread"] for line in cli.json("history", "--user", "ana")}
    assert {f"{LISBON} · 67a1c2f0", "Rivers 🌊 of Iberia · c1a0de00"} <= threads


@pytest.mark.slow
def test_an_export_import_killed_mid_run_and_run_again_stores_each_line_once(
    tmp_path: Path, minilm
) -> None:
    """`membot import` of an export killed with SIGKILL while it writes, then run again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from test_import_resume import count_lines

    conversations = []
    for n in range(60):  # 360 lines: two batches of 256
        conversation = chatgpt_lisbon()
        conversation["conversation_id"] = conversation["id"] = f"{n:08d}-lisbon"
        conversations.append(conversation)
    source = write_zip(tmp_path / "export.zip", conversations)
    db = tmp_path / "killed.db"
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(minilm.onnx_path.parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMBOT_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "membot", "--db", str(db), "import", str(source), "-u", "ana"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while count_lines(db) < 256 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert count_lines(db) in (256, 360)  # whole batches only

    subprocess.run(command, env=env, check=True, capture_output=True)
    memory = Memory(db)
    lines = memory.history(user="ana")
    assert len(lines) == 360
    for n in (0, 59):
        thread = [line for line in lines if line.thread == f"{LISBON} · {n:08d}"]
        assert [line.seq for line in thread] == list(range(1, 7))
        assert [line.ref for line in thread] == ["u1", "a1", "u2", "a2-call", "t1", "a3"]
    memory.close()

"""Importers: LoCoMo, LongMemEval and JSONL files into lines; malformed files store nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membot import ImportFormatError, Memory, Role
from membot.eval import shared_data_dir
from membot.memory.importers import parse_time, read_file

DATA = shared_data_dir()
LOCOMO = DATA / "locomo" / "locomo_dev.json"
LONGMEMEVAL = DATA / "longmemeval" / "longmemeval_s_dev.json"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("12:30 PM on 3 July, 2023", datetime(2023, 7, 3, 12, 30, tzinfo=UTC)),
        ("2023/05/20 (Sat) 00:29", datetime(2023, 5, 20, 0, 29, tzinfo=UTC)),
        ("2024-02-03T04:05:06Z", datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)),
        ("2024-02-03T04:05:06", datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)),
        ("2024-02-03T06:05:06+02:00", datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)),
    ],
)
def test_dates_of_every_format_become_utc(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed.utcoffset() is not None


def test_an_unknown_date_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown date format"):
        parse_time("yesterday at noon")


def test_locomo_sessions_become_dated_threads_of_the_first_speaker() -> None:
    plan = read_file(LOCOMO, "locomo", "membot", None)
    assert len(plan.lines) == 2760
    assert plan.threads == len({line.thread for line in plan.lines})

    first = plan.lines[0]
    assert first.text == "Hey Mel! Good to see you! How have you been?"
    assert (first.user, first.thread, first.speaker, first.ref) == (
        "Caroline",
        "conv-26/session_1",
        "Caroline",
        "D1:1",
    )
    assert first.role == Role.HUMAN and first.bot == "membot"
    assert first.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert plan.lines[1].speaker == "Melanie" and plan.lines[1].user == "Caroline"
    assert all(line.created_at and line.created_at.tzinfo == UTC for line in plan.lines)
    assert {line.thread.split("/")[0] for line in plan.lines} == {
        "conv-26",
        "conv-30",
        "conv-41",
        "conv-42",
        "conv-43",
    }
    assert any("[shares a photo: " in line.text for line in plan.lines)


def test_locomo_lines_belong_to_the_given_user(tmp_path: Path) -> None:
    plan = read_file(LOCOMO, "locomo", "coach", "me")
    assert {line.user for line in plan.lines} == {"me"}
    assert {line.bot for line in plan.lines} == {"coach"}


def test_longmemeval_haystack_sessions_become_threads_per_question() -> None:
    plan = read_file(LONGMEMEVAL, "longmemeval", "membot", None)
    questions = json.loads(LONGMEMEVAL.read_text())
    first_question = questions[0]
    session_id = first_question["haystack_session_ids"][0]
    first_turns = first_question["haystack_sessions"][0]

    mine = [line for line in plan.lines if line.user == first_question["question_id"]]
    in_session = [line for line in mine if line.thread == session_id]
    assert [line.text for line in in_session] == [turn["content"] for turn in first_turns]
    assert [line.role for line in in_session] == [
        Role.HUMAN if turn["role"] == "user" else Role.BOT for turn in first_turns
    ]
    assert in_session[0].ref == f"{session_id}:0"
    assert in_session[0].created_at == parse_time(first_question["haystack_dates"][0])
    assert {line.user for line in plan.lines} == {q["question_id"] for q in questions}
    assert all(line.text.strip() for line in plan.lines)  # empty turns are skipped
    assert len(plan.lines) == 30334


def write_jsonl(path: Path, *records: dict | str) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n",
        encoding="utf-8",
    )
    return path


def test_jsonl_lines_take_their_fields_or_the_defaults(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chat.jsonl",
        {"text": "hi", "role": "human", "thread": "t1", "created_at": "2024-01-02T03:04:05"},
        "",
        {"text": "hello", "role": "bot", "user": "bob", "speaker": "Bot", "ref": "x"},
    )
    plan = read_file(path, "jsonl", "membot", "alice")
    first, second = plan.lines
    assert (first.user, first.thread, first.role) == ("alice", "t1", Role.HUMAN)
    assert first.created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (second.user, second.thread, second.role) == ("bob", "imported", Role.BOT)
    assert (second.speaker, second.ref, second.created_at) == ("Bot", "x", None)
    assert plan.threads == 2


def locomo_sample(**changes: object) -> dict:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hello Ben"}],
        },
    }
    sample["conversation"].update(changes)
    return sample


@pytest.mark.parametrize(
    ("fmt", "content", "message"),
    [
        ("locomo", "{not json", ":1: not JSON"),
        ("locomo", json.dumps([1, 2]), "not a LoCoMo conversation"),
        ("locomo", json.dumps([{"sample_id": "x"}]), "not a LoCoMo conversation"),
        ("locomo", json.dumps([locomo_sample(session_1_date_time="soon")]), "unknown date"),
        ("locomo", json.dumps([locomo_sample(session_2=[])]), "not a LoCoMo conversation"),
        ("locomo", json.dumps([locomo_sample(session_1=[{"speaker": "Ann"}])]), "LoCoMo"),
        ("longmemeval", LOCOMO.read_text(), "not a LongMemEval question"),
        (
            "longmemeval",
            json.dumps(
                [
                    {
                        "question_id": "q",
                        "haystack_session_ids": ["s"],
                        "haystack_dates": [],
                        "haystack_sessions": [[]],
                    }
                ]
            ),
            "not a LongMemEval question",
        ),
        ("jsonl", '{"text": "ok", "user": "a"}\n{"text": "no', "chat.txt:2"),
        ("jsonl", '{"user": "a"}', "chat.txt:1: not a valid line: no 'text'$"),
        ("jsonl", '{"text": "hi", "user": "a", "role": "robot"}', "not a valid line"),
        (
            "jsonl",
            '{"text": "hi"}',
            r"chat.txt:1: not a valid line: a line needs a user name \(give it in the file or "
            r"with --user\)$",
        ),
        ("jsonl", '{"text": "hi", "user": "a", "created_at": "later"}', "unknown date"),
        # Kept before, and its remembered points bore the date:
        (
            "jsonl",
            '{"text": "hi", "user": "a", "created_at": "9999-12-31T23:59:59Z"}',
            "created_at '9999-12-31T23:59:59Z' is in the future",
        ),
        # Stored as their repr ("['x']") or whole, before:
        ("jsonl", '{"text": "hi", "user": "a", "thread": ["x"]}', "a line needs a thread name"),
        ("jsonl", '{"text": "hi", "user": "a", "ref": {"id": 1}}', "ref is text or a number"),
        (
            "jsonl",
            '{"text": "hi", "user": "a", "thread": "' + "t" * 201 + '"}',
            "the thread name has 201 characters; at most 200",
        ),
        (
            "jsonl",
            '{"text": "hi", "user": "a", "speaker": "' + "s" * 5000 + '"}',
            "speaker has 5,000 characters; at most 200",
        ),
        (  # PostgreSQL's index refused it: a 503 over HTTP
            "jsonl",
            '{"text": "hi", "user": "a", "ref": "' + "r" * 3000 + '"}',
            "ref has 3,000 characters; at most 500",
        ),
    ],
)
def test_malformed_files_are_refused_before_anything_is_stored(
    tmp_path: Path, memory: Memory, fmt: str, content: str, message: str
) -> None:
    path = tmp_path / "chat.txt"
    path.write_text(content, encoding="utf-8")
    memory.add("already here", user="a", thread="t0")

    with pytest.raises(ImportFormatError, match=message):
        memory.add_many(read_file(path, fmt, "membot", None).lines)

    assert [line.text for line in memory.history(user="a")] == ["already here"]
    assert memory.store.count_lines() == 1


def test_an_unknown_format_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="unknown format 'csv'"):
        read_file(LOCOMO, "csv", "membot", None)
    with pytest.raises(ImportFormatError, match="no such file"):
        read_file(tmp_path / "missing.json", "locomo", "membot", None)


def test_a_bad_line_late_in_a_file_stores_nothing_of_the_file(tmp_path: Path, memory) -> None:
    good = [{"text": f"line number {n}", "user": "alice"} for n in range(300)]
    path = write_jsonl(tmp_path / "chat.jsonl", *good, {"text": "  ", "user": "alice"})

    with pytest.raises(ImportFormatError):
        memory.add_many(read_file(path, "jsonl", "membot", None).lines)  # what `import` does

    assert memory.store.count_lines() == 0


@pytest.mark.parametrize(
    ("fmt", "content"),
    [("locomo", "[]"), ("longmemeval", "[]"), ("jsonl", "\n\n")],
)
def test_a_file_without_lines_is_refused(tmp_path: Path, fmt: str, content: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ImportFormatError, match="holds no lines"):
        read_file(path, fmt, "membot", None)

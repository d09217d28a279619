"""Importers fed malformed files by Hypothesis: every bad file is refused with an
``ImportFormatError`` that names the file and the line (JSONL, and any file that is not
JSON or not UTF-8) or the element (LoCoMo, LongMemEval), before anything is stored; a file
that is read is stored whole."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membot import ImportFormatError, Memory
from membot.memory.importers import read_file

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
GOOD = {"text": "I run on Sundays", "user": "alice", "thread": "t1", "role": "human"}
# A field of a JSONL line set to something no store may take, with what the error says.
BAD_FIELDS = [
    ({"text": ""}, "text is empty"),
    ({"text": 7}, "not a string"),
    ({"text": "a\u0000b"}, "NUL"),
    ({"text": "a\ud800b"}, "not valid Unicode"),
    ({"role": "robot"}, "robot"),
    ({"user": 5}, "user name"),
    ({"user": ["a"]}, "user name"),
    ({"thread": "t\u0000"}, "NUL"),
    ({"bot": {"name": "b"}}, "bot name"),
    ({"speaker": {"a": 1}}, "speaker is text"),
    ({"created_at": "next week"}, "unknown date"),
    ({"created_at": 12}, "unknown date"),
]
BAD_LINES = [
    (b'{"text": "unterminated', "not a valid line"),
    (b"[1, 2]", "a JSON object, not list"),
    (b'"just a string"', "a JSON object, not str"),
    (b"null", "a JSON object, not NoneType"),
    (b'{"text": "caf\xe9", "user": "a"}', "not UTF-8"),
    (b'{"text": "\\ud800", "user": "a"}', "not valid Unicode"),
    (b"\xff\xfe\x00", "not UTF-8"),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def refused_untouched(memory: Memory, path: Path, fmt: str) -> str:
    """Import ``path`` as the CLI does; it must be refused with the store as it was."""
    before = memory.count_lines()
    try:
        memory.add_many(read_file(path, fmt, "membot", None).lines, batch_size=2)
    except ImportFormatError as error:
        assert memory.count_lines() == before
        return str(error)
    raise AssertionError(f"{path} was imported")


@given(
    count=st.integers(1, 12),
    place=st.integers(0, 11),
    bad=st.sampled_from(BAD_FIELDS + BAD_LINES),
)
@FUZZ
def test_a_bad_jsonl_line_is_refused_by_file_and_line(
    memory: Memory, tmp_path: Path, count: int, place: int, bad: tuple
) -> None:
    memory.add("already here", user="alice", thread="t0")
    place = place % count
    data = [jsonl([dict(GOOD, text=f"line {n}")]) for n in range(count)]
    fault, said = bad
    data[place] = fault + b"\n" if isinstance(fault, bytes) else jsonl([dict(GOOD, **fault)])
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"".join(data))

    message = refused_untouched(memory, path, "jsonl")

    assert message.startswith(f"{path}:{place + 1}: "), message
    assert said in message


@given(cut=st.integers(1, 400))
@FUZZ
def test_a_truncated_json_file_is_refused_by_line(memory: Memory, tmp_path: Path, cut: int):
    text = json.dumps([LOCOMO_SAMPLE], indent=1).encode()
    path = tmp_path / "locomo.json"
    path.write_bytes(text[: cut % (len(text) - 1)])

    message = refused_untouched(memory, path, "locomo")

    assert re.match(rf"{re.escape(str(path))}:\d+: not JSON", message), message


LOCOMO_SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "hello Ben"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "hi Ann", "blip_caption": "a dog"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "back again"}],
    },
}
LONGMEMEVAL_QUESTION = {
    "question_id": "q1",
    "haystack_session_ids": ["s1", "s2"],
    "haystack_dates": ["2023/05/20 (Sat) 00:29", "2023/05/21 (Sun) 10:00"],
    "haystack_sessions": [
        [
            {"role": "user", "content": "I moved to Lisbon"},
            {"role": "assistant", "content": "Nice"},
        ],
        [{"role": "user", "content": "My cat is grey"}],
    ],
}


def containers(value, path=()):
    """Every (path, container) inside a JSON value, the value itself first."""
    if isinstance(value, dict | list):
        yield path, value
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in items:
            yield from containers(inner, (*path, key))


@st.composite
def mutated(draw, original: dict):
    """``original`` with one value replaced by any JSON value, or one key or item removed."""
    document = copy.deepcopy(original)
    _, target = draw(st.sampled_from(list(containers(document))))
    if not target:
        return document
    keys = list(target) if isinstance(target, dict) else list(range(len(target)))
    key = draw(st.sampled_from(keys))
    if draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(json_values)
    return document


@given(
    case=st.one_of(
        st.tuples(st.just("locomo"), mutated(LOCOMO_SAMPLE)),
        st.tuples(st.just("longmemeval"), mutated(LONGMEMEVAL_QUESTION)),
    )
)
@FUZZ
def test_a_mutated_dataset_file_is_stored_whole_or_refused_naming_the_file(
    make_memory, tmp_path: Path, case: tuple[str, dict]
) -> None:
    fmt, document = case
    path = tmp_path / f"{fmt}.json"
    path.write_text(json.dumps([document]), encoding="utf-8")
    memory = make_memory(path=tmp_path / f"{len(make_memory.opened)}.db")
    memory.add("already here", user="alice", thread="t0")
    try:
        plan = read_file(path, fmt, "membot", None)
    except ImportFormatError as error:
        assert str(error).startswith(str(path)), error
        assert memory.count_lines() == 1
        return
    assert memory.add_many(plan.lines, batch_size=2) == len(plan.lines)
    assert memory.count_lines() == 1 + len(plan.lines)

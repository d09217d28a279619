"""Chat exports fed malformed by Hypothesis: any field of a real-shaped conversation set to
any JSON value or taken out, or the file cut anywhere, is read without an exception other
than ``ImportFormatError`` (for a file that is not JSON); every line read is one a store
takes, and what is not read is named in the tally. The stream reader reads any JSON list as
``json.loads`` does, in any chunk size."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from export_files import chatgpt_lisbon, chatgpt_same_title, claude_export
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membot import ChatExport, ImportFormatError
from membot.line_checks import checked_line
from membot.memory.exports.json_array import JsonArrayReader

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def conversations(fmt: str) -> list[dict[str, Any]]:
    if fmt == "chatgpt":
        return [chatgpt_lisbon(), chatgpt_same_title()]
    short = claude_export()
    del short[0]["chat_messages"][2]  # the long paste: the fuzzing is about shapes
    return short


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``value`` (keys and indexes)."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += places(inner, (*path, index))
    return found


def changed(document: Any, path: tuple, new: Any, remove: bool) -> Any:
    document = copy.deepcopy(document)
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    if remove and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return document


def read_all(path: Path, fmt: str) -> tuple[list, ChatExport]:
    with ChatExport(path, fmt, bot="membot", user="ana") as export:
        return list(export.lines()), export


@FUZZ
@given(
    fmt=st.sampled_from(["chatgpt", "claude"]),
    choice=st.integers(min_value=0),
    new=json_values,
    remove=st.booleans(),
)
def test_any_field_set_to_anything_is_read_or_named(
    tmp_path: Path, fmt: str, choice: int, new: Any, remove: bool
) -> None:
    document = conversations(fmt)
    everywhere = places(document)
    document = changed(document, everywhere[choice % len(everywhere)], new, remove)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    lines, export = read_all(path, fmt)
    for line in lines:
        assert checked_line(line) == line  # what a store takes
        assert line.user == "ana" and line.bot == "membot" and line.source_key
    assert len({(line.thread, line.source_key) for line in lines}) == len(lines)
    tally = export.tally
    assert tally.lines == len(lines)
    assert tally.problem_count == len(tally.problems)  # named, all of them (fewer than 50)


@FUZZ
@given(fmt=st.sampled_from(["chatgpt", "claude"]), cut=st.floats(min_value=0, max_value=1))
def test_a_file_cut_anywhere_is_refused_with_where_or_read(
    tmp_path: Path, fmt: str, cut: float
) -> None:
    data = json.dumps(conversations(fmt), ensure_ascii=False).encode()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * cut)])
    try:
        lines, _ = read_all(path, fmt)
    except ImportFormatError as error:
        assert str(error).startswith(f"{path}")
    else:  # only a whole file reads to its end
        assert cut == 1 and lines


@FUZZ
@given(
    values=st.lists(json_values, max_size=6),
    chunk=st.integers(min_value=1, max_value=40),
    indent=st.sampled_from([None, 0, 2]),
)
def test_the_stream_reader_reads_what_json_loads_reads(
    tmp_path: Path, values: list[Any], chunk: int, indent: int | None
) -> None:
    data = json.dumps(values, indent=indent, ensure_ascii=False).encode()
    path = tmp_path / "list.json"
    path.write_bytes(data)
    with path.open("rb") as handle:
        assert list(JsonArrayReader(handle, "list.json", chunk_bytes=chunk)) == json.loads(data)

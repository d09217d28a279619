"""Readers that turn conversation files into lines for :meth:`Memory.add_many`.

- ``jsonl``: one JSON object per line: ``text`` and ``role`` (human/bot/tool/system), optional
  ``user``, ``thread``, ``bot``, ``speaker``, ``created_at`` (ISO 8601; UTC assumed if no zone).
- ``locomo``: LoCoMo conversations; each session becomes a thread ``<sample_id>/session_<n>``
  dated as the session, each turn a human line spoken by its speaker, ``ref`` = its dia_id.
  The person is ``--user`` or the conversation's first speaker.
- ``longmemeval``: LongMemEval questions; each haystack session becomes a thread named by its
  session id, dated as given; user turns are human lines, assistant turns bot lines, ``ref`` =
  ``<session_id>:<turn index>``. The person is ``--user`` or the question id, so haystacks of
  different questions stay apart.

A ``locomo`` or ``longmemeval`` file may be gzipped (a ``.json.gz``): it is read by its first
bytes, whatever its name.

Each line gets a ``source_key``: ``ref:`` and its ref when the format gives one (a ref names
one line: the same ref twice in a thread is one line, stored once, and with two different
texts the file is refused), else ``line:<n>:<hash>``, its place among its thread's lines in
the file and a hash of its text. An import run again, after it was stopped or when the file
has grown, adds only the lines whose key their thread does not hold.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from membot.errors import ConfigError, ImportFormatError
from membot.line_checks import checked_line, too_long_message
from membot.memory.facade import LineInput
from membot.model import Role, utc_now

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "locomo", "longmemeval")
GZIP_MAGIC = b"\x1f\x8b"
# Reads a benchmark file's items as lines: (path, items, bot, user, where it is reading).
ItemReader = Callable[[Path, list[Any], str, str | None, list[str]], Iterator[LineInput]]


@dataclass(frozen=True)
class ImportPlan:
    """The lines a file holds, read up front so a bad file fails before anything is stored;
    ``refused``: what is said of each line left out for being over the length limit
    (``MAX_LINE_CHARS``), naming it (the others are imported)."""

    lines: list[LineInput]
    threads: int
    refused: tuple[str, ...] = ()


def read_file(path: Path, fmt: str, bot: str, user: str | None) -> ImportPlan:
    """The lines of the file at ``path`` in format ``fmt``; ``ImportFormatError`` naming
    the place of the first bad one. A line over the length limit is no fault of the file:
    it is left out and named in ``refused`` (and logged), the rest imported."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise ImportFormatError(f"no such file: {path}")
    refused: list[str] = []
    if fmt == "jsonl":
        read = _jsonl(path, bot, user, refused)
    else:
        items, what = _BENCHMARK_READERS[fmt]
        read = _benchmark_file(path, bot, user, refused, items, what)
    lines = list(with_source_keys(path, read))
    for message in refused:
        log.warning("%s", message)
    if not lines:
        also = f" ({len(refused)} refused: {refused[0]})" if refused else ""
        raise ImportFormatError(f"{path} holds no lines to import as {fmt}{also}")
    threads = len({(line.user, line.thread) for line in lines})
    return ImportPlan(lines, threads, tuple(refused))


def with_source_keys(path: Path, lines: Iterable[LineInput]) -> Iterator[LineInput]:
    """The lines with their ``source_key`` (the module's docstring says which)."""
    places: Counter[tuple[str, str, str]] = Counter()
    ref_texts: dict[tuple[tuple[str, str, str], str], str] = {}
    for line in lines:
        thread = (line.bot, line.user, line.thread)
        places[thread] += 1
        if line.ref is None:
            digest = hashlib.sha256(line.text.encode("utf-8")).hexdigest()[:16]
            yield replace(line, source_key=f"line:{places[thread]}:{digest}")
            continue
        if ref_texts.setdefault((thread, line.ref), line.text) != line.text:
            raise ImportFormatError(
                f"{path}: ref {line.ref!r} names two different lines in thread "
                f"{line.thread!r}; a ref must name one line"
            )
        yield replace(line, source_key=f"ref:{line.ref}")


class _TooLong(Exception):
    """A line over the length limit: left out, the rest of the file read."""


def _jsonl(path: Path, bot: str, user: str | None, refused: list[str]) -> Iterator[LineInput]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:  # line by line, so a bad byte is reported with its line
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise ImportFormatError(
                    f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start})"
                ) from None
            if not text.strip():
                continue
            try:
                yield _jsonl_line(text, f"{path}:{number}", bot, user)
            except _TooLong as error:
                refused.append(f"{path}:{number}: {error}")


def _jsonl_line(text: str, where: str, bot: str, user: str | None) -> LineInput:
    try:
        record = json.loads(text)
        if not isinstance(record, dict):
            raise TypeError(f"a JSON object, not {type(record).__name__}")
        if not isinstance(record["text"], str) or not record["text"].strip():
            raise ValueError("text is empty or not a string")
        return _within_limit(
            LineInput(
                text=record["text"],
                user=record.get("user") or user or _missing("user"),
                thread=_thread_name(record.get("thread")),
                role=Role(record.get("role", "human")),
                bot=record.get("bot") or bot,
                created_at=_said_by_now(record["created_at"]) if "created_at" in record else None,
                speaker=record.get("speaker"),
                ref=_ref(record.get("ref")),
            )
        )
    except KeyError as error:  # its str() is the key's repr: say what is missing instead
        raise ImportFormatError(f"{where}: not a valid line: no {error.args[0]!r}") from error
    except (json.JSONDecodeError, ValueError, TypeError, ConfigError) as error:
        raise ImportFormatError(f"{where}: not a valid line: {error}") from error


def _thread_name(value: object) -> str:
    """A line's thread: its name, a number written as one (a session's id), else "imported"
    when left out; a list or an object is no name (it used to be stored as its repr)."""
    if value is None or value == "":
        return "imported"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("a line needs a thread name")
    return value


def _ref(value: object) -> str | None:
    """A line's ref: text, or a number written as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"a line's ref is text or a number, not {type(value).__name__}")


def _missing(field: str) -> str:
    raise ValueError(f"a line needs a {field} name (give it in the file or with --{field})")


def load_json(path: Path) -> Any:
    """The JSON document in ``path``, gzipped or not (read by its first bytes, so a
    ``.json.gz`` or a gzip file under any name is read); ``ImportFormatError`` saying where
    it is not UTF-8 JSON."""
    data = path.read_bytes()
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise ImportFormatError(f"{path}: not a whole gzip file ({error})") from None
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ImportFormatError(
            f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except json.JSONDecodeError as error:
        raise ImportFormatError(
            f"{path}:{error.lineno}: not JSON: {error.msg} (column {error.colno})"
        ) from None


def load_json_items(path: Path) -> list[Any]:
    """The JSON document in ``path`` as a list of items (LoCoMo's conversations, LongMemEval's
    questions): a list as it is, anything else as the one item of a list."""
    data = load_json(path)
    return data if isinstance(data, list) else [data]


def _within_limit(line: LineInput) -> LineInput:
    """``line`` checked as a store will check it; ``_TooLong`` past the length limit."""
    if (too_long := too_long_message(line)) is not None:
        raise _TooLong(too_long)
    return checked_line(line)


def _checked(
    lines: Iterator[LineInput], where: list[str], what: str, refused: list[str]
) -> Iterator[LineInput]:
    """``lines`` checked as a store will check them; an error names the file's element
    being read (``where``, kept up to date by the reader) instead of a JSON line number.
    A line over the length limit is left out and named in ``refused``."""
    try:
        for line in lines:
            try:
                yield _within_limit(line)
            except _TooLong as error:
                refused.append(f"{where[0]}: {error}")
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as error:
        raise ImportFormatError(f"{where[0]}: not {what}: {error}") from error


def _benchmark_file(
    path: Path, bot: str, user: str | None, refused: list[str], items: ItemReader, what: str
) -> Iterator[LineInput]:
    """The lines of a LoCoMo or LongMemEval file, its items read by ``items``, which keeps
    ``where`` at the place it reads: a bad item fails as not ``what``, naming that place."""
    where = [str(path)]
    lines = items(path, load_json_items(path), bot, user, where)
    yield from _checked(lines, where, what, refused)


def _locomo_samples(
    path: Path, samples: list[Any], bot: str, user: str | None, where: list[str]
) -> Iterator[LineInput]:
    for index, sample in enumerate(samples, start=1):
        where[0] = f"{path}: sample {index}"
        conversation = sample["conversation"]
        owner = user or conversation["speaker_a"]
        numbers = sorted(
            int(key.split("_")[1])
            for key in conversation
            if key.startswith("session_") and not key.endswith("date_time")
        )
        for number in numbers:
            where[0] = f"{path}: sample {index}, session_{number}"
            when = parse_time(conversation[f"session_{number}_date_time"])
            for place, turn in enumerate(conversation[f"session_{number}"], start=1):
                where[0] = f"{path}: sample {index}, session_{number}, turn {place}"
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [shares a photo: {turn['blip_caption']}]"
                thread = f"{sample['sample_id']}/session_{number}"
                yield LineInput(text, owner, thread, Role.HUMAN, bot, when, turn["speaker"],
                                turn["dia_id"])  # fmt: skip


def _longmemeval_questions(
    path: Path, questions: list[Any], bot: str, user: str | None, where: list[str]
) -> Iterator[LineInput]:
    for number, question in enumerate(questions, start=1):
        where[0] = f"{path}: question {number}"
        owner = user or question["question_id"]
        sessions = zip(
            question["haystack_session_ids"],
            question["haystack_dates"],
            question["haystack_sessions"],
            strict=True,
        )
        for session_id, date, turns in sessions:
            where[0] = f"{path}: question {number}, session {session_id!r}"
            when = parse_time(date)
            for index, turn in enumerate(turns):
                where[0] = f"{path}: question {number}, session {session_id!r}, turn {index + 1}"
                role = Role.HUMAN if turn["role"] == "user" else Role.BOT
                if not str(turn["content"]).strip():
                    continue
                yield LineInput(turn["content"], owner, str(session_id), role, bot, when,
                                None, f"{session_id}:{index}")  # fmt: skip


_BENCHMARK_READERS: dict[str, tuple[ItemReader, str]] = {
    "locomo": (_locomo_samples, "a LoCoMo conversation"),
    "longmemeval": (_longmemeval_questions, "a LongMemEval question"),
}

_TIME_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: "2023/05/20 (Sat) 00:29"
)


def _said_by_now(value: str) -> datetime:
    """A line's ``created_at``, which must not be past tomorrow (a clock a day off is
    forgiven): a line dated 9999-12-31 was kept, and its remembered points bore that date."""
    moment = parse_time(value)
    if moment > utc_now() + timedelta(days=1):
        raise ValueError(f"created_at {value!r} is in the future: a line is dated when it was said")
    return moment


def parse_time(value: str) -> datetime:
    """An ISO 8601, LoCoMo or LongMemEval date; times without a zone are taken as UTC."""
    text = str(value).strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        for pattern in _TIME_FORMATS:
            try:
                moment = datetime.strptime(text, pattern)
                break
            except ValueError:
                continue
        else:
            raise ValueError(f"unknown date format: {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

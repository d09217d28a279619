"""Opening a chat export (its ``conversations.json``, or the ``.zip`` as downloaded),
telling ChatGPT's from Claude's by its shape, and reading it as a stream of lines for
:meth:`Memory.add_many`.

Each conversation is one thread (``thread_name``: its title and the start of its id), each
line keyed by its message's id (``source_key`` ``ref:<id>``), so an import stopped and run
again, or a later export of the same account, stores only the lines not stored yet. A
malformed conversation or message is named in the tally and skipped; a file that is not
JSON is refused where it breaks (the conversations before it stay stored, and the run
again after a fix adds the rest).
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from itertools import chain
from pathlib import Path
from typing import IO, Any

from membot.errors import ConfigError, ImportFormatError
from membot.line_checks import MAX_REF_CHARS, check_name, checked_line
from membot.memory.exports.chatgpt import chatgpt_conversation, looks_like_chatgpt
from membot.memory.exports.claude import claude_conversation, looks_like_claude
from membot.memory.exports.conversation import (
    ExportedConversation,
    Malformed,
    Tally,
    label,
    thread_name,
)
from membot.memory.exports.json_array import JsonArrayReader
from membot.model import LineInput, utc_now

EXPORT_FORMATS = ("chatgpt", "claude")
EXPORT_NAMES = {"chatgpt": "a ChatGPT export", "claude": "a Claude export"}
ZIP_MAGIC = b"PK\x03\x04"
MEMBER = "conversations.json"
Reader = Callable[[Any, Tally], ExportedConversation]
_NONE = object()  # the first conversation of a file that holds none
READERS: dict[str, Reader] = {"chatgpt": chatgpt_conversation, "claude": claude_conversation}


def format_of(element: object) -> str | None:
    """``chatgpt`` or ``claude`` by the shape of a conversation; None if neither."""
    if looks_like_chatgpt(element):
        return "chatgpt"
    if looks_like_claude(element):
        return "claude"
    return None


def is_export(path: Path) -> bool:
    """Whether ``path`` may be a chat export rather than a JSONL file: a zip, or JSON opening
    with a list."""
    with path.open("rb") as handle:
        start = handle.read(64)
    return start.startswith(ZIP_MAGIC) or start.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")


class ChatExport:
    """An export opened for reading: ``format`` (given, or told from the first
    conversation's shape: ``detected``), ``lines()`` to read it, ``tally`` of what was read,
    and ``bytes_read`` of ``total_bytes`` for a progress bar. Close it, or use ``with``."""

    def __init__(self, path: Path, fmt: str | None, *, bot: str, user: str | None) -> None:
        if fmt is not None and fmt not in EXPORT_FORMATS:
            raise ImportFormatError(f"unknown export format {fmt!r}: {' or '.join(EXPORT_FORMATS)}")
        if not isinstance(user, str) or not user.strip():
            raise ConfigError(
                "an export holds one person's conversations: name the person (--user NAME)"
            )
        check_name(user, "user")  # once here, not as every line's problem
        check_name(bot, "bot")
        if not path.is_file():
            raise ImportFormatError(f"no such file: {path}")
        self.path, self.bot, self.user = path, bot, user
        self.tally = Tally()
        self._zip, stream, self.total_bytes, name = _opened(path)
        self._stream: IO[bytes] = stream
        self._reader = JsonArrayReader(stream, name)
        try:
            self._elements = iter(self._reader)
            self._first = next(self._elements, _NONE)
            self.format = self._format(fmt)
        except BaseException:
            self.close()
            raise
        self.detected = fmt is None

    @property
    def format_name(self) -> str:
        """What the file is, for a person: "a ChatGPT export"."""
        return EXPORT_NAMES[self.format]

    @property
    def bytes_read(self) -> int:
        return self._reader.bytes_read

    def _format(self, fmt: str | None) -> str:
        if self._first is _NONE:
            raise ImportFormatError(f"{self._reader.name} holds no conversations")
        shape = format_of(self._first)
        if fmt is None and shape is None:
            raise ImportFormatError(
                f"{self._reader.name}: its first conversation is neither a ChatGPT one "
                "('mapping') nor a Claude one ('chat_messages'): name the format with "
                f"--format ({', '.join(EXPORT_FORMATS)}, jsonl, locomo, longmemeval)"
            )
        if fmt is not None and shape is not None and shape != fmt:
            raise ImportFormatError(
                f"{self._reader.name} looks like {EXPORT_NAMES[shape]}, not "
                f"{EXPORT_NAMES[fmt]}: import it with --format {shape}"
            )
        return fmt or str(shape)

    def lines(self) -> Iterator[LineInput]:
        """The export's lines, conversation by conversation, read as they are needed."""
        elements = chain([self._first], self._elements)
        for number, raw in enumerate(elements, start=1):
            title = raw.get("title", raw.get("name")) if isinstance(raw, dict) else None
            where = label(number, title)
            self.tally.within = where
            try:
                conversation = READERS[self.format](raw, self.tally)
            except Malformed as error:
                self.tally.within = None
                self.tally.problem(where, f"skipped: {error}")
                continue
            self.tally.conversations += 1
            yield from self._conversation_lines(conversation)
            self.tally.within = None

    def _conversation_lines(self, conversation: ExportedConversation) -> Iterator[LineInput]:
        thread = thread_name(conversation.title, conversation.id)
        latest = utc_now() + timedelta(days=1)  # a clock a day off is forgiven
        refs: set[str] = set()
        for place, line in enumerate(conversation.lines, start=1):
            ref = line.ref if line.ref is None or len(line.ref) <= MAX_REF_CHARS else None
            key = f"ref:{ref}" if ref else _place_key(place, line.text)
            try:
                if ref in refs:
                    raise ConfigError(f"a second message with the id {ref!r}")
                if line.created_at > latest:
                    raise ConfigError(f"dated {line.created_at:%Y-%m-%d}, in the future")
                item = checked_line(LineInput(line.text, self.user, thread, line.role, self.bot,
                                              line.created_at, line.speaker, ref, key))  # fmt: skip
            except ConfigError as error:
                self.tally.problem(f"message {ref or place}", f"skipped: {error}")
                continue
            if ref:
                refs.add(ref)
            self.tally.lines += 1
            yield item

    def close(self) -> None:
        self._stream.close()
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> ChatExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _place_key(place: int, text: str) -> str:
    """The key of a line without an id, as the JSONL importer makes it: place and text."""
    return f"line:{place}:{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:16]}"


def _opened(path: Path) -> tuple[zipfile.ZipFile | None, IO[bytes], int, str]:
    """The stream of the conversations: the file, or its ``conversations.json`` when it is
    a zip; with its size and the name errors give it."""
    with path.open("rb") as handle:
        is_zip = handle.read(4) == ZIP_MAGIC
    if not is_zip:
        return None, path.open("rb"), path.stat().st_size, str(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise ImportFormatError(f"{path}: not a whole zip file ({error})") from None
    members = [info for info in archive.infolist() if Path(info.filename).name == MEMBER]
    if not members:
        archive.close()
        raise ImportFormatError(f"{path}: the zip holds no {MEMBER} (is it a chat export?)")
    member = min(members, key=lambda info: info.filename.count("/"))
    return archive, archive.open(member), member.file_size, f"{path}:{member.filename}"

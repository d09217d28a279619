"""The elements of a JSON array read one at a time from a byte stream, so that a file of
hundreds of megabytes (a chat export's ``conversations.json``) is never held whole.

The standard library's decoder is fed a text buffer that grows only while one element is
cut off by its end (doubling, so an element of n characters is decoded O(log n) times, not
O(n)); the characters before the element being read are dropped as it goes. Memory is the
buffer (1 MiB) and the largest element, decoded. No new dependency: ``ijson`` would do the
same with its C backend, but it is not installed here.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any, NoReturn

from membot.errors import ImportFormatError

CHUNK_BYTES = 1 << 20
SPACE = " \t\r\n"
# A JSONDecodeError this close to the buffer's end may mean only that the element goes on
# past it: a literal cut as "tr", an escape as "\u00", a number as "12".
CUT_MARGIN = 16


class JsonArrayReader:
    """``for element in JsonArrayReader(stream, name)`` yields the top-level array's
    elements in order. ``bytes_read`` says how far into the stream it has read (for a
    progress bar). A stream that is not UTF-8 JSON opening with ``[`` is ``ImportFormatError``
    naming ``name``, the element and the byte where it went wrong."""

    def __init__(self, stream: IO[bytes], name: str, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.name = name
        self.bytes_read = 0
        self._stream = stream
        self._chunk = chunk_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self._buffer = ""
        self._pos = 0
        self._eof = False
        self._index = 0

    def __iter__(self) -> Iterator[Any]:
        if self._next_char() == "\ufeff":  # a byte order mark, as some editors write
            self._pos += 1
        if self._next_char() != "[":
            raise ImportFormatError(
                f"{self.name}: not a list of conversations (a JSON array opening with '[')"
            )
        self._pos += 1
        while True:
            char = self._next_char()
            if char == "]":
                return
            if self._index:
                if char != ",":
                    self._fail("expected ',' or ']' after the element")
                self._pos += 1
            if self._next_char() == "":
                self._fail("the file ends inside the list (cut short?)")
            yield self._element()
            self._index += 1

    def _element(self) -> Any:
        while True:
            try:
                value, end = self._json.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as error:
                if self._eof or not self._maybe_cut(error):
                    self._fail(f"not JSON: {error.msg}", at=error.pos)
                self._fill(max(self._chunk, len(self._buffer) - self._pos))
                continue
            if end >= len(self._buffer) - CUT_MARGIN and not self._eof:
                self._fill(self._chunk)  # a number at the end may go on: decode it again
                continue
            self._pos = end
            return value

    def _maybe_cut(self, error: json.JSONDecodeError) -> bool:
        """Whether more of the file could mend ``error``: a string still open, or an error
        at the buffer's end."""
        return error.msg.startswith("Unterminated string") or (
            error.pos >= len(self._buffer) - CUT_MARGIN
        )

    def _next_char(self) -> str:
        """The next character that is not white space, not consumed; "" at the end."""
        while True:
            while self._pos < len(self._buffer) and self._buffer[self._pos] in SPACE:
                self._pos += 1
            if self._pos < len(self._buffer) or self._eof:
                return self._buffer[self._pos : self._pos + 1]
            self._fill(self._chunk)

    def _fill(self, size: int) -> None:
        """Read ``size`` more bytes, dropping what was consumed already."""
        if self._pos:
            self._buffer = self._buffer[self._pos :]
            self._pos = 0
        data = self._stream.read(size)
        self.bytes_read += len(data)
        try:
            self._buffer += self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as error:
            byte = self.bytes_read - len(data) + error.start
            raise ImportFormatError(
                f"{self.name}: not UTF-8 text ({error.reason} at byte {byte:,})"
            ) from None
        self._eof = not data

    def _fail(self, reason: str, at: int | None = None) -> NoReturn:
        where = f"element {self._index + 1} of the list"
        raise ImportFormatError(f"{self.name}: {where}: {reason} (near byte {self._near(at):,})")

    def _near(self, at: int | None) -> int:
        """About the byte where the buffer's position ``at`` lies (exact for ASCII)."""
        behind = len(self._buffer) - (self._pos if at is None else at)
        return max(self.bytes_read - behind, 0)

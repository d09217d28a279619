"""Reading the model's reply: JSON with the response and the ids of the hints it used.

membot asks for :data:`REPLY_SCHEMA` by constrained decoding where the model or endpoint can
be held to it, but an endpoint may refuse, a reply may be cut off at the token limit, and a
model asked in words may wrap the JSON in prose or a code fence, write plain text, or copy the
prompt's example. :func:`read_reply` reads all of these; it never returns a JSON fragment or
the prompt's example as the response: it returns an empty response with a note instead, and
the bot answers with its ``no_response``. A turn is never lost to a malformed reply.

Streaming: :class:`ResponseText` reads the JSON as it is written and gives the characters of
its ``response`` string as they come, so the person sees the reply grow, never the JSON
around it; :func:`relay_reply` passes them on and makes the stored reply exactly what was
shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from membot.turn.artefacts import ReplyContext, shown_part
from membot.turn.context import JSON_INSTRUCTIONS

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
# Keys of the reply asked for: text holding one of them in quotes is JSON, however broken.
_JSON_KEY = re.compile(r'"(?:response|citation_ids)"\s*:')

REPLY_SCHEMA: dict[str, Any] = {
    "title": "reply",
    "type": "object",
    "properties": {
        "response": {"type": "string"},
        "citation_ids": {"type": "array", "items": {"type": "string"}},
    },
    # Both required, no others: OpenAI's strict mode accepts nothing else, and "response"
    # first lets a stream show the reply before the ids.
    "required": ["response", "citation_ids"],
    "additionalProperties": False,
}


def reply_schema(citation_ids: Sequence[str] = ()) -> dict[str, Any]:
    """:data:`REPLY_SCHEMA` with the ids cited held to ``citation_ids``, the hints in the
    prompt: a model held to it cannot cite a hint it was not shown, nor copy an example
    from the prompt as an id (SmolLM2, held only to strings, cited no hint at all in 50
    LoCoMo turns; docs/performance.md)."""
    if not citation_ids:
        return REPLY_SCHEMA
    ids = {"type": "array", "items": {"type": "string", "enum": list(citation_ids)}}
    return {**REPLY_SCHEMA, "properties": {**REPLY_SCHEMA["properties"], "citation_ids": ids}}


@dataclass(frozen=True)
class Reply:
    response: str
    citation_ids: tuple[str, ...]
    note: str | None = None  # set when the reply was not the JSON asked for
    cited_by_words: bool = False  # the ids found by the reply's words, not named by the model


def instruction_examples(bot_name: str) -> tuple[str, ...]:
    """The example values in the prompt's JSON instruction ("what AI says", ...): a reply
    that is one of them copied the instruction instead of answering."""
    example = first_json_object(JSON_INSTRUCTIONS.format(BOT=bot_name)) or {}
    values = [example.get("response"), *(example.get("citation_ids") or [])]
    return tuple(value for value in values if isinstance(value, str))


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (bare, fenced, or inside prose), or None."""
    candidates = [match.group(1) for match in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in [i for i, char in enumerate(candidate) if char == "{"][:20]:
            try:
                value, _ = decoder.raw_decode(candidate[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def read_reply(text: str, known_ids: set[str] | None = None, examples: Sequence[str] = ()) -> Reply:
    """The response and cited ids in ``text``; ids not among ``known_ids`` are dropped (a
    model may invent them). A response that is one of the prompt's ``examples`` (see
    :func:`instruction_examples`) is left out, with a note."""
    text = text.strip()
    if not text:
        return Reply("", ())
    body = _unfenced(text)
    if body.startswith("{"):
        reply = _read_json_start(body, known_ids)
    else:
        data = first_json_object(text)
        reply = _from_data(data, known_ids) if data is not None else _read_plain(text)
    if reply.response and _is_example(reply.response, examples):
        return Reply("", (), "the reply repeated the prompt's example instead of answering")
    return reply


def _read_json_start(text: str, known_ids: set[str] | None) -> Reply:
    """A reply that opens a JSON object: whole, cut off at the token limit, or broken."""
    reader = ResponseText()
    streamed = reader.feed(text)
    try:
        data, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        data, end = reader.closed_object(), None
    if end is not None and isinstance(data, dict):
        return _from_data(data, known_ids)
    if reader.found:  # the response as far as it went: what a stream of it showed
        cited = _from_data(data, known_ids).citation_ids if isinstance(data, dict) else ()
        return Reply(
            streamed.strip(), cited, "the JSON reply was cut off or broken; kept its response text"
        )
    if isinstance(data, dict):
        return replace(_from_data(data, known_ids), note="the JSON reply was cut off")
    data = first_json_object(text)  # "{broken} {...}": a whole object further on
    if data is not None:
        return _from_data(data, known_ids)
    return Reply("", (), "the reply was a JSON fragment without response text; not shown")


def _unfenced(text: str) -> str:
    """``text`` without the code fence it opens with (```json ... ```), if any."""
    if not text.startswith("```"):
        return text
    _, _, inside = text.partition("\n")
    return inside.strip().removesuffix("```").strip()


def _read_plain(text: str) -> Reply:
    if _JSON_KEY.search(text):
        return Reply("", (), "the reply was broken JSON; not shown")
    return Reply(text, (), "the reply was not JSON; used as plain text, without citations")


def _from_data(data: dict[str, Any], known_ids: set[str] | None) -> Reply:
    response = next((data[key] for key in ("response", "reply", "answer") if key in data), None)
    if not isinstance(response, str):
        return Reply("", (), "the JSON reply had no 'response' text; not shown")
    if not response.strip():  # the model chose to say nothing: the bot's no_response answers
        return Reply("", ())
    raw_ids = data.get("citation_ids", data.get("citations", []))
    if not isinstance(raw_ids, list):
        raw_ids = [raw_ids] if isinstance(raw_ids, str | int) else []
    ids = [
        str(each).strip()
        for each in raw_ids
        if isinstance(each, str | int) and not isinstance(each, bool)
    ]
    cited = tuple(dict.fromkeys(i for i in ids if known_ids is None or i in known_ids))
    note = None
    if len(cited) < len(set(ids)):
        unknown = sorted(set(ids) - set(cited))
        note = f"left out citation ids that match no hint: {', '.join(unknown)}"
    return Reply(response.strip(), cited, note)


def _normalized(text: str) -> str:
    """Lowercase words without end punctuation or a plural s: "The citation ID of the hint
    you used." and "the citation IDs of the hints you used" read the same."""
    words = text.lower().strip(" \t\r\n\"'.!").split()
    return " ".join(word.removesuffix("s") if len(word) > 2 else word for word in words)


def _is_example(response: str, examples: Sequence[str]) -> bool:
    said = _normalized(response)
    for example in map(_normalized, examples):
        # A short example ("what AI says") only when it is the whole reply; a long one
        # ("the citation IDs of the hints you used") wherever it appears.
        if said == example or (len(example.split()) >= 5 and example in said):
            return True
    return False


# -- streaming ----------------------------------------------------------------------------

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class ResponseText:
    """Reads a JSON object as it is written and gives the decoded characters of its top-level
    ``"response"`` string as they arrive, escapes (``\\n``, ``\\"``, ``\\uXXXX``, surrogate
    pairs) included, however the deltas split them.

    Text that does not open with ``{`` is not JSON: :attr:`not_json` is set and nothing is
    given. The object's end, or the end of the response string, ends what is given.
    """

    def __init__(self, key: str = "response") -> None:
        self.key = key
        self.not_json = False
        self.found = False  # the response string has started
        self._open: list[str] = []  # the containers open, outermost first
        self._closed = False
        self._seen = 0  # characters read, to close a cut-off object
        self._text: list[str] = []
        self._in_string: str | None = None  # "key", "response" or "other"
        self._escape: str | None = None  # "" after a backslash, then "u" and hex digits
        self._high_surrogate: int | None = None
        self._key_chars: list[str] = []
        self._expect_key = False
        self._last_key: str | None = None

    def feed(self, delta: str) -> str:
        """The response characters that ``delta`` completes."""
        self._text.append(delta)
        return "".join(self._step(char) for char in delta)

    def closed_object(self) -> Any:
        """The object read so far with its open string and containers closed (a reply cut
        off at the token limit), or None when even that is not JSON."""
        text = "".join(self._text).strip()
        if self._in_string is not None:
            if self._escape is not None:
                text = text[: len(text) - len(self._escape) - 1]
            text += '"'
        text = text.rstrip().removesuffix(",")
        if text.endswith(":"):
            text += "null"
        text += "".join("}" if opener == "{" else "]" for opener in reversed(self._open))
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None

    def _step(self, char: str) -> str:
        if self._closed or self.not_json:
            return ""
        if self._in_string is not None:
            return self._string_char(char)
        if not self._open:
            if char == "{":
                self._open.append(char)
                self._expect_key = True
            elif not char.isspace():
                self.not_json = True
            return ""
        self._structure_char(char)
        return ""

    def _structure_char(self, char: str) -> None:
        top_level = len(self._open) == 1
        if char == '"':
            if top_level and self._expect_key:
                self._in_string, self._key_chars = "key", []
            elif top_level and self._last_key == self.key and not self.found:
                self._in_string, self.found = "response", True
            else:
                self._in_string = "other"
        elif char in "{[":
            self._open.append(char)
        elif char in "}]":
            self._open.pop()
            self._closed = not self._open
        elif char == "," and top_level:
            self._expect_key, self._last_key = True, None

    def _string_char(self, char: str) -> str:
        if self._escape is not None:
            return self._escaped_char(self._escape, char)
        if char == "\\":
            self._escape = ""
            return ""
        if char == '"':
            pending = self._decoded("")
            if self._in_string == "key":
                self._expect_key, self._last_key = False, "".join(self._key_chars)
            self._in_string = None
            return pending
        return self._decoded(char)

    def _escaped_char(self, escape: str, char: str) -> str:
        """The decoded text for ``char`` of an escape begun with ``escape`` (what follows
        the backslash so far)."""
        if escape == "" and char != "u":
            self._escape = None
            return self._decoded(_ESCAPES.get(char, char))
        self._escape = escape = escape + char
        if len(escape) < 5:  # "u" and four hex digits
            return ""
        digits, self._escape = escape[1:], None
        try:
            code = int(digits, 16)
        except ValueError:
            return self._decoded("\ufffd")
        if 0xDC00 <= code < 0xE000 and self._high_surrogate is not None:
            pair = 0x10000 + ((self._high_surrogate - 0xD800) << 10) + (code - 0xDC00)
            self._high_surrogate = None
            return self._decoded(chr(pair))
        pending = self._decoded("")
        if 0xD800 <= code < 0xDC00:  # wait for its low half
            self._high_surrogate = code
            return pending
        return pending + self._decoded(chr(code))

    def _decoded(self, text: str) -> str:
        """``text`` as the string's next characters; a high surrogate still waiting for its
        low half goes first, alone, as ``json.loads`` reads it."""
        if self._high_surrogate is not None:
            text, self._high_surrogate = chr(self._high_surrogate) + text, None
        if self._in_string == "key":
            self._key_chars.append(text)
            return ""
        return text if self._in_string == "response" else ""


class ShownText:
    """The part of a growing response that may be shown: leading and trailing whitespace
    held back (the stored reply is stripped), all of it held back while it could still
    turn out to be one of the prompt's examples, and the artefacts of
    :mod:`membot.turn.artefacts` left out as the stored reply leaves them out (what could
    still become one is held back)."""

    def __init__(self, examples: Sequence[str] = (), artefacts: ReplyContext | None = None) -> None:
        self._examples = [_normalized(example) for example in examples]
        self._artefacts = artefacts or ReplyContext((), ())
        self._decoded: list[str] = []
        self.text = ""  # what has been shown

    def feed(self, text: str) -> str:
        if not text:
            return ""
        self._decoded.append(text)
        candidate = shown_part("".join(self._decoded), self._artefacts)
        if candidate is None:
            return ""
        if not self.text and (
            not candidate
            or any(example.startswith(_normalized(candidate)) for example in self._examples)
        ):
            return ""
        if not candidate.startswith(self.text):  # held until it agrees again, if ever
            return ""
        piece = candidate[len(self.text) :]
        self.text = candidate
        return piece


def relay_reply(
    deltas: Iterable[str],
    on_text: Callable[[str], None],
    read: Callable[[str], Reply],
    *,
    json_wanted: bool,
    examples: Sequence[str] = (),
    artefacts: ReplyContext | None = None,
) -> Reply:
    """Pass the reply's text to ``on_text`` as ``deltas`` bring it, and return the reply
    ``read`` makes of the whole; its response is exactly what ``on_text`` was given.

    With ``json_wanted`` only the ``response`` string of a JSON reply is passed on; a reply
    that is not JSON is held until it is read whole. Whatever reading adds at the end (the
    bot's ``no_response``, a held-back reply) is passed on last.
    """
    reader = ResponseText() if json_wanted else None
    shown = ShownText(examples, artefacts)
    raw: list[str] = []
    for delta in deltas:
        raw.append(delta)
        piece = shown.feed(reader.feed(delta) if reader else delta)
        if piece:
            on_text(piece)
    reply = read("".join(raw))
    if not reply.response.startswith(shown.text):
        # Reading the whole disagrees with what was shown (a repeated "response" key): what
        # the person saw stands.
        return replace(
            reply,
            response=shown.text,
            note="the stored reply is the text shown "
            "while streaming; reading the whole reply gave another",
        )
    rest = reply.response[len(shown.text) :]
    if rest:
        on_text(rest)
    return reply

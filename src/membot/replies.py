"""Reading the model's reply: JSON with the response and the ids of the hints it used.

membot asks for :data:`REPLY_SCHEMA` by constrained decoding where it can. Models asked for
JSON in words do not always give it: some wrap it in prose or a code fence, tiny ones
write plain text or broken JSON. :func:`read_reply` takes the first JSON object it can find;
without one the whole text is the response, with no citations, and a note says why. A turn is
never lost to a malformed reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


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


@dataclass(frozen=True)
class Reply:
    response: str
    citation_ids: tuple[str, ...]
    note: str | None = None  # set when the reply was not the JSON asked for


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


def read_reply(text: str, known_ids: set[str] | None = None) -> Reply:
    """The response and cited ids in ``text``; ids not among ``known_ids`` are dropped (a
    model may invent them)."""
    text = text.strip()
    data = first_json_object(text)
    if data is None:
        note = "the reply was not JSON; used as plain text, without citations" if text else None
        return Reply(text, (), note)
    response = next((data[key] for key in ("response", "reply", "answer") if key in data), None)
    if not isinstance(response, str):
        return Reply(text, (), "the JSON reply had no 'response' text; used the raw reply")
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

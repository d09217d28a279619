"""Untrusted text enters a prompt as quoted data, never as instructions.

Recalled lines, remembered summaries, document passages, tool results and a thread's running
summary were written by people, programs and models membot does not vouch for; any of them
may say "ignore previous instructions". Each enters the prompt inside a delimited block,

    <memory citation_id="h12">
    [2024-05-01 12:00 UTC, thread "t1"]
    HUMAN: I fly to Lisbon tomorrow.
    </memory>

whose tag names what it is (``memory``, ``document``, ``summary``, ``tool_result``, ...), and
the default templates tell the model that what is quoted is data, not instructions. Nothing
inside a block can end it or open another: :func:`escape` writes as ``&lt;`` the ``<`` (or
any character that looks like one: fullwidth ``＜``, ``〈``, ``‹``, ...) that starts one of
these tags, or a model's own markers (``<|im_start|>``, ``<s>``, ``<start_of_turn>``,
``<<SYS>>``), and drops the invisible Unicode tag characters that can smuggle text a reader
cannot see. Every other character reaches the model as it was written: "x < y", "a -> b" and
``<div>`` stay as they are (writing every ``<`` as ``&lt;`` made models repeat the entities,
and talk about code came back garbled). In transcript form (``Speaker: text``) each line's
text is written on one line (:func:`one_line`), so a line holding "\\nAI: sure, I will" cannot
pass for a line the bot said.

A model may still follow what it reads (docs/security.md): quoting keeps the structure of the
prompt honest, it does not make a model obedient.
"""

from __future__ import annotations

import re

# Characters that read as "<" or ">" to a person or a model: ASCII, fullwidth, small forms,
# angle brackets and quotation marks, modifier letters, Canadian syllabics, ornaments.
_LESS_THAN = "<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u02c2\u276e\u276c\u1438"
_GREATER_THAN = ">\uff1e\ufe65\u203a\u232a\u3009\u27e9\u02c3\u276f\u276d\u1433"
_ANGLES = str.maketrans(
    {**dict.fromkeys(_LESS_THAN, "&lt;"), **dict.fromkeys(_GREATER_THAN, "&gt;")}
)
# Invisible characters: Unicode tags (U+E0000-E007F, "ASCII smuggling") and the bidi controls
# that reorder what is shown; neither carries meaning a memory needs.
_INVISIBLE = re.compile("[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"\s*(?:\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])\s*")
_ATTRIBUTE = re.compile(r"^[a-z_]+$")

# The tags membot quotes with (tests check that nothing else in a prompt looks like one).
TAGS = ("memory", "document", "summary", "tool_result", "policy", "notes", "transcript", "point")
# Spaces and invisible formatting a reader skips between "<" and a tag's name.
_GAP = "[\\s\u200b-\u200f\u2060\ufeff]*"
# A "<" (or a look-alike) that starts one of membot's tags, opening or closing, or a marker
# that chat templates give a meaning: <|im_start|>, <s>, </s>, <start_of_turn>, <<SYS>>.
_OPENS_A_DELIMITER = re.compile(
    f"[{_LESS_THAN}](?={_GAP}/?{_GAP}(?:{'|'.join(TAGS)})(?![a-z_])"
    f"|{_GAP}[|\uff5c]|/?s{_GAP}[{_GREATER_THAN}]|/?(?:start|end)_of_turn|[{_LESS_THAN}]?/?SYS)",
    re.IGNORECASE,
)


def escape(text: str) -> str:
    """``text`` with nothing in it that could pass for a block's delimiter or a chat
    template's marker; every other character as it was."""
    return _OPENS_A_DELIMITER.sub("&lt;", _INVISIBLE.sub("", text))


def escape_attribute(value: str) -> str:
    """An attribute's value (membot's own ids and kinds) with no angle and no quote at all."""
    return _INVISIBLE.sub("", value).translate(_ANGLES).replace('"', "&quot;")


def one_line(text: str) -> str:
    """``text`` on one line: line breaks become " / ", so no line of it can start a line of
    a transcript."""
    return _LINE_BREAKS.sub(" / ", text.strip())


def quote(tag: str, text: str, *, inline: bool = False, **attributes: str) -> str:
    """``text``, escaped, between ``<tag ...>`` and ``</tag>``. Attribute values are membot's
    own (ids, kinds); they are escaped all the same, quotes included."""
    if tag not in TAGS:
        raise ValueError(f"unknown quoting tag {tag!r}")
    parts = [tag]
    for name, value in attributes.items():
        assert _ATTRIBUTE.match(name), name
        parts.append(f'{name}="{escape_attribute(one_line(value))}"')
    body = escape(one_line(text) if inline else text.strip("\n"))
    separator = "" if inline else "\n"
    return f"<{' '.join(parts)}>{separator}{body}{separator}</{tag}>"

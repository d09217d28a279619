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
inside a block can end it or open another: :func:`escape` writes every ``<`` and ``>`` in the
quoted text, and every character that looks like one (fullwidth ``＜``, ``〈``, ``‹``, ...),
as ``&lt;`` and ``&gt;``, and drops the invisible Unicode tag characters that can smuggle
text a reader cannot see. In transcript form (``Speaker: text``) each line's text is written
on one line (:func:`one_line`), so a line holding "\\nAI: sure, I will" cannot pass for a line
the bot said.

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


def escape(text: str) -> str:
    """``text`` with nothing in it that could pass for a block's delimiter."""
    return _INVISIBLE.sub("", text).translate(_ANGLES)


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
        parts.append(f'{name}="{escape(one_line(value)).replace(chr(34), "&quot;")}"')
    body = escape(one_line(text) if inline else text.strip("\n"))
    separator = "" if inline else "\n"
    return f"<{' '.join(parts)}>{separator}{body}{separator}</{tag}>"

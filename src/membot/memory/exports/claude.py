"""A conversation of a claude.ai data export (``conversations.json``) as lines.

A conversation is ``chat_messages`` in order, each with its ``sender`` (``human``: the
person's line; ``assistant``: the bot's), its ``created_at`` and its text: the ``content``
blocks when there are some, else ``text``. Of the blocks, text is kept; a ``tool_use`` is
the bot's line opening with ``[call to NAME]`` and a ``tool_result`` a tool line spoken by
``TOOL NAME``, each a line of its own; ``thinking`` (the model's reasoning) is skipped;
an image is named ``[image]``. A file the person attached is named (``[file: notes.txt]``),
followed by the text claude.ai extracted from it (a long paste arrives as such a file).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from membot.memory.exports.conversation import (
    ExportedConversation,
    ExportedLine,
    Malformed,
    Tally,
    conversation_id_of,
    file_names,
    iso_time,
    object_of,
    text_of,
    title_or_untitled,
)
from membot.model import Role

SENDERS = {"human": Role.HUMAN, "assistant": Role.BOT}
TOOL_BLOCKS = ("tool_use", "tool_result")


def looks_like_claude(element: object) -> bool:
    return isinstance(element, dict) and "chat_messages" in element


def claude_conversation(raw: Any, tally: Tally) -> ExportedConversation:
    """The conversation ``raw`` as lines; ``Malformed`` if it cannot be read at all. A
    malformed message is named in ``tally`` and skipped."""
    raw = object_of(raw, "a conversation")
    conversation_id = conversation_id_of(raw.get("uuid"), "uuid")
    messages = raw.get("chat_messages")
    if not isinstance(messages, list):
        raise Malformed("chat_messages is not a list")
    started = iso_time(raw.get("created_at"), "created_at")
    lines: list[ExportedLine] = []
    for number, message in enumerate(messages, start=1):
        uuid = message.get("uuid") if isinstance(message, dict) else None
        try:
            lines.extend(_message_lines(message, started, tally))
        except Malformed as error:
            tally.problem(f"message {uuid if isinstance(uuid, str) else number}", error)
    return ExportedConversation(conversation_id, title_or_untitled(raw.get("name")), lines)


def _message_lines(message: object, started: datetime | None, tally: Tally) -> list[ExportedLine]:
    message = object_of(message, "a message")
    role = SENDERS.get(message.get("sender"))  # type: ignore[arg-type]
    if role is None:
        raise Malformed(f"unknown sender {message.get('sender')!r}: human or assistant")
    when = iso_time(message.get("created_at"), "created_at") or started
    if when is None:
        raise Malformed("no created_at, and its conversation has none")
    content = message.get("content")
    if isinstance(content, list) and content:
        pieces = _block_pieces(content, role, tally)
    else:
        pieces = [(role, None, text_of(message.get("text"), "text"))]
    pieces = _with_files(pieces, role, message)
    uuid = message.get("uuid")
    ref = uuid if isinstance(uuid, str) and uuid else None
    lines = []
    for number, (who, speaker, text) in enumerate(p for p in pieces if p[2].strip()):
        each_ref = ref if ref is None or number == 0 else f"{ref}#{number + 1}"
        lines.append(ExportedLine(each_ref, who, text, when, speaker))
    if not lines:
        tally.skip("empty messages")
    return lines


Piece = tuple[Role, str | None, str]


def _block_pieces(blocks: list[Any], role: Role, tally: Tally) -> list[Piece]:
    """The blocks as (role, speaker, text); consecutive text of the sender joins one line."""
    pieces: list[Piece] = []
    joins = False  # whether the last piece is the sender's own text, which the next may join
    for number, block in enumerate(blocks, start=1):
        if not isinstance(block, dict):
            raise Malformed(f"content block {number} is not an object")
        kind = block.get("type")
        if kind == "thinking":
            tally.skip("the model's reasoning")
            continue
        piece = _block_piece(block, kind, role)
        own = kind not in TOOL_BLOCKS
        if joins and own:
            pieces[-1] = (role, None, f"{pieces[-1][2]}\n\n{piece[2]}")
        else:
            pieces.append(piece)
        joins = own
    return pieces


def _block_piece(block: dict[str, Any], kind: object, role: Role) -> Piece:
    name = block.get("name") if isinstance(block.get("name"), str) else "tool"
    if kind == "text":
        return role, None, text_of(block.get("text"), "a text block's text")
    if kind == "tool_use":
        arguments = json.dumps(block.get("input"), ensure_ascii=False)
        return Role.BOT, None, f"[call to {name}]\n{arguments}"
    if kind == "tool_result":
        return Role.TOOL, f"TOOL {name}", _result_text(block.get("content"))
    if kind == "image":
        return role, None, "[image]"
    if isinstance(block.get("text"), str):
        return role, None, str(block["text"])
    return role, None, f"[{kind}]" if isinstance(kind, str) else "[block]"


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return "\n\n".join(text for text in texts if isinstance(text, str))
    return ""


def _with_files(pieces: list[Piece], role: Role, message: dict[str, Any]) -> list[Piece]:
    """The files attached to the message, named after its text (with the text claude.ai
    extracted from them): on the sender's first line, or a line of their own."""
    named = []
    attachments = message.get("attachments")
    for attachment in attachments if isinstance(attachments, list) else []:
        if not isinstance(attachment, dict):
            raise Malformed("an attachment is not an object")
        name = attachment.get("file_name")
        header = f"[file: {name}]" if isinstance(name, str) and name else "[file]"
        extracted = attachment.get("extracted_content")
        named.append(f"{header}\n{extracted}" if isinstance(extracted, str) else header)
    named += file_names(message.get("files"))
    if not named:
        return pieces
    for place, (who, speaker, text) in enumerate(pieces):
        if (who, speaker) == (role, None):
            pieces[place] = (who, None, "\n\n".join(filter(None, [text, *named])))
            return pieces
    return [(role, None, "\n\n".join(named)), *pieces]

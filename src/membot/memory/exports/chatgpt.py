"""A conversation of a ChatGPT data export (``conversations.json``) as lines.

A conversation holds its messages as a tree, ``mapping`` (node id -> ``{message, parent,
children}``): an edited question or a regenerated answer starts a branch. What the person
saw last is the path from ``current_node`` up to the root; the abandoned branches are not
stored (the tally counts them). On that path:

- ``user`` messages are the person's lines, ``assistant`` messages the bot's; an assistant
  message to a tool (``recipient`` other than ``all``: code for ``python``, a search for
  ``browser``) is the bot's line opening with ``[call to python]``;
- ``tool`` messages (what a tool answered) are tool lines, spoken by ``TOOL <name>``, as a
  membot bot's own tool results are;
- ``system`` messages, custom instructions, hidden messages and the model's reasoning
  (``thoughts``) are skipped, as membot keeps no system lines;
- images, audio and files are named in a short placeholder (``[image]``,
  ``[file: plan.pdf]``): the export's JSON does not hold them.

A message without a time gets its conversation's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from membot.memory.exports.conversation import (
    ExportedConversation,
    ExportedLine,
    Malformed,
    Tally,
    conversation_id_of,
    epoch_time,
    file_names,
    object_of,
    text_of,
    title_or_untitled,
)
from membot.model import Role

SKIPPED_CONTENT = {
    "user_editable_context": "custom instructions",
    "model_editable_context": "the model's own notes",
    "thoughts": "the model's reasoning",
    "reasoning_recap": "the model's reasoning",
}
PART_PLACEHOLDERS = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio and video]",
    "video_container_asset_pointer": "[video]",
}


def looks_like_chatgpt(element: object) -> bool:
    return isinstance(element, dict) and "mapping" in element


def chatgpt_conversation(raw: Any, tally: Tally) -> ExportedConversation:
    """The conversation ``raw`` as lines; ``Malformed`` if it cannot be read at all. A
    malformed message is named in ``tally`` and skipped."""
    raw = object_of(raw, "a conversation")
    given_id = raw.get("conversation_id") or raw.get("id")
    conversation_id = conversation_id_of(given_id, "conversation_id")
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict):
        raise Malformed("no mapping (the conversation's messages)")
    title = raw.get("title")
    started = epoch_time(raw.get("create_time"), "create_time")
    path = current_path(mapping, raw.get("current_node"))
    everywhere = sum(1 for node in mapping.values() if _has_message(node))
    tally.skip("on abandoned branches", everywhere - sum(map(_has_message, path)))
    lines: list[ExportedLine] = []
    for node in path:
        message = node.get("message")
        if message is None:  # the root holds none
            continue
        where = f"message {node.get('id')}"
        try:
            lines.extend(_message_lines(message, node, started, tally))
        except Malformed as error:
            tally.problem(where, error)
    return ExportedConversation(conversation_id, title_or_untitled(title), lines)


def _has_message(node: object) -> bool:
    return isinstance(node, dict) and node.get("message") is not None


def current_path(mapping: dict[str, Any], current: object) -> list[dict[str, Any]]:
    """The nodes from the root down to ``current``: the conversation as last seen."""
    if not isinstance(current, str) or current not in mapping:
        raise Malformed(f"current_node {current!r} names no node of mapping")
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id: object = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise Malformed(f"parent {node_id!r} names no node of mapping")
        if node_id in seen:
            raise Malformed(f"mapping has a cycle through node {node_id!r}")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise Malformed(f"node {node_id!r} is not an object")
        path.append({**node, "id": node.get("id", node_id)})
        node_id = node.get("parent")
    path.reverse()
    return path


def _message_lines(
    message: object, node: dict[str, Any], started: datetime | None, tally: Tally
) -> list[ExportedLine]:
    message = object_of(message, "a message")
    author = message.get("author")
    if not isinstance(author, dict) or not isinstance(author.get("role"), str):
        raise Malformed("no author.role")
    role = author["role"]
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    content = message.get("content")
    if not isinstance(content, dict):
        raise Malformed("no content (an object)")
    kind = content.get("content_type")
    if role == "system" or metadata.get("is_visually_hidden_from_conversation"):
        tally.skip("system and hidden messages")
        return []
    if kind in SKIPPED_CONTENT:
        tally.skip(SKIPPED_CONTENT[kind])
        return []
    when = epoch_time(message.get("create_time"), "create_time") or started
    if when is None:
        raise Malformed("no create_time, and its conversation has none")
    files = file_names(metadata.get("attachments"))
    text = "\n\n".join(filter(None, [content_text(content), *files]))
    if not text.strip():
        tally.skip("empty messages")
        return []
    ref = message.get("id") or node.get("id")
    ref = ref if isinstance(ref, str) else None
    if role == "user":
        return [ExportedLine(ref, Role.HUMAN, text, when)]
    if role == "assistant":
        recipient = message.get("recipient")
        if isinstance(recipient, str) and recipient not in ("all", ""):
            text = f"[call to {recipient}]\n{text}"
        return [ExportedLine(ref, Role.BOT, text, when)]
    if role == "tool":
        name = author.get("name")
        speaker = f"TOOL {name}" if isinstance(name, str) and name.strip() else "TOOL tool"
        return [ExportedLine(ref, Role.TOOL, text, when, speaker)]
    raise Malformed(f"unknown author.role {role!r}")


def content_text(content: dict[str, Any]) -> str:
    """A message's text: its parts (text, and placeholders for the rest), or its ``text``
    (code, a tool's output, a quote), or a placeholder naming its kind."""
    kind = content.get("content_type")
    parts = content.get("parts")
    if parts is not None:
        if not isinstance(parts, list):
            raise Malformed(f"content.parts is not a list but {type(parts).__name__}")
        return "\n\n".join(filter(None, (_part_text(part, n) for n, part in enumerate(parts, 1))))
    if "text" in content:
        text = text_of(content["text"], "content.text")
        if kind == "tether_quote":
            source = content.get("title") or content.get("url") or content.get("domain")
            return f"[quote from {source}]\n{text}" if isinstance(source, str) else text
        return text
    for key in ("result", "summary"):  # tether_browsing_display: a page the model read
        if isinstance(content.get(key), str):
            return str(content[key])
    return f"[{kind}]" if isinstance(kind, str) else ""


def _part_text(part: object, number: int) -> str:
    if part is None:
        return ""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise Malformed(f"content part {number} is neither text nor an object")
    kind = part.get("content_type")
    if isinstance(part.get("text"), str):  # audio_transcription and its kin
        return str(part["text"])
    if kind in PART_PLACEHOLDERS:
        return PART_PLACEHOLDERS[kind]
    return f"[{kind}]" if isinstance(kind, str) else "[attachment]"

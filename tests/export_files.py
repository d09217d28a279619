"""Chat exports written by hand in the shape ChatGPT's and claude.ai's data exports have
(``conversations.json``: a list of conversations), with what real ones hold: edited and
regenerated branches, a tool call and its result, an image, a title with emoji, a hidden
system message, custom instructions, the model's reasoning, and a 60,000-character paste."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

# A long paste, as people paste logs or chapters: 60,000 characters, one message.
PARAGRAPH = (
    "Chapter notes, draft three. The lighthouse keeper counts the ships at dusk and writes "
    "each one down in the blue ledger, the one his mother left him. "
)
PASTE = (PARAGRAPH * (60_000 // len(PARAGRAPH) + 1))[:60_000]
LISBON = "Trip to Lisbon 🇵🇹✈️"
T0 = 1714557600.123  # 2024-05-01 10:00:00 UTC
CODE = (
    "stops = ['Martim Moniz', 'Graça', 'Alfama', 'Baixa', 'Estrela', 'Prazeres']\nprint(len(stops))"
)


def _node(node_id: str, parent: str | None, children: list[str], message: dict | None) -> dict:
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def _message(
    message_id: str,
    role: str,
    content: dict[str, Any],
    at: float | None,
    *,
    name: str | None = None,
    recipient: str = "all",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": message_id,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": metadata or {},
        "recipient": recipient,
        "channel": None,
    }


def _text(*parts: Any) -> dict[str, Any]:
    return {"content_type": "text", "parts": list(parts)}


def chatgpt_lisbon() -> dict[str, Any]:
    """Branches: the first answer regenerated (a1-old abandoned), the second question edited
    (u2-old abandoned); an image with its file; python called and answering."""
    hidden = {"is_visually_hidden_from_conversation": True}
    image = {
        "content_type": "image_asset_pointer",
        "asset_pointer": "file-service://file-Tram28",
        "size_bytes": 183_204,
        "width": 1024,
        "height": 768,
        "metadata": {"dalle": None},
    }
    photo = {
        "attachments": [{"id": "file-Tram28", "name": "tram28.jpg", "mime_type": "image/jpeg"}]
    }
    nodes = [
        _node("root", None, ["sys"], None),
        _node("sys", "root", ["u1"], _message("sys", "system", _text(""), None, metadata=hidden)),
        _node(
            "u1",
            "sys",
            ["a1-old", "a1"],
            _message("u1", "user", _text("I'm going to Lisbon in May with my sister Inês."), T0),
        ),
        _node(
            "a1-old",
            "u1",
            ["u2-old"],
            _message("a1-old", "assistant", _text("Lisbon in May is rainy."), T0 + 5),
        ),
        _node("u2-old", "a1-old", [], _message("u2-old", "user", _text("Never mind."), T0 + 9)),
        _node(
            "a1",
            "u1",
            ["think", "u2"],
            _message(
                "a1",
                "assistant",
                _text("May is a lovely month for Lisbon: warm, few crowds."),
                T0 + 6,
            ),
        ),
        _node("think", "a1", [], None),
        _node(
            "u2",
            "a1",
            ["a2-call"],
            _message(
                "u2",
                "user",
                {
                    "content_type": "multimodal_text",
                    "parts": [image, "Is this tram 28? How many stops does it have?"],
                },
                T0 + 60,
                metadata=photo,
            ),
        ),
        _node(
            "a2-call",
            "u2",
            ["t1"],
            _message(
                "a2-call",
                "assistant",
                {
                    "content_type": "code",
                    "language": "python",
                    "text": CODE,
                },
                T0 + 61,
                recipient="python",
            ),
        ),
        _node(
            "t1",
            "a2-call",
            ["r1"],
            _message(
                "t1",
                "tool",
                {
                    "content_type": "execution_output",
                    "text": "6",
                },
                T0 + 62,
                name="python",
            ),
        ),
        _node(
            "r1",
            "t1",
            ["a3"],
            _message(
                "r1",
                "assistant",
                {
                    "content_type": "thoughts",
                    "thoughts": [{"summary": "Counting", "content": "The list has six stops."}],
                },
                T0 + 63,
            ),
        ),
        _node(
            "a3",
            "r1",
            [],
            _message(
                "a3", "assistant", _text("Yes, that is tram 28. I count 6 main stops."), T0 + 64
            ),
        ),
    ]
    return _conversation("67a1c2f0-1111-4a4a-9b9b-0123456789ab", LISBON, nodes, "a3", T0)


def chatgpt_paste() -> dict[str, Any]:
    """A 60,000-character paste; the custom instructions, which are skipped; messages
    without a time, which take the conversation's."""
    context = {
        "content_type": "user_editable_context",
        "user_profile": "I write novels.",
        "user_instructions": "Be brief.",
    }
    nodes = [
        _node("root", None, ["ctx"], None),
        _node("ctx", "root", ["p1"], _message("ctx", "user", context, None)),
        _node("p1", "ctx", ["p2"], _message("p1", "user", _text(PASTE), None)),
        _node("p2", "p1", [], _message("p2", "assistant", _text("A moving draft."), None)),
    ]
    return _conversation(
        "9f3e0000-2222-4b4b-8c8c-abcdefabcdef", "New chat", nodes, "p2", T0 + 86_400
    )


def chatgpt_same_title() -> dict[str, Any]:
    """Another "New chat": a thread of its own."""
    nodes = [
        _node("root", None, ["q"], None),
        _node("q", "root", ["r"], _message("q", "user", _text("What is a ledger?"), T0 + 90_000)),
        _node("r", "q", [], _message("r", "assistant", _text("A book of accounts."), T0 + 90_005)),
    ]
    return _conversation(
        "0b0b0b0b-3333-4c4c-8d8d-111111111111", "New chat", nodes, "r", T0 + 90_000
    )


def _conversation(
    conversation_id: str, title: str, nodes: list[dict], current: str, at: float
) -> dict[str, Any]:
    return {
        "title": title,
        "create_time": at,
        "update_time": at + 100,
        "mapping": {node["id"]: node for node in nodes},
        "moderation_results": [],
        "current_node": current,
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "default_model_slug": "gpt-4o",
        "id": conversation_id,
    }


def chatgpt_export() -> list[dict[str, Any]]:
    return [chatgpt_lisbon(), chatgpt_paste(), chatgpt_same_title()]


# What the ChatGPT export above is stored as: (thread, role, speaker, text) in order.
CHATGPT_LINES = [
    (f"{LISBON} · 67a1c2f0", "human", None, "I'm going to Lisbon in May with my sister Inês."),
    (f"{LISBON} · 67a1c2f0", "bot", None, "May is a lovely month for Lisbon: warm, few crowds."),
    (
        f"{LISBON} · 67a1c2f0",
        "human",
        None,
        "[image]\n\nIs this tram 28? How many stops does it have?\n\n[file: tram28.jpg]",
    ),
    (
        f"{LISBON} · 67a1c2f0",
        "bot",
        None,
        f"[call to python]\n{CODE}",
    ),
    (f"{LISBON} · 67a1c2f0", "tool", "TOOL python", "6"),
    (f"{LISBON} · 67a1c2f0", "bot", None, "Yes, that is tram 28. I count 6 main stops."),
    ("New chat · 9f3e0000", "human", None, PASTE),
    ("New chat · 9f3e0000", "bot", None, "A moving draft."),
    ("New chat · 0b0b0b0b", "human", None, "What is a ledger?"),
    ("New chat · 0b0b0b0b", "bot", None, "A book of accounts."),
]


def _claude_message(uuid: str, sender: str, at: str, text: str = "", **more: Any) -> dict:
    content = more.pop("content", None)
    if content is None:
        content = [
            {
                "type": "text",
                "text": text,
                "start_timestamp": at,
                "stop_timestamp": at,
                "citations": [],
            }
        ]
    return {
        "uuid": uuid,
        "text": text,
        "content": content,
        "sender": sender,
        "created_at": at,
        "updated_at": at,
        "attachments": more.pop("attachments", []),
        "files": more.pop("files", []),
    }


def claude_export() -> list[dict[str, Any]]:
    search = [
        {"type": "thinking", "thinking": "They want a quick fact.", "summaries": []},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "name": "web_search", "input": {"query": "Tagus river length"}},
        {
            "type": "tool_result",
            "name": "web_search",
            "is_error": False,
            "content": [{"type": "text", "text": "The Tagus is 1,007 km long."}],
        },
        {"type": "text", "text": "The Tagus is about 1,007 km long."},
    ]
    paste = {
        "file_name": "paste.txt",
        "file_size": len(PASTE),
        "file_type": "txt",
        "extracted_content": PASTE,
    }
    return [
        {
            "uuid": "c1a0de00-aaaa-4000-8000-000000000001",
            "name": "Rivers 🌊 of Iberia",
            "created_at": "2024-06-02T09:00:00.000000Z",
            "updated_at": "2024-06-02T09:05:00.000000Z",
            "account": {"uuid": "acc-1"},
            "chat_messages": [
                _claude_message(
                    "m1", "human", "2024-06-02T09:00:00.000000Z", "How long is the Tagus?"
                ),
                _claude_message(
                    "m2",
                    "assistant",
                    "2024-06-02T09:00:05.000000Z",
                    "Let me check.",
                    content=search,
                ),
                _claude_message(
                    "m3",
                    "human",
                    "2024-06-02T09:03:00.000000Z",
                    "Here is my chapter, what do you think?",
                    attachments=[paste],
                ),
                _claude_message(
                    "m4",
                    "human",
                    "2024-06-02T09:04:00.000000Z",
                    "",
                    content=[{"type": "image", "file_uuid": "img-1"}],
                    files=[{"file_name": "river.png"}],
                ),
            ],
        },
        {
            "uuid": "c1a0de00-bbbb-4000-8000-000000000002",
            "name": "",
            "created_at": "2024-06-03T18:00:00+02:00",
            "updated_at": "2024-06-03T18:01:00+02:00",
            "account": {"uuid": "acc-1"},
            "chat_messages": [  # an older export: text only, no content blocks
                {
                    "uuid": "n1",
                    "text": "Remind me: my cat is called Pimenta.",
                    "sender": "human",
                    "created_at": "2024-06-03T18:00:00+02:00",
                    "attachments": [],
                    "files": [],
                },
                {
                    "uuid": "n2",
                    "text": "Noted: Pimenta.",
                    "sender": "assistant",
                    "created_at": "2024-06-03T18:00:04+02:00",
                    "attachments": [],
                    "files": [],
                },
            ],
        },
    ]


RIVERS = "Rivers 🌊 of Iberia · c1a0de00"
CLAUDE_LINES = [
    (RIVERS, "human", None, "How long is the Tagus?"),
    (RIVERS, "bot", None, "Let me check."),
    (RIVERS, "bot", None, '[call to web_search]\n{"query": "Tagus river length"}'),
    (RIVERS, "tool", "TOOL web_search", "The Tagus is 1,007 km long."),
    (RIVERS, "bot", None, "The Tagus is about 1,007 km long."),
    (
        RIVERS,
        "human",
        None,
        f"Here is my chapter, what do you think?\n\n[file: paste.txt]\n{PASTE}",
    ),
    (RIVERS, "human", None, "[image]\n\n[file: river.png]"),
    ("Untitled · c1a0de00", "human", None, "Remind me: my cat is called Pimenta."),
    ("Untitled · c1a0de00", "bot", None, "Noted: Pimenta."),
]


def write_json(path: Path, conversations: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(conversations, ensure_ascii=False), encoding="utf-8")
    return path


def write_zip(path: Path, conversations: list[dict[str, Any]]) -> Path:
    """The export as downloaded: a zip with conversations.json beside other files."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("user.json", json.dumps({"id": "user-1", "email": "a@example.org"}))
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations.json", json.dumps(conversations, ensure_ascii=False))
    return path

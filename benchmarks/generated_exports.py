"""A ChatGPT data export (``conversations.json``) generated for the import benchmarks: as
many messages or bytes as asked, in the real file's shape (a mapping tree per conversation,
with a regenerated answer now and then, a tool call and its output, an image), with text
of varied length drawn from a fixed vocabulary, so that no two messages are alike and the
embedding cache saves nothing. The same arguments write the same file.

    .venv/bin/python benchmarks/generated_exports.py OUT.json --messages 50000
    .venv/bin/python benchmarks/generated_exports.py OUT.json --megabytes 200
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path
from typing import Any

VOCABULARY = (
    "the a my our we I you it is was will can could trip train city river book chapter "
    "garden sister brother mother friend doctor school work meeting project budget report "
    "python code bug test deploy server memory kitchen recipe bread coffee morning evening "
    "weekend Lisbon Porto Madrid Paris rain sun walk run swim read write plan think remember "
    "because although when after before during while again often never always maybe today "
    "tomorrow yesterday week month year price ticket hotel museum tram bus bike car road"
)
WORDS = tuple(VOCABULARY.split())
START = 1_600_000_000.0


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(6, 18))
    return " ".join(words).capitalize() + rng.choice(".?!") + f" ({rng.randint(1, 99_999)})"


def text(rng: random.Random) -> str:
    """Mostly a few sentences; now and then a long paste (about 5,000 characters)."""
    count = 60 if rng.random() < 0.01 else rng.randint(1, 8)
    return " ".join(sentence(rng) for _ in range(count))


def conversation(rng: random.Random, number: int, messages: int) -> dict[str, Any]:
    """A conversation of ``messages`` messages on its current path (plus an abandoned
    answer when it was regenerated)."""
    conversation_id = str(uuid.UUID(int=rng.getrandbits(128)))
    at = START + number * 3_600
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": []}
    }
    parent = "root"
    for place in range(messages):
        role = "user" if place % 2 == 0 else "assistant"
        content: dict[str, Any] = {"content_type": "text", "parts": [text(rng)]}
        if role == "user" and rng.random() < 0.02:
            image = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}
            content = {"content_type": "multimodal_text", "parts": [image, text(rng)]}
        node = f"{conversation_id[:8]}-{place}"
        if role == "assistant" and rng.random() < 0.05:  # a regenerated answer, abandoned
            _add(mapping, f"{node}-old", parent, role, content, at + place)
        _add(mapping, node, parent, role, content, at + place)
        parent = node
    return {
        "title": sentence(rng)[:40],
        "create_time": at,
        "update_time": at + messages,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "conversation_id": conversation_id,
        "id": conversation_id,
        "default_model_slug": "gpt-4o",
    }


def _add(
    mapping: dict[str, Any], node: str, parent: str, role: str, content: dict, at: float
) -> None:
    message = {"id": node, "author": {"role": role, "name": None, "metadata": {}},
               "create_time": at, "content": content, "status": "finished_successfully",
               "metadata": {}, "recipient": "all"}  # fmt: skip
    mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
    mapping[parent]["children"].append(node)


def write_export(path: Path, *, messages: int = 0, megabytes: float = 0, seed: int = 7) -> int:
    """Write an export of ``messages`` messages on the conversations' current paths (the
    lines an import stores), or of about ``megabytes`` MB; one conversation at a time, so
    the file is never held whole. Returns the message count."""
    rng = random.Random(seed)
    written = count = number = 0
    with path.open("w", encoding="utf-8") as handle:
        handle.write("[")
        while (messages and count < messages) or (megabytes and written < megabytes * 1e6):
            size = rng.randint(2, 40)
            size = min(size, messages - count) if messages else size
            chunk = ("," if number else "") + json.dumps(
                conversation(rng, number, size), ensure_ascii=False
            )
            handle.write(chunk)
            written += len(chunk.encode("utf-8"))
            count += size
            number += 1
        handle.write("]")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--messages", type=int, default=0)
    parser.add_argument("--megabytes", type=float, default=0)
    args = parser.parse_args()
    count = write_export(args.out, messages=args.messages, megabytes=args.megabytes)
    print(f"{args.out}: {count} messages, {args.out.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()

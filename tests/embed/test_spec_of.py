"""From the embedder a store records back to the spec that makes it (``membot.embed.spec_of``):
what a Memory, the CLI and the server use when no embedder is named."""

from __future__ import annotations

import pytest

from membot.embed import spec_of


@pytest.mark.parametrize(
    ("recorded", "spec"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "minilm"),
        ("sentence-transformers/all-MiniLM-L6-v2@int8", "minilm-int8"),
        ("st:intfloat/e5-small-v2", "st:intfloat/e5-small-v2"),
        ("openai:text-embedding-3-small@api.openai.com", "openai:text-embedding-3-small"),
        ("openai:nomic@http://127.0.0.1:8080/v1", "openai:nomic@http://127.0.0.1:8080/v1"),
        ("hash-bow", None),  # a program's own embedder: it must be named
        ("st:", None),
        ("openai:@api.openai.com", None),
    ],
)
def test_a_recorded_embedder_names_its_spec(recorded: str, spec: str | None) -> None:
    assert spec_of(recorded) == spec

"""How the bundled SmolLM2 samples: no penalty on repeated tokens in a plain reply (its answer
is words of a memory), the penalty it was measured with when held to a grammar."""

from __future__ import annotations

from typing import Any

import pytest

from membot.llm import BundledSmolLM2
from membot.turn.relevance import VERDICT_SCHEMA

pytestmark = pytest.mark.slow


def test_a_plain_reply_repeats_freely_and_a_json_one_keeps_the_penalty() -> None:
    llm = BundledSmolLM2()
    model = llm._load()
    asked: list[dict[str, Any]] = []
    create = model.create_chat_completion

    def spied(**options: Any) -> Any:  # the real model, its options written down
        asked.append(options)
        return create(**options)

    model.create_chat_completion = spied  # type: ignore[method-assign]
    question = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
    assert llm.complete(question, 8).strip()
    assert llm.complete(question, 16, schema=VERDICT_SCHEMA).startswith("{")
    assert [options["repeat_penalty"] for options in asked] == [1.0, 1.2]
    assert {options["temperature"] for options in asked} == {0.2}

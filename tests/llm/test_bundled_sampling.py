"""How the bundled SmolLM2 samples: its instance settings are what llama.cpp is asked with (a
benchmark tries others on one loaded model), and by default repeated tokens are penalised."""

from __future__ import annotations

from typing import Any

import pytest

from membot.llm import BundledSmolLM2
from membot.turn.relevance import VERDICT_SCHEMA

pytestmark = pytest.mark.slow


def test_the_instances_sampling_settings_reach_the_model() -> None:
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
    llm.temperature, llm.repeat_penalty = 0.0, 1.0
    assert llm.complete(question, 16, schema=VERDICT_SCHEMA).startswith("{")
    sampled = [(options["temperature"], options["repeat_penalty"]) for options in asked]
    assert sampled == [(0.2, 1.2), (0.0, 1.0)]
    assert [options["logits_processor"] for options in asked] == [None, None]  # runs: off
    assert BundledSmolLM2().repeat_penalty == 1.2  # an instance's change stays its own


def test_a_seed_makes_the_draws_repeatable() -> None:
    """`membot eval --answers --seed N`: two fresh models seeded alike draw the same replies,
    one after another (each reply's seed follows the one before)."""
    question = [{"role": "user", "content": "Name a colour and a fruit."}]

    def replies(seed: int) -> list[str]:
        llm = BundledSmolLM2()
        llm.seed, llm.temperature = seed, 1.0  # a high temperature, so a draw shows
        return [llm.complete(question, 12) for _ in range(3)]

    first = replies(7)
    assert first == replies(7)
    assert any(first != replies(seed) for seed in (8, 9, 10))

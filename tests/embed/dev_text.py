"""Real dialog for the embedder's tests: LoCoMo's dialog lines and LongMemEval's turns, read
from the shared benchmark data (a test that needs them is skipped, saying why, without it)."""

from __future__ import annotations

import json

import pytest

from membot.errors import ConfigError
from membot.eval import shared_data_dir


def dialog_and_turns() -> tuple[list[str], list[str]]:
    """Every LoCoMo dev dialog line, and every LongMemEval dev haystack turn (its assistant
    turns run past the model's 256 tokens, so truncation is met)."""
    try:
        data = shared_data_dir()
    except ConfigError as missing:
        pytest.skip(f"the LoCoMo and LongMemEval files are needed: {missing}")
    conversations = json.loads((data / "locomo" / "locomo_dev.json").read_text())
    dialog = [
        turn["text"]
        for conversation in conversations
        for key, turns in conversation["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    ]
    questions = json.loads((data / "longmemeval" / "longmemeval_s_dev.json").read_text())
    turns = [
        turn["content"]
        for question in questions
        for session in question["haystack_sessions"]
        for turn in session
    ]
    return dialog, turns


def spread(texts: list[str], count: int) -> list[str]:
    """``count`` of ``texts``, taken evenly over the list."""
    return texts[:: len(texts) // count][:count]

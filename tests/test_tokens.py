"""The token counter: SmolLM2's own vocabulary, counted in one pass."""

from __future__ import annotations

import pytest

TEXTS = [
    "",
    "hello",
    "Café — naïve façade, 東京 and emoji 🙂🙂!",
    "line one\n\nline two\t\ttabbed   spaced",
    "x" * 5000,
    " ".join(f"word{n}" for n in range(3000)),
]


@pytest.mark.parametrize("text", TEXTS)
def test_counts_match_the_vocabulary_s_own_tokenizer(token_counter, text: str) -> None:
    own = token_counter._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    assert token_counter._ids(text) == own
    assert token_counter.count(text) == len(own)


def test_truncate_keeps_the_longest_prefix_that_fits(token_counter) -> None:
    text = " ".join(f"word{n}" for n in range(100))
    cut = token_counter.truncate(text, 20)
    assert text.startswith(cut) and token_counter.count(cut) <= 20
    assert token_counter.count(text[: len(cut) + 8]) > 20

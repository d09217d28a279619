"""A reply that cannot write a run of tokens twice (membot.llm.no_repeat): which tokens are
blocked, that the prompt's tokens never count, and the bundled model held to it."""

from __future__ import annotations

import numpy as np
import pytest

from membot.llm import BundledSmolLM2
from membot.llm.no_repeat import NoRepeatedRuns, repeated_run_ends


def test_the_token_that_would_end_a_repeated_run_is_blocked() -> None:
    assert repeated_run_ends([1, 2, 3, 1, 2], 3) == {3}  # "1 2 3" again
    assert repeated_run_ends([1, 2, 3, 1, 2], 4) == set()  # "3 1 2" was never followed
    assert repeated_run_ends([1, 2, 3, 4], 3) == set()  # nothing said twice
    assert repeated_run_ends([5, 5, 5], 2) == {5}  # a run overlapping itself
    assert repeated_run_ends([1, 2], 3) == set()  # shorter than a run


def test_single_words_stay_free() -> None:
    """A word (token) the reply needs twice is not blocked; only the run's end is."""
    assert repeated_run_ends([7, 1, 8, 9, 1], 3) == set()  # "1" again, after other tokens


def test_the_prompt_does_not_count() -> None:
    """The first call's tokens are the prompt's: a reply may quote its memories."""
    step = NoRepeatedRuns(3)
    scores = np.zeros(10, dtype=np.single)
    prompt = np.array([1, 2, 3, 1, 2], dtype=np.intc)
    assert np.isfinite(step(prompt, scores)).all()  # the prompt's own "1 2 3 1 2"
    reply = np.array([1, 2, 3, 1, 2, 4, 5, 6, 4, 5], dtype=np.intc)  # the reply: 4 5 6 4 5
    blocked = step(reply, scores)
    assert np.isneginf(blocked[6]) and np.isfinite(np.delete(blocked, 6)).all()
    assert np.isfinite(scores).all()  # the logits it was given are left as they were


def test_a_run_shorter_than_two_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match="2 tokens or more"):
        NoRepeatedRuns(1)


@pytest.mark.slow
def test_the_bundled_model_writes_no_run_twice() -> None:
    """Without a repeat penalty the bundled model writes a list that repeats itself; held to
    runs of 4 tokens, no run of 4 of its reply's tokens comes twice."""
    asked = [{"role": "user", "content": "Write a list of ten fruits, each one apple."}]

    def reply_tokens(runs: int | None) -> list[int]:
        llm = BundledSmolLM2()
        llm.repeat_penalty, llm.temperature, llm.seed = 1.0, 0.0, 3
        llm.no_repeat_tokens = runs
        text = llm.complete(asked, 64)
        return list(llm._load().tokenize(text.encode(), add_bos=False, special=False))

    def repeats(tokens: list[int]) -> bool:
        runs = [tuple(tokens[start : start + 4]) for start in range(len(tokens) - 3)]
        return len(runs) != len(set(runs))

    assert repeats(reply_tokens(None))
    assert not repeats(reply_tokens(4))

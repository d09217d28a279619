"""A reply that cannot write the same run of tokens twice: a logits step for llama.cpp.

llama.cpp's repeat penalty lowers every token the reply has drawn, one by one, so a sentence
that needs a word twice ("Nate's cat is Nate's favourite") is pushed off it as much as a loop
is. This step lowers nothing but the token that would end a run of ``size`` tokens the reply
has already written: a phrase may come back shorter than ``size`` tokens, a sentence may not.
It reads the reply's tokens only, never the prompt's (a reply may quote its memories).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


class NoRepeatedRuns:
    """The logits step for one reply: called by llama-cpp-python with every token evaluated
    so far (the prompt, then the reply) and the next token's logits. The first call's count
    is the prompt's length, so make one for each reply."""

    def __init__(self, size: int) -> None:
        if size < 2:
            raise ValueError("a repeated run is 2 tokens or more")
        self.size = size
        self.prompt_tokens: int | None = None

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        banned = repeated_run_ends(input_ids[self.prompt_tokens :].tolist(), self.size)
        if banned:
            scores = scores.copy()
            scores[list(banned)] = -np.inf
        return scores


def repeated_run_ends(reply: list[int], size: int) -> set[int]:
    """The tokens that, written next, would repeat a run of ``size`` tokens of ``reply``: each
    token that followed an earlier occurrence of the reply's last ``size - 1`` tokens."""
    if len(reply) < size:
        return set()
    tail = reply[len(reply) - size + 1 :]
    return {
        reply[start + size - 1]
        for start in range(len(reply) - size + 1)
        if reply[start : start + size - 1] == tail
    }

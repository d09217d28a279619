"""membot's WordPiece gives the bundled MiniLM the ids that ``tokenizers`` gives it.

``tokenizers`` left the core (its dependencies were 27 MB that membot never used); it stays
in the test environment through the ``st`` extra, and is the reference here: the same ids on
real dialog (truncated lines included), on hard hand-written cases, and on every code point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from dev_text import dialog_and_turns, spread

from membot.embed.onnx_minilm import bundled_minilm_path
from membot.embed.wordpiece import WordPieceTokenizer
from membot.turn.tokens import WordPieceTokenCounter

MAX_LENGTH = 256  # the model's sentence_bert_config.json

HARD_CASES = [
    "",
    "   ",
    "\x00",
    "hello",
    # accents, stripped after NFD (strip_accents follows lowercase)
    "Café naïve façade résumé, Ångström, Øresund, Łódź, Dvořák, Tiếng Việt có dấu",
    # combining marks, alone and stacked
    "e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d",
    "\u0301 leading mark, and a mark after a space \u0308",
    # CJK ideographs get spaces; kana and Hangul do not (Hangul decomposes to jamo)
    "東京で寿司を食べた 我爱北京天安门 한국어 텍스트 カタカナ",
    "\u2f00 \uf900 \U00020000 \U0002a6df",  # a Kangxi radical, compatibility ideographs
    # emoji, with skin tones and zero-width joiners (a format character: dropped)
    "🙂👍🏽 family 👨\u200d👩\u200d👧 ❤️ flag 🇫🇷",
    # control characters, U+FFFD and NUL dropped; tab, newline, CR are whitespace
    "a\x00b\x07c\x1bd\x7fe\ufffdf\x1cg\x1fh",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj\u00adsoft",
    "\t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000 spaces",
    # URLs, e-mail, code
    "https://example.com/path/to?q=1&r=two#frag and me@example.org",
    "C++ C# .NET node.js e.g. U.S.A. ~/.config/membot [x](y) {a: 1} <b>|</b> `q` ^$",
    # words at, past and far past max_input_chars_per_word (100)
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101 + " " + "x" * 5000,
    "supercalifragilisticexpialidocious" * 4,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    # numbers with punctuation
    "3.14159, 1,000,000, $12.50, 50%, 10:30pm, 2026-11-27, +44 (0)20 7946 0958, 1e-9, ½ ²",
    # Turkish dotted and dotless i, German sharp s
    "İstanbul ışık İİ ı I i İ̇ DİYARBAKIR",
    "Straße STRASSE ẞ groß Maß",
    # fullwidth letters and digits (no NFD decomposition: kept as they are)
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ １２３！？",
    # Greek final sigma: lowercased a character at a time
    "ΟΔΥΣΣΕΥΣ Σ σς ΣΑΣ",
    # right-to-left, with marks (Hebrew points are Mn), Devanagari (virama Mn, matras Mc)
    "مرحبا بالعالم שָׁלוֹם नमस्ते",
    # punctuation beyond ASCII
    "don't won't it's rock'n'roll — “quotes” «guillemets» ‘single’ … ¿qué? ¡sí! 。、・",
    "ﬁancé ﬀ ∑ x² ≤ ½ √2 ∞ ™ © ° № ℃",
    # the special tokens, matched in the raw text before normalizing
    "[CLS] [SEP] [MASK] [PAD] [UNK] [unk] [Cls] [CLS][SEP]x[MASK]y [[SEP]] [SEP",
    "\ue000 private use, \u0378 unassigned, \u061d and \u08d4 (Unicode 14 and 9)",
    # long lines, cut to 256 ids with [SEP] kept
    "word " * 400,
    "unaffable " * 200,
    "Ein sehr langer Satz über Straßen und Flüsse, " * 30,
]


@pytest.fixture(scope="module")
def reference():
    tokenizers = pytest.importorskip(
        "tokenizers", reason="the reference is tokenizers itself (membot[st] brings it)"
    )
    tokenizer = tokenizers.Tokenizer.from_file(str(bundled_minilm_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="module")
def wordpiece() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(bundled_minilm_path() / "tokenizer.json")


def _truncated(reference):
    """A copy of ``reference`` cut as the embedder cuts: 256 ids, [CLS] and [SEP] included."""
    from tokenizers import Tokenizer

    truncated = Tokenizer.from_str(reference.to_str())
    truncated.enable_truncation(MAX_LENGTH)
    return truncated


def real_lines() -> list[str]:
    """All of LoCoMo's dialog lines and 3,000 LongMemEval turns spread over the file (its
    assistant turns run past 256 tokens: truncation is checked)."""
    dialog, turns = dialog_and_turns()
    return dialog + spread(turns, 3000)


@pytest.mark.parametrize("text", HARD_CASES)
def test_hard_cases_give_the_ids_of_tokenizers(reference, wordpiece, text: str) -> None:
    expected = reference.encode(text, add_special_tokens=False)
    assert wordpiece.encode(text, add_special_tokens=False) == expected.ids
    assert wordpiece.token_ends(text) == [end for _, end in expected.offsets]
    cut = WordPieceTokenizer.from_file(bundled_minilm_path() / "tokenizer.json", MAX_LENGTH)
    assert cut.encode(text) == _truncated(reference).encode(text).ids


def test_real_dialog_gives_the_ids_of_tokenizers(reference) -> None:
    lines = real_lines()
    assert len(lines) >= 5000
    ours = WordPieceTokenizer.from_file(bundled_minilm_path() / "tokenizer.json", MAX_LENGTH)
    expected = [encoding.ids for encoding in _truncated(reference).encode_batch(lines)]
    assert sum(len(ids) == MAX_LENGTH for ids in expected) > 500  # many are cut
    different = [
        index for index, ids in enumerate(ours.encode_batch(lines)) if ids != expected[index]
    ]
    assert not different, f"{len(different)} lines differ, first {lines[different[0]][:200]!r}"


def test_the_token_counter_counts_and_cuts_as_tokenizers_did(reference) -> None:
    """turn/tokens.py's fallback counter: the counts and the cut points of tokenizers."""
    counter = WordPieceTokenCounter()
    for text in [*HARD_CASES, *real_lines()[::10]]:
        encoding = reference.encode(text, add_special_tokens=False)
        assert counter.count(text) == len(encoding.ids), text[:200]
        for limit in (0, 1, 7, 100):
            expected = text if len(encoding.ids) <= limit else ""
            if limit and len(encoding.ids) > limit:
                expected = text[: encoding.offsets[limit - 1][1]]
            assert counter.truncate(text, limit) == expected, (limit, text[:200])


@pytest.mark.slow
def test_every_code_point_gives_the_ids_of_tokenizers(reference, wordpiece) -> None:
    """Each character alone, twice and between letters: the Unicode tables (categories,
    lowercase, NFD) of tokenizers and of this Python agree, or the module says otherwise."""
    codes = [code for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    blocks = [codes[start : start + 256] for start in range(0, len(codes), 256)]
    texts = [
        " ".join(f"x{chr(code)}y {chr(code)}{chr(code)}" for code in block) for block in blocks
    ]
    expected = reference.encode_batch(texts, add_special_tokens=False)
    different = [
        f"U+{block[0]:04X}..U+{block[-1]:04X}"
        for block, text, encoding in zip(blocks, texts, expected, strict=True)
        if wordpiece.encode(text, add_special_tokens=False) != encoding.ids
    ]
    assert not different, f"{len(different)} blocks differ: {' '.join(different[:20])}"


def test_a_tokenizer_json_of_another_kind_is_refused(tmp_path: Path) -> None:
    config = json.loads((bundled_minilm_path() / "tokenizer.json").read_text())
    config["pre_tokenizer"] = {"type": "ByteLevel"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="pre-tokenizer is 'ByteLevel'"):
        WordPieceTokenizer.from_file(path)


def test_tokenizing_loads_neither_tokenizers_nor_huggingface_hub() -> None:
    """The core no longer installs them: neither the tokenizer nor the counter reaches for one."""
    code = (
        "import sys\n"
        "from membot.embed.onnx_minilm import bundled_minilm_path\n"
        "from membot.embed.wordpiece import WordPieceTokenizer\n"
        "from membot.turn.tokens import WordPieceTokenCounter\n"
        "path = bundled_minilm_path() / 'tokenizer.json'\n"
        "ids = WordPieceTokenizer.from_file(path).encode('hello there')\n"
        "assert ids == [101, 7592, 2045, 102], ids\n"
        "assert WordPieceTokenCounter().count('hello there') == 2\n"
        "print(sorted(name for name in ('tokenizers', 'huggingface_hub') if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"loaded: {done.stdout}"

"""BERT's WordPiece tokenizer, read from a model's own ``tokenizer.json``, without ``tokenizers``.

The bundled all-MiniLM-L6-v2 cuts text into ids with the pipeline its ``tokenizer.json``
declares, and this module runs that pipeline (and refuses any other, naming the part it lacks):

- ``BertNormalizer``: drop NUL, U+FFFD and control characters (Cc, Cf, Co and Cs, but tab,
  newline and carriage return; U+000B, U+000C and U+0085 too, though whitespace), whitespace
  to a space; a space each side of a CJK ideograph; accents stripped (NFD, then the Mn marks
  dropped) where ``strip_accents`` says so or, when it is null, where ``lowercase`` is on;
  then lowercase, character by character (a capital sigma is σ, never ς);
- ``BertPreTokenizer``: words split at whitespace, and each punctuation character (ASCII's 32
  symbols or Unicode's P* categories) a word of its own;
- ``WordPiece``: the longest vocabulary entry first, ``##`` before a piece inside a word,
  ``[UNK]`` for a word with no match or longer than ``max_input_chars_per_word``;
- the special tokens (``[CLS]``, ``[SEP]``, ...) matched in the raw text first, as
  ``tokenizers`` does; ``TemplateProcessing`` puts ``[CLS] $A [SEP]`` around a line, after the
  line is cut to the maximum length.

The ids are those of ``tokenizers`` itself on 5,760 LoCoMo and LongMemEval lines, on hard
hand-written cases and on every code point (tests/embed/test_wordpiece.py; where the Unicode
tables of tokenizers and of Python differ, the module keeps tokenizers' answer, see below).
membot's core no longer installs ``tokenizers``, whose own dependencies (huggingface_hub,
hf_xet, PyYAML, fsspec, filelock: 27 MB) membot never used. A word's ids are remembered:
dialog repeats its words, and 419 LoCoMo lines take 10 ms the first time, 2 ms after (33 ms
with tokenizers' ``encode_batch``), against 3 s for the model run (2 cores).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# Rust's char::is_whitespace (Unicode's White_Space), which BertNormalizer and
# BertPreTokenizer use; Python's str.isspace also holds U+001C..U+001F, which are controls.
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# The CJK ideograph blocks of BERT's original tokenizer, as tokenizers' BertNormalizer has them.
# tokenizers' "control" (unicode_categories' is_other): Cc, Cf, Co and Cs; not Cn, unassigned.
_CONTROL = frozenset(("Cc", "Cf", "Co", "Cs"))


def _code_points(ranges: str) -> frozenset[int]:
    """``"7fd 898-89f"``: U+07FD and U+0898 to U+089F."""
    points: set[int] = set()
    for item in ranges.split():
        low, _, high = item.partition("-")
        points.update(range(int(low, 16), int(high or low, 16) + 1))
    return frozenset(points)


# Where tokenizers' Unicode tables and Python 3.11's (Unicode 14.0) disagree, tokenizers'
# answer; tests/embed/test_wordpiece.py checks every code point. Its categories are Unicode
# 8.0's (the unicode_categories crate): marks, punctuation and format characters of scripts
# added since are letters to it. Its lowercase is Rust's (Unicode 16.0), its NFD leaves U+11938
# composed. All of them are characters of rare scripts; emoji and the rest agree.
_NOT_CONTROL = _code_points("890-891 8e2 110cd 13430-13438")
_MARKS = _code_points("1734")
_NOT_MARKS = _code_points(
    "7fd 898-89f 8ca-8e1 9fe afa-aff b55 c04 c3c d00 d3b-d3c d81 eba 180f 1885-1886 1abf-1ace "
    "1df6-1dfb a82c a8c5 a8ff a9bd 10d24-10d27 10eab-10eac 10f46-10f50 10f82-10f85 11070 "
    "11073-11074 110c2 111c9 111cf 1123e 1133b 11438-1143f 11442-11444 11446 1145e "
    "1182f-11837 11839-1183a 1193b-1193c 1193e 11943 119d4-119d7 119da-119db 119e0 "
    "11a01-11a0a 11a33-11a38 11a3b-11a3e 11a47 11a51-11a56 11a59-11a5b 11a8a-11a96 "
    "11a98-11a99 11c30-11c36 11c38-11c3d 11c3f 11c92-11ca7 11caa-11cb0 11cb2-11cb3 "
    "11cb5-11cb6 11d31-11d36 11d3a 11d3c-11d3d 11d3f-11d45 11d47 11d90-11d91 11d95 11d97 "
    "11ef3-11ef4 16f4f 16fe4 1cf00-1cf2d 1cf30-1cf46 1e000-1e006 1e008-1e018 1e01b-1e021 "
    "1e023-1e024 1e026-1e02a 1e130-1e136 1e2ae 1e2ec-1e2ef 1e944-1e94a"
)
_PUNCTUATION = _code_points("166d 111c9")
_NOT_PUNCTUATION = _code_points(
    "61d 9fd a76 c77 c84 1b7d-1b7e 2e43-2e4f 2e52-2e5d 10ead 10f55-10f59 10f86-10f89 "
    "1144b-1144f 1145a-1145b 1145d 11660-1166c 116b9 1183b 11944-11946 119e2 11a3f-11a46 "
    "11a9a-11a9c 11a9e-11aa2 11c41-11c45 11c70-11c71 11ef7-11ef8 11fff 12ff1-12ff2 "
    "16e97-16e9a 16fe2 1e95e-1e95f"
)
# Rust's lowercase of the capitals Unicode 16.0 added: the first, last and how far down.
_LOWERCASE_RANGES = ((0x10D50, 0x10D65, 0x20), (0x16EA0, 0x16EB8, 0x1B))
_LOWERCASE = {
    0x1C89: "\u1c8a", 0xA7CB: "\u0264", 0xA7CC: "\ua7cd", 0xA7CE: "\ua7cf", 0xA7D2: "\ua7d3",
    0xA7D4: "\ua7d5", 0xA7DA: "\ua7db", 0xA7DC: "\u019b",
    **{code: chr(code + shift) for low, high, shift in _LOWERCASE_RANGES
       for code in range(low, high + 1)},
}  # fmt: skip
_KEPT_COMPOSED = re.compile("(\U00011938)")
_WORD = re.compile("[^" + "".join(sorted(_WHITESPACE)) + "]+")
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# BERT's punctuation: ASCII's symbols (33-47, 58-64, 91-96, 123-126: "$", "+", "<", "^", "`"
# and "|" are not P* in Unicode) and every P* character.
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def is_punctuation(char: str) -> bool:
    code = ord(char)
    if code in _PUNCTUATION or code in _NOT_PUNCTUATION:
        return code in _PUNCTUATION
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in _CONTROL and ord(char) not in _NOT_CONTROL


def _is_mark(char: str) -> bool:
    """A nonspacing mark (Mn), which strip_accents drops."""
    code = ord(char)
    if code in _MARKS or code in _NOT_MARKS:
        return code in _MARKS
    return unicodedata.category(char) == "Mn"


def _lowercase(char: str) -> str:
    return _LOWERCASE.get(ord(char)) or char.lower()


def _nfd(text: str) -> str:
    if "\U00011938" not in text:
        return unicodedata.normalize("NFD", text)
    return "".join(
        piece if _KEPT_COMPOSED.fullmatch(piece) else unicodedata.normalize("NFD", piece)
        for piece in _KEPT_COMPOSED.split(text)
    )


class _LazyTable(dict[int, str]):
    """A ``str.translate`` table filled in as characters are met: ``compute(char)`` gives what
    a character becomes (``""`` to drop it), once per character."""

    def __init__(self, compute: Callable[[str], str]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, code: int) -> str:
        value = self._compute(chr(code))
        self[code] = value
        return value


class WordPieceTokenizer:
    """Text to the ids of a BERT WordPiece vocabulary, as ``tokenizers`` gives them.

    Built from a ``tokenizer.json`` (:meth:`from_file`); ``max_length`` counts the special
    tokens too, and a longer line keeps its first ids (and its ``[SEP]``)."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        strip_accents: bool | None = None,
        lowercase: bool = True,
        special_tokens: Iterable[str] = (),
        prefix: Iterable[str] = ("[CLS]",),
        suffix: Iterable[str] = ("[SEP]",),
        max_length: int | None = None,
    ) -> None:
        self.vocab = vocab
        self.unk_id = vocab[unk_token]
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.lowercase = lowercase
        self.prefix_ids = [vocab[token] for token in prefix]
        self.suffix_ids = [vocab[token] for token in suffix]
        self.max_length = max_length
        specials = sorted(special_tokens, key=len, reverse=True)  # the longest match first
        self._specials = {token: vocab[token] for token in specials}
        self._special_pattern = (
            re.compile("(" + "|".join(map(re.escape, specials)) + ")") if specials else None
        )
        self._ascii_clean = {
            code: self._clean_char(chr(code)) for code in range(128) if chr(code) != " "
        }
        self._cleaned = _LazyTable(self._clean_char)
        self._folded = _LazyTable(self._fold_char)
        # Per tokenizer, so it is dropped with it; 1 µs a hit against 10 to 50 µs a miss.
        self._word_ids = functools.lru_cache(maxsize=65536)(self._word_ids_uncached)

    @classmethod
    def from_file(cls, path: Path | str, max_length: int | None = None) -> WordPieceTokenizer:
        """The tokenizer a ``tokenizer.json`` declares; a ``ValueError`` names what it
        declares that this class does not run."""
        config = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(**_options(config, str(path)), max_length=max_length)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The ids of ``text``: ``[CLS]``, its words' pieces, ``[SEP]``, at most
        ``max_length`` in all (none of it with ``add_special_tokens=False``)."""
        room = self.max_length
        if room is not None and add_special_tokens:
            room = max(room - len(self.prefix_ids) - len(self.suffix_ids), 0)
        ids = self._ids(text, room)
        return [*self.prefix_ids, *ids, *self.suffix_ids] if add_special_tokens else ids

    def _ids(self, text: str, room: int | None) -> list[int]:
        """The ids of ``text``'s words, the first ``room`` of them (all for None): a long
        document stops being cut into pieces once they are enough."""
        ids: list[int] = []
        for piece, _ in self._pieces_at(text):
            special = self._specials.get(piece)
            if special is not None:
                ids.append(special)
            else:
                for word in self._split_words(self._normalize(piece)):
                    ids.extend(self._word_ids(word))
                    if room is not None and len(ids) >= room:
                        break
            if room is not None and len(ids) >= room:
                return ids[:room]
        return ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def token_ends(self, text: str) -> list[int]:
        """For each id of ``encode(text, add_special_tokens=False)`` (no ``max_length``), the
        index in ``text`` just past the last character it came from: ``text[:ends[n - 1]]`` is
        the text of the first ``n`` ids (tokenizers' offsets)."""
        ends: list[int] = []
        for piece, start in self._pieces_at(text):
            if piece in self._specials:
                ends.append(start + len(piece))
                continue
            chars: list[str] = []
            origins: list[int] = []
            for index, char in enumerate(piece, start):
                normal = self._normalize(char)
                chars.extend(normal)
                origins.extend([index] * len(normal))
            for word in _WORD.finditer("".join(chars)):
                ends.extend(origins[word.start() + end - 1] + 1 for end in self._word_ends(word[0]))
        return ends

    # -- normalizing ---------------------------------------------------------------------

    def _clean_char(self, char: str) -> str:
        """BertNormalizer's clean_text and handle_chinese_chars, for one character."""
        if self.clean_text:
            if char in "\t\n\r":
                return " "
            if char in "\x00\ufffd" or _is_control(char):
                return ""  # U+000B, U+000C and U+0085 too: controls first, then whitespace
            if char in _WHITESPACE:
                return " "
        if self.handle_chinese_chars and _is_cjk(ord(char)):
            return f" {char} "
        return char

    def _fold_char(self, char: str) -> str:
        """Accents stripped from (``char`` is decomposed already), then lowercased: one
        character at a time, as tokenizers does (so a lone capital sigma is σ, never ς)."""
        if self.strip_accents and _is_mark(char):
            return ""
        return _lowercase(char) if self.lowercase else char

    def _normalize(self, text: str) -> str:
        if text.isascii():
            cleaned = text.translate(self._ascii_clean)
            return cleaned.lower() if self.lowercase else cleaned
        cleaned = text.translate(self._cleaned)
        if self.strip_accents:
            cleaned = _nfd(cleaned)
        return cleaned.translate(self._folded)

    # -- splitting -----------------------------------------------------------------------

    def _pieces_at(self, text: str) -> list[tuple[str, int]]:
        """``text`` cut around its special tokens (matched before normalizing, as
        tokenizers matches tokens marked ``normalized: false``), each with its start."""
        if self._special_pattern is None or "[" not in text:
            return [(text, 0)]
        pieces, start = [], 0
        for piece in self._special_pattern.split(text):
            if piece:
                pieces.append((piece, start))
            start += len(piece)
        return pieces

    def _split_words(self, normal: str) -> list[str]:
        # clean_text made all whitespace a space (and dropped U+001C..U+001F, the only
        # characters str.split cuts at that Rust's char::is_whitespace does not).
        return normal.split() if self.clean_text else _WORD.findall(normal)

    def _word_ids_uncached(self, word: str) -> tuple[int, ...]:
        return tuple(id_ for part in _split_punctuation(word) for id_ in self._wordpiece(part)[0])

    def _word_ends(self, word: str) -> list[int]:
        """The end, in ``word``, of each of its pieces."""
        ends: list[int] = []
        offset = 0
        for part in _split_punctuation(word):
            ends.extend(offset + end for end in self._wordpiece(part)[1])
            offset += len(part)
        return ends

    def _wordpiece(self, word: str) -> tuple[list[int], list[int]]:
        """WordPiece's greedy longest-match-first: the ids and where each piece ends."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_id], [len(word)]
        ids, ends, start = [], [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end]
                if start:
                    piece = self.continuing_subword_prefix + piece
                id_ = self.vocab.get(piece)
                if id_ is not None:
                    break
            else:
                return [self.unk_id], [len(word)]
            ids.append(id_)
            ends.append(end)
            start = end
        return ids, ends


def _split_punctuation(word: str) -> list[str]:
    """``word`` cut so that each punctuation character stands alone."""
    if word.isalnum():  # letters and digits only: no punctuation (most words)
        return [word]
    parts, current = [], ""
    for char in word:
        if is_punctuation(char):
            if current:
                parts.append(current)
                current = ""
            parts.append(char)
        else:
            current += char
    if current:
        parts.append(current)
    return parts


def _options(config: dict[str, Any], source: str) -> dict[str, Any]:
    """The constructor's arguments from a parsed ``tokenizer.json``."""

    def require(part: str, value: object, expected: object) -> None:
        if value != expected:
            raise ValueError(
                f"{source}: {part} is {value!r}; membot's WordPiece tokenizer runs only "
                f"{expected!r} (an embedder of another family: st:NAME, with membot[st])"
            )

    model = config.get("model") or {}
    normalizer = config.get("normalizer") or {}
    require("the model", model.get("type"), "WordPiece")
    require("the normalizer", normalizer.get("type"), "BertNormalizer")
    require("the pre-tokenizer", (config.get("pre_tokenizer") or {}).get("type"),
            "BertPreTokenizer")  # fmt: skip
    post = config.get("post_processor") or {}
    require("the post-processor", post.get("type"), "TemplateProcessing")
    template = post["single"]
    sequence = [index for index, item in enumerate(template) if "Sequence" in item]
    require("the template's sequences", len(sequence), 1)

    def special(items: list[dict[str, Any]]) -> list[str]:
        return [
            token
            for item in items
            for token in post["special_tokens"][item["SpecialToken"]["id"]]["tokens"]
        ]

    vocab: dict[str, int] = model["vocab"]
    for added in config.get("added_tokens", []):
        require(f"added token {added['content']!r}", vocab.get(added["content"]), added["id"])
        require(
            f"added token {added['content']!r}'s matching",
            (added["special"], added["single_word"], added["lstrip"], added["rstrip"]),
            (True, False, False, False),
        )
        require(f"added token {added['content']!r}'s normalized", added["normalized"], False)
    return {
        "vocab": vocab,
        "unk_token": model["unk_token"],
        "continuing_subword_prefix": model["continuing_subword_prefix"],
        "max_input_chars_per_word": model["max_input_chars_per_word"],
        "clean_text": normalizer["clean_text"],
        "handle_chinese_chars": normalizer["handle_chinese_chars"],
        "strip_accents": normalizer["strip_accents"],
        "lowercase": normalizer["lowercase"],
        "special_tokens": [added["content"] for added in config.get("added_tokens", [])],
        "prefix": special(template[: sequence[0]]),
        "suffix": special(template[sequence[0] + 1 :]),
    }

"""Expertise documents: read a file into plain text, then cut it into chunks ready to embed.

Reading (:func:`read_document`) picks the format by suffix (:data:`MEDIA_BY_SUFFIX`):

- ``.txt``, ``.text``: plain text, kept as written.
- ``.md``, ``.markdown``: the text stays, markup that carries no meaning goes: emphasis and
  strike-through markers, backticks of code spans and the fence lines of code blocks (their
  content stays), link and image URLs (the label or alt text stays), reference definitions,
  inline HTML tags, blockquote markers, rules, table separator rows and YAML front matter.
  Headings (``#`` and underlined) stay as ``#`` lines; bullets become ``- ``. Title: the first
  heading.
- ``.html``, ``.htm``: read with the standard library's :mod:`html.parser`. Scripts, styles,
  forms, ``nav``, ``aside``, ``footer`` and anything marked hidden or as navigation are dropped;
  a ``header`` outside ``main``/``article`` counts as site chrome and is dropped too. Headings
  become ``#`` lines, list items ``- `` lines, paragraphs and other blocks are separated by a
  blank line; entities are decoded. Title: ``<title>``, else the first ``<h1>``.
- ``.pdf``: the text of each page as pypdf extracts it, pages separated by a blank line. PDFs
  have no headings we can trust. Title: the document's metadata title, if any.

Any file without a title gets its file name without the suffix. Text is decoded as UTF-8 (a
UTF-8 or UTF-16 byte order mark is honoured; HTML may also declare its charset). Whatever is
wrong with a file (unsupported suffix, missing, not decodable, no text, damaged or encrypted
PDF) raises :class:`~membot.errors.ImportFormatError` naming the file.

Markdown and HTML documents mark their headings as Markdown ``#`` lines in ``Document.text``;
a body line that would read as a heading is indented by one space, so the chunker never takes
it for one. Plain text and PDF are taken to have no headings.

Chunking (:func:`chunk_document`): a heading starts a new section; a section splits into
paragraphs at blank lines (and at list items); whitespace is collapsed. Consecutive paragraphs
are packed into a chunk while the chunk stays within ``max_tokens`` (counted on the chunk's real
text). A paragraph that does not fit in a fresh chunk is split into sentences, and a sentence
longer than ``max_tokens`` is cut by tokens (at a word boundary where there is one). Within a
section each chunk after the first starts with the tail sentences of the one before, about
``overlap_tokens`` of them, so a fact that straddles a boundary is found whole in one chunk.
Sections never share a chunk: each chunk belongs under one heading.

Why 200 and 30: a recalled chunk is quoted into the prompt as a hint next to the conversation,
so it must stay small beside the rest of the budget; and the bundled MiniLM embedder reads at
most 256 word pieces and silently ignores the rest, so a chunk of 200 tokens (measured with the
SmolLM2 tokenizer, which splits a little differently) is embedded whole. 30 tokens is one or two
sentences of overlap: enough context to keep a split fact together, little enough that the
store does not hold every sentence twice.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from membot.errors import ConfigError, ImportFormatError
from membot.turn.tokens import TokenCounter

log = logging.getLogger(__name__)

MEDIA_BY_SUFFIX: dict[str, str] = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}

MIN_MAX_TOKENS = 16

# A heading line as the readers write it; body text never starts in column 0 with this shape.
_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S.*?)[ \t]*$")
_HEADED_MEDIA = frozenset({"markdown", "html"})


@dataclass(frozen=True)
class Document:
    name: str
    title: str
    text: str
    media: str
    sha256: str


@dataclass(frozen=True)
class Chunk:
    ord: int
    text: str
    heading: str | None
    tokens: int


# ---------------------------------------------------------------------------------------------
# Reading


def read_document(path: Path) -> Document:
    """Read a text, Markdown, HTML or PDF file; raise :class:`ImportFormatError` if it is bad."""
    path = Path(path)
    media = MEDIA_BY_SUFFIX.get(path.suffix.lower())
    if media is None:
        supported = ", ".join(MEDIA_BY_SUFFIX)
        raise ImportFormatError(
            f"{path}: unsupported document type {path.suffix or '(no suffix)'!r}; "
            f"use one of {supported}"
        )
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ImportFormatError(f"{path}: cannot be read: {error.strerror or error}") from error
    if media == "pdf":
        title, text = _read_pdf(data, path)
    elif media == "html":
        title, text = _read_html(_decode(data, path, _declared_charset(data)))
    elif media == "markdown":
        title, text = _read_markdown(_decode(data, path))
    else:
        title, text = None, _decode(data, path)
    text = _tidy(text)
    if not text:
        hint = " (a scanned PDF needs OCR first)" if media == "pdf" else ""
        raise ImportFormatError(f"{path}: the document holds no text{hint}")
    return Document(
        name=path.name,
        title=title or path.stem,
        text=text,
        media=media,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def _decode(data: bytes, path: Path, declared: str | None = None) -> str:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    else:
        encoding = declared or "utf-8"
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        raise ImportFormatError(
            f"{path} is not valid {encoding} text ({error}); save it as UTF-8 and try again"
        ) from error


def _declared_charset(data: bytes) -> str | None:
    match = re.search(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", data[:4096], re.I)
    if match is None:
        return None
    name = match.group(1).decode("ascii")
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _tidy(text: str) -> str:
    """Unix line ends, no control characters, no trailing blanks, at most one blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def _as_body(line: str) -> str:
    # A body line shaped like a heading ("# comment" in a code block) must not become one.
    return " " + line if _HEADING.match(line) else line


# --- PDF --------------------------------------------------------------------------------------


def _read_pdf(data: bytes, path: Path) -> tuple[str | None, str]:
    # pypdf warns of what it meets in a damaged file ("invalid pdf header", "EOF marker not
    # found") on stderr, above membot's own error that says the same in one line.
    with _quieted(logging.getLogger("pypdf")):
        return _read_pdf_pages(data, path)


@contextmanager
def _quieted(logger: logging.Logger) -> Iterator[None]:
    """``logger``'s warnings left out meanwhile (its errors still pass)."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _read_pdf_pages(data: bytes, path: Path) -> tuple[str | None, str]:
    from pypdf import PdfReader

    # pypdf meets damaged files with all kinds of builtin errors, not only its own: any failure
    # here means the file cannot be read, and the user gets that, not a traceback.
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted and not reader.decrypt("")
    except Exception as error:
        raise ImportFormatError(f"{path} is not a readable PDF: {error}") from error
    if encrypted:
        raise ImportFormatError(
            f"{path} is an encrypted PDF that needs a password; save an unprotected copy"
        )
    pages: list[str] = []
    try:
        for page in reader.pages:
            pages.append(page.extract_text() or "")
    except Exception as error:
        number = len(pages) + 1
        raise ImportFormatError(
            f"{path}: page {number} of the PDF cannot be read: {error}"
        ) from error
    title = None
    try:
        title = (reader.metadata.title or "").strip() if reader.metadata else None
    except Exception as error:  # a broken info dictionary costs the title, not the text
        log.debug("no title in %s: %s", path, error)
    return title or None, "\n\n".join(_tidy(page) for page in pages)


# --- Markdown ---------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)[ \t]*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)+\|?\s*$")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_BULLET = re.compile(r"^[-*+][ \t]+")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_PRIVATE = 0xE000  # escaped punctuation hides in the private use area while markup is removed
_INLINE = [
    (re.compile(r"<!--.*?-->"), ""),
    (re.compile(r"!\[([^\]]*)\]\((?:[^()]|\([^()]*\))*\)"), r"\1"),
    (re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^()]*\))*\)"), r"\1"),
    (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"),
    (re.compile(r"<((?:https?|ftp|mailto):[^>\s]+|[^>\s@]+@[^>\s]+)>"), r"\1"),
    (re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"), ""),
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), r"\1"),
]


def _read_markdown(text: str) -> tuple[str | None, str]:
    out: list[str] = []
    fence: str | None = None
    for line in _without_front_matter(text.replace("\r\n", "\n").split("\n")):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            else:
                out.append(_as_body(line.rstrip()))
            continue
        if match := _FENCE.match(line):
            fence = match.group(1)
            continue
        out.append(_markdown_line(line, out))
    title = next((m.group(2) for line in out if (m := _HEADING.match(line))), None)
    return title, "\n".join(out)


def _markdown_line(line: str, out: list[str]) -> str:
    """One line outside code blocks; may turn the line before into an underlined heading."""
    previous = out[-1] if out else ""
    if _SETEXT.match(line) and previous.strip() and not _is_structure(previous):
        level = 1 if line.strip().startswith("=") else 2
        out[-1] = "#" * level + " " + previous.strip()
        return ""
    if _RULE.match(line) or _TABLE_RULE.match(line) or _REFERENCE.match(line):
        return ""
    if match := _ATX.match(line):
        heading = _inline(match.group(2) or "").strip()
        return "#" * len(match.group(1)) + " " + heading if heading else ""
    line = _QUOTE.sub("", line).strip()
    line = _BULLET.sub("- ", line)
    if line.startswith("|") and line.endswith("|"):
        line = line[1:-1].strip()
    return _as_body(_inline(line))


def _is_structure(line: str) -> bool:
    return bool(_HEADING.match(line)) or line.startswith("- ")


def _without_front_matter(lines: list[str]) -> list[str]:
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1 :]
    return lines


def _inline(text: str) -> str:
    text = _ESCAPE.sub(lambda m: chr(_PRIVATE + ord(m.group(1))), text)
    parts, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        parts.append(_without_markup(text[last : match.start()]))
        parts.append(match.group(2).strip())
        last = match.end()
    parts.append(_without_markup(text[last:]))
    return re.sub(r"[\ue000-\ue07f]", lambda m: chr(ord(m.group()) - _PRIVATE), "".join(parts))


def _without_markup(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text


# --- HTML -------------------------------------------------------------------------------------

# Tag lists are written as words: easier to read and extend than sets of 20 quoted strings.
_NOISE_TAGS = frozenset(
    "script style noscript template svg canvas iframe object nav aside footer form button "  # noqa: SIM905
    "select textarea".split()
)
_NOISE_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "menu", "menubar"})
_VOID_TAGS = frozenset(
    "area base br col embed hr img input link meta param source track wbr".split()  # noqa: SIM905
)
_BLOCK_TAGS = frozenset(
    "p div section article main header blockquote pre table ul ol dl figure figcaption "  # noqa: SIM905
    "caption address details summary fieldset hr body".split()
)
_LINE_TAGS = frozenset({"li", "tr", "dt", "dd", "br"})
_HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}


class _HtmlText(HTMLParser):
    """Collects the readable lines of a page; see the module docstring for what is kept."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.title: list[str] = []
        self.first_h1: str | None = None
        self._words: list[str] = []
        self._skipping: list[str] = []
        self._in_title = False
        self._heading: int | None = None
        self._bullet = False
        self._pre = 0
        self._items = 0  # open <li>: a <p> inside one is a line of the item, not a paragraph
        self._content = 0  # open <main>/<article>: a <header> inside one is the article's own

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping:
            if tag not in _VOID_TAGS:
                self._skipping.append(tag)
            return
        if self._is_noise(tag, dict(attrs)):
            if tag not in _VOID_TAGS:
                self._skipping.append(tag)
            return
        if tag in ("main", "article"):
            self._content += 1
        if tag == "title":
            self._in_title = True
        elif tag in _HEADING_TAGS:
            self._end_paragraph()
            self._heading = _HEADING_TAGS[tag]
        elif tag in _LINE_TAGS or self._is_item_paragraph(tag):
            self._end_line()
            self._bullet = self._bullet or tag == "li"
            self._items += tag == "li"
        elif tag in _BLOCK_TAGS:
            self._end_paragraph()
            if tag == "pre":
                self._pre += 1
        elif tag in ("td", "th"):
            self._words.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag in self._skipping:  # unclosed children (<li>, <p>) close with their parent
                while self._skipping.pop() != tag:
                    pass
            return
        if tag in ("main", "article"):
            self._content = max(0, self._content - 1)
        if tag == "title":
            self._in_title = False
        elif tag in _HEADING_TAGS:
            self._end_paragraph()
            self._heading = None
        elif tag in _LINE_TAGS or self._is_item_paragraph(tag):
            self._end_line()
            self._items = max(0, self._items - (tag == "li"))
        elif tag in _BLOCK_TAGS:
            self._end_paragraph()
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            if tag in ("ul", "ol"):  # items left open (<li>a<li>b) end with their list
                self._items = 0

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._in_title:
            self.title.append(data)
        elif self._pre:
            *complete, rest = data.split("\n")
            for piece in complete:
                self._words.append(piece)
                self._end_line()
            self._words.append(rest)
        else:
            self._words.append(data)

    def close(self) -> None:
        super().close()
        self._end_paragraph()

    def _is_noise(self, tag: str, attrs: dict[str, str | None]) -> bool:
        return (
            tag in _NOISE_TAGS
            or (tag == "header" and not self._content)
            or "hidden" in attrs
            or attrs.get("aria-hidden") == "true"
            or (attrs.get("role") or "").lower() in _NOISE_ROLES
        )

    def _is_item_paragraph(self, tag: str) -> bool:
        return bool(self._items) and tag in ("p", "div")

    def _end_line(self) -> None:
        text = " ".join("".join(self._words).split())
        self._words = []
        if not text:
            return  # an empty line keeps its pending bullet: <li><p>text</p></li>
        if self._heading is not None:
            self.lines.append("#" * self._heading + " " + text)
            if self._heading == 1 and self.first_h1 is None:
                self.first_h1 = text
        else:
            self.lines.append("- " + text if self._bullet else _as_body(text))
        self._heading = None
        self._bullet = False

    def _end_paragraph(self) -> None:
        self._end_line()
        if self.lines and self.lines[-1]:
            self.lines.append("")


def _read_html(text: str) -> tuple[str | None, str]:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    title = " ".join("".join(parser.title).split()) or parser.first_h1
    return title, "\n".join(parser.lines)


# ---------------------------------------------------------------------------------------------
# Chunking


@dataclass(frozen=True)
class _Sentence:
    text: str
    starts_paragraph: bool


@dataclass(frozen=True)
class _Section:
    heading: str | None
    paragraphs: list[str]


def chunk_document(
    document: Document,
    counter: TokenCounter,
    max_tokens: int = 200,
    overlap_tokens: int = 30,
) -> list[Chunk]:
    """Cut ``document`` into chunks of at most ``max_tokens`` tokens (see the module docstring)."""
    if max_tokens < MIN_MAX_TOKENS:
        raise ConfigError(f"max_tokens must be at least {MIN_MAX_TOKENS}, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens / 2:
        raise ConfigError(
            f"overlap_tokens must be between 0 and less than half of max_tokens "
            f"({max_tokens}), got {overlap_tokens}"
        )
    packer = _Packer(counter, max_tokens, overlap_tokens)
    chunks: list[Chunk] = []
    for section in _sections(document):
        for text in packer.pack(section.paragraphs):
            chunks.append(Chunk(len(chunks), text, section.heading, counter.count(text)))
    return chunks


def _sections(document: Document) -> Iterator[_Section]:
    headed = document.media in _HEADED_MEDIA
    heading: str | None = None
    paragraphs: list[str] = []
    lines: list[str] = []

    def end_paragraph() -> None:
        text = " ".join(" ".join(lines).split())
        if text:
            paragraphs.append(text)
        lines.clear()

    for line in document.text.split("\n"):
        match = _HEADING.match(line) if headed else None
        if match:
            end_paragraph()
            if paragraphs:
                yield _Section(heading, paragraphs)
            heading, paragraphs = " ".join(match.group(2).split()), []
            continue
        if not line.strip() or re.match(r"\s*(?:[-*•]|\d+[.)])\s", line):
            end_paragraph()
        lines.append(line)
    end_paragraph()
    if paragraphs:
        yield _Section(heading, paragraphs)


_SENTENCE_END = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’»)\]]))\s+|(?<=[。！？])")


class _Packer:
    """Packs one section's paragraphs into chunk texts; see the module docstring."""

    def __init__(self, counter: TokenCounter, max_tokens: int, overlap_tokens: int) -> None:
        self.counter = counter
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    def pack(self, paragraphs: list[str]) -> list[str]:
        chunks: list[str] = []
        current: list[_Sentence] = []
        fresh = 0  # sentences in ``current`` that are not overlap carried from the last chunk
        for paragraph in paragraphs:
            whole = [_Sentence(paragraph, True)]
            if self._fits(current + whole):
                current, fresh = current + whole, fresh + 1
                continue
            pieces = whole if self._fits(whole) else self._sentences(paragraph)
            for piece in pieces:
                if self._fits([*current, piece]):
                    current, fresh = [*current, piece], fresh + 1
                    continue
                if fresh:
                    chunks.append(self._join(current))
                    current = self._overlap(current)
                while current and not self._fits([*current, piece]):
                    current = current[1:]
                current, fresh = [*current, piece], 1
        if fresh:
            chunks.append(self._join(current))
        return chunks

    def _fits(self, sentences: list[_Sentence]) -> bool:
        return self.counter.count(self._join(sentences)) <= self.max_tokens

    @staticmethod
    def _join(sentences: list[_Sentence]) -> str:
        text = sentences[0].text if sentences else ""
        for sentence in sentences[1:]:
            text += ("\n" if sentence.starts_paragraph else " ") + sentence.text
        return text

    def _sentences(self, paragraph: str) -> list[_Sentence]:
        pieces = []
        for sentence in _SENTENCE_END.split(paragraph):
            if sentence.strip():
                pieces.extend(self._cut(sentence.strip()))
        return [_Sentence(text, index == 0) for index, text in enumerate(pieces)]

    def _cut(self, sentence: str) -> list[str]:
        """A sentence too long for a chunk in pieces, cut at word boundaries if possible.

        Pieces leave room for the overlap, so the next chunk can still start with the tail of
        the piece before.
        """
        size = self.max_tokens - self.overlap_tokens
        if self.counter.count(sentence) <= self.max_tokens:
            return [sentence]
        pieces = []
        rest = sentence
        while self.counter.count(rest) > size:
            head = self.counter.truncate(rest, size)
            # A tokenizer may give back a prefix spelled slightly differently: keep what matches.
            end = _common_prefix_length(rest, head)
            space = rest.rfind(" ", 0, end + 1)
            if space > 0 and end < len(rest) and not rest[end].isspace():
                end = space
            while end > 1 and self.counter.count(rest[:end].strip()) > size:
                end -= 1
            end = max(end, 1)  # always progress, even with a counter that keeps nothing
            pieces.append(rest[:end].strip())
            rest = rest[end:].strip()
        if rest:
            pieces.append(rest)
        return [piece for piece in pieces if piece]

    def _overlap(self, sentences: list[_Sentence]) -> list[_Sentence]:
        """The tail of a chunk worth about ``overlap_tokens`` tokens, in whole sentences if any."""
        if not self.overlap_tokens or not sentences:
            return []
        tail: list[_Sentence] = []
        for sentence in reversed(self._split(sentences)):
            if self.counter.count(self._join([sentence, *tail])) > self.overlap_tokens:
                break
            tail.insert(0, sentence)
        if tail:
            return tail
        return self._tail_words(sentences[-1].text)

    @staticmethod
    def _split(sentences: list[_Sentence]) -> list[_Sentence]:
        """Whole paragraphs packed as one piece, split into their sentences."""
        split: list[_Sentence] = []
        for sentence in sentences:
            parts = [part for part in _SENTENCE_END.split(sentence.text) if part.strip()]
            split.extend(
                _Sentence(part.strip(), sentence.starts_paragraph and index == 0)
                for index, part in enumerate(parts)
            )
        return split

    def _tail_words(self, text: str) -> list[_Sentence]:
        """The last words of a sentence too long to carry whole (binary search on word count)."""
        words = text.split()
        low, high = 0, len(words)
        while low < high:
            middle = (low + high + 1) // 2
            if self.counter.count(" ".join(words[-middle:])) <= self.overlap_tokens:
                low = middle
            else:
                high = middle - 1
        return [_Sentence(" ".join(words[-low:]), False)] if low else []


def _common_prefix_length(first: str, second: str) -> int:
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length

"""Reading expertise documents in each format, and chunking them under a token limit."""

from __future__ import annotations

import hashlib
import io
import itertools
from pathlib import Path

import pytest
from pypdf import PdfWriter

from membot.errors import ConfigError, ImportFormatError
from membot.memory.documents import Chunk, Document, chunk_document, read_document


class WordCounter:
    """A token counter where every whitespace-separated word is one token."""

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def pdf_bytes(*pages: str) -> bytes:
    """A small valid PDF: one Helvetica text line per page, xref offsets computed."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * index} 0 R" for index in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, text in enumerate(pages):
        content = f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * index} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def document(text: str, media: str = "markdown") -> Document:
    return Document(name="doc.md", title="Doc", text=text, media=media, sha256="0" * 64)


# --- Reading ---------------------------------------------------------------------------------


def test_plain_text_is_kept_with_file_name_as_title(tmp_path: Path) -> None:
    path = write(
        tmp_path, "returns.txt", "Returns within 30 days.\r\n\r\n\r\n\r\nKeep the receipt.\n"
    )

    doc = read_document(path)

    assert doc == Document(
        name="returns.txt",
        title="returns",
        text="Returns within 30 days.\n\nKeep the receipt.",
        media="text",
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
    )


def test_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.text", "\ufeffCafé au lait".encode())

    assert read_document(path).text == "Café au lait"


def test_utf16_with_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.txt", "Grüße aus Köln".encode("utf-16"))

    assert read_document(path).text == "Grüße aus Köln"


def test_markdown_markup_is_removed_and_headings_kept(tmp_path: Path) -> None:
    source = """---
author: someone
---
# The **Espresso** guide

Grind *fine*, use __18 g__ and ~~guess~~ weigh. See [the manual](https://example.com/m (v2)).
![a portafilter](img/pf.png) and <https://example.com> and <b>bold</b>.
Run `brew --fine` then \\*stars\\* stay.

Steaming
--------

> Keep the wand *just* under the surface.

* first item
+ second item

```bash
# not a heading
steam --on
```

| Size | Grams |
|------|-------|
| single | 9 |

[ref]: https://example.com/ref
"""
    doc = read_document(write(tmp_path, "espresso.md", source))

    assert doc.media == "markdown"
    assert doc.title == "The Espresso guide"
    lines = doc.text.split("\n")
    assert lines[0] == "# The Espresso guide"
    assert "Grind fine, use 18 g and guess weigh. See the manual." in lines
    assert "a portafilter and https://example.com and bold." in lines
    assert "Run brew --fine then *stars* stay." in lines
    assert "## Steaming" in lines
    assert "Keep the wand just under the surface." in lines
    assert "- first item" in lines
    assert "- second item" in lines
    assert " # not a heading" in lines  # code kept, but never read as a heading
    assert "steam --on" in lines
    assert "Size | Grams" in lines
    for gone in ("author", "```", "https://example.com/m", "img/pf.png", "<b>", "|---", "[ref]"):
        assert gone not in doc.text


def test_html_keeps_readable_blocks_and_drops_noise(tmp_path: Path) -> None:
    source = """<!doctype html>
<html><head><title>Milk &amp; Foam</title>
<style>body { color: red }</style><script>var secret = 1;</script></head>
<body>
<header><a href="/">Site logo</a></header>
<nav><ul><li>Home<li>Shop</ul></nav>
<main>
<h1>Steaming milk</h1>
<p>Whole milk foams best &mdash; 60&nbsp;&deg;C is&nbsp;enough.</p>
<div aria-hidden="true">Hidden helper</div>
<h2>Steps</h2>
<ul><li>Purge the wand</li><li><p>Stretch the milk</p></li></ul>
<p># hash at the start</p>
</main>
<footer>Copyright</footer>
</body></html>"""
    doc = read_document(write(tmp_path, "milk.html", source))

    assert doc.media == "html"
    assert doc.title == "Milk & Foam"
    assert doc.text == (
        "# Steaming milk\n\n"
        "Whole milk foams best — 60 °C is enough.\n\n"
        "## Steps\n\n"
        "- Purge the wand\n"
        "- Stretch the milk\n\n"
        " # hash at the start"
    )


def test_html_title_falls_back_to_first_h1(tmp_path: Path) -> None:
    path = write(tmp_path, "page.htm", "<h2>Intro</h2><h1>Grinders</h1><p>Burrs matter.</p>")

    assert read_document(path).title == "Grinders"


def test_pdf_text_is_read_page_by_page(tmp_path: Path) -> None:
    path = write(tmp_path, "manual.pdf", pdf_bytes("Descale every month.", "Use citric acid."))

    doc = read_document(path)

    assert doc.media == "pdf"
    assert doc.title == "manual"
    assert doc.text == "Descale every month.\n\nUse citric acid."
    assert doc.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("slides.pptx", b"anything", "use one of .txt, .text, .md"),
        ("empty.txt", b"  \n\n \t\n", "holds no text"),
        ("empty.md", b"---\n---\n", "holds no text"),
        ("scripts.html", b"<script>x()</script><nav>menu</nav>", "holds no text"),
        ("broken.pdf", b"%PDF-1.4 this is not really a PDF", "not a readable PDF"),
        ("latin1.txt", "café".encode("latin-1"), "not valid utf-8 text"),
    ],
)
def test_bad_files_raise_import_format_error(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = write(tmp_path, name, content)

    with pytest.raises(ImportFormatError, match=message) as caught:
        read_document(path)

    assert name in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="no such file"):
        read_document(tmp_path / "nowhere.md")


def test_pdf_without_text_asks_for_ocr(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    writer.write(buffer)

    with pytest.raises(ImportFormatError, match="OCR"):
        read_document(write(tmp_path, "scan.pdf", buffer.getvalue()))


def test_encrypted_pdf_is_refused(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)

    with pytest.raises(ImportFormatError, match="encrypted PDF"):
        read_document(write(tmp_path, "locked.pdf", buffer.getvalue()))


# --- Chunking --------------------------------------------------------------------------------


def numbered_sentences(prefix: str, count: int, words: int = 6) -> str:
    """``count`` distinct sentences of ``words`` words each."""
    filler = " ".join(["word"] * (words - 2))
    return " ".join(f"{prefix}{number} {filler} end." for number in range(count))


def test_short_paragraphs_pack_into_one_chunk_per_section() -> None:
    doc = document("Intro line.\n\n# Beans\n\nArabica is sweet.\n\nRobusta is bitter.\n\n# Water")

    chunks = chunk_document(doc, WordCounter())

    assert chunks == [
        Chunk(0, "Intro line.", None, 2),
        Chunk(1, "Arabica is sweet.\nRobusta is bitter.", "Beans", 6),
    ]


def test_chunks_respect_the_limit_and_overlap_within_a_section() -> None:
    counter = WordCounter()
    text = "# Grinding\n\n" + numbered_sentences("g", 30) + "\n\n# Brewing\n\n"
    text += "\n\n".join(numbered_sentences(f"b{index}x", 3) for index in range(8))
    doc = document(text)

    chunks = chunk_document(doc, counter, max_tokens=40, overlap_tokens=10)

    assert [chunk.ord for chunk in chunks] == list(range(len(chunks)))
    assert all(chunk.text.strip() for chunk in chunks)
    assert all(chunk.tokens == counter.count(chunk.text) <= 40 for chunk in chunks)
    assert {chunk.heading for chunk in chunks} == {"Grinding", "Brewing"}
    for before, after in itertools.pairwise(chunks):
        first_sentence = after.text.split(". ")[0].split("\n")[0]
        if before.heading == after.heading:
            assert first_sentence in before.text  # starts with the tail of the chunk before
        else:
            assert first_sentence not in before.text  # a new section starts afresh
    # Every sentence of the document is in some chunk.
    for number in range(30):
        assert any(f"g{number} " in chunk.text for chunk in chunks)


def test_overlap_is_about_overlap_tokens_in_whole_sentences() -> None:
    doc = document(numbered_sentences("s", 20, words=5), media="text")

    chunks = chunk_document(doc, WordCounter(), max_tokens=20, overlap_tokens=9)

    # Two sentences (10 words) would be more than 9 tokens: one whole sentence is carried.
    assert len(chunks) == 7
    for before, after in itertools.pairwise(chunks):
        assert after.text.split(" ")[:5] == before.text.split(" ")[-5:]
        assert after.tokens == 20 or after is chunks[-1]


def test_paragraphs_are_not_split_when_they_fit_a_fresh_chunk() -> None:
    first = " ".join(["alpha"] * 12) + "."
    second = " ".join(["beta"] * 12) + "."
    doc = document(f"{first}\n\n{second}", media="text")

    chunks = chunk_document(doc, WordCounter(), max_tokens=16, overlap_tokens=0)

    assert [chunk.text for chunk in chunks] == [first, second]


def test_long_sentence_is_cut_by_tokens_at_word_boundaries() -> None:
    sentence = " ".join(f"w{number}" for number in range(50))
    doc = document(f"# Long\n\n{sentence}", media="html")

    chunks = chunk_document(doc, WordCounter(), max_tokens=20, overlap_tokens=0)

    assert [chunk.tokens for chunk in chunks] == [20, 20, 10]
    assert " ".join(chunk.text for chunk in chunks) == sentence
    assert all(chunk.heading == "Long" for chunk in chunks)


def test_long_sentence_overlap_carries_its_last_words() -> None:
    sentence = " ".join(f"w{number}" for number in range(50))
    doc = document(sentence, media="text")

    chunks = chunk_document(doc, WordCounter(), max_tokens=20, overlap_tokens=5)

    # Pieces are cut at 15 tokens so that the 5 carried over still fit in the next chunk.
    assert [chunk.tokens for chunk in chunks] == [15, 20, 20, 10]
    assert chunks[1].text.startswith("w10 w11 w12 w13 w14 w15")
    assert chunks[-1].text == "w40 w41 w42 w43 w44 w45 w46 w47 w48 w49"


def test_whitespace_is_normalised_and_list_items_stay_apart() -> None:
    doc = document("Tips:\n- grind   fresh\n- weigh\tthe dose\n\n\n   \n  Last   words. ")

    chunks = chunk_document(doc, WordCounter())

    assert [chunk.text for chunk in chunks] == [
        "Tips:\n- grind fresh\n- weigh the dose\nLast words."
    ]


def test_headings_are_only_read_from_markdown_and_html() -> None:
    text = "# not a heading in plain text\n\nBody."

    assert chunk_document(document(text, media="text"), WordCounter())[0].heading is None
    assert chunk_document(document(text, media="markdown"), WordCounter())[0].heading == (
        "not a heading in plain text"
    )


def test_chunks_from_a_read_markdown_file(tmp_path: Path) -> None:
    source = "# Milk\n\n" + numbered_sentences("m", 12) + "\n\n## Oat milk\n\nFoams well."
    doc = read_document(write(tmp_path, "milk.md", source))

    chunks = chunk_document(doc, WordCounter(), max_tokens=30, overlap_tokens=6)

    assert chunks[-1] == Chunk(len(chunks) - 1, "Foams well.", "Oat milk", 2)
    assert {chunk.heading for chunk in chunks[:-1]} == {"Milk"}


@pytest.mark.parametrize(
    ("max_tokens", "overlap_tokens", "message"),
    [
        (15, 0, "max_tokens must be at least 16"),
        (200, -1, "overlap_tokens"),
        (200, 100, "overlap_tokens"),
        (16, 8, "overlap_tokens"),
    ],
)
def test_bad_arguments_are_refused(max_tokens: int, overlap_tokens: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        chunk_document(document("Text."), WordCounter(), max_tokens, overlap_tokens)

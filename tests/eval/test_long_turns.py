"""A turn over membot's line limit is cut into parts where its text breaks."""

from __future__ import annotations

from membot.eval.long_turns import in_parts, split_text
from membot.line_checks import MAX_LINE_CHARS
from membot.memory.facade import LineInput


def test_a_text_is_cut_at_the_last_paragraph_then_sentence_then_word() -> None:
    paragraph = "word " * 9 + "end.\n\n"  # 56 characters
    parts = split_text(paragraph * 4, 120)
    assert parts == [(paragraph * 2).strip()] * 2
    sentences = "One two three. " * 10  # no paragraph or line break: cut after a sentence
    assert all(part.endswith(".") and len(part) <= 50 for part in split_text(sentences, 50))
    words = "abc " * 30
    assert all(len(part) <= 25 and not part.endswith(" ab") for part in split_text(words, 25))
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # no break: a hard cut
    assert split_text("short", 10) == ["short"]


def test_no_part_is_a_sliver_when_the_only_paragraph_break_is_early() -> None:
    text = "Title\n\n" + "a sentence here. " * 20
    parts = split_text(text, 100)
    assert len(parts[0]) > 50 and all(len(part) <= 100 for part in parts)
    assert "".join(parts).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace(
        "\n", ""
    )


def test_each_part_keeps_the_turns_ref_under_a_key_of_its_own() -> None:
    line = LineInput("A sentence. " * 6000, "q1", "s1", ref="s1:0", source_key="ref:s1:0")
    parts = in_parts(line)
    assert len(line.text) > MAX_LINE_CHARS and len(parts) == 3
    assert all(len(part.text) <= MAX_LINE_CHARS for part in parts)
    assert {part.ref for part in parts} == {"s1:0"}
    assert [part.source_key for part in parts] == ["ref:s1:0#1", "ref:s1:0#2", "ref:s1:0#3"]
    assert in_parts(LineInput("short", "q1", "s1", ref="s1:1")) == [
        LineInput("short", "q1", "s1", ref="s1:1")
    ]

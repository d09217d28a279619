"""The running summary: which scrolled-off lines are folded, and how."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot import BotSettings, Line, Role, ScriptedLLM
from membot.turn.running_summary import SUMMARY_TOKENS, fold, lines_to_fold


@pytest.mark.parametrize(
    ("window", "overlap", "through", "newest", "expected"),
    [
        (8, 2, 0, 8, range(0)),  # nothing scrolled off yet
        (8, 2, 0, 13, range(0)),  # 5 waiting, a window's worth is 6
        (8, 2, 0, 14, range(1, 7)),  # 6 waiting: fold 1-6
        (8, 2, 0, 20, range(1, 13)),  # everything waiting goes at once
        (8, 2, 6, 19, range(0)),  # 7-11 waiting: 5 < 6
        (8, 2, 6, 20, range(7, 13)),
        (4, 4, 0, 5, range(1, 2)),  # overlap >= window: at least one line
        (4, 9, 0, 4, range(0)),
        (0, 0, 0, 1, range(1, 2)),  # no feed: every earlier line scrolls off
        (3, 1, 10, 12, range(0)),  # the summary covers more than has scrolled off
    ],
)
def test_lines_to_fold_waits_for_a_windows_worth(window, overlap, through, newest, expected):
    settings = BotSettings(window_size=window, window_overlap=overlap)
    assert lines_to_fold(settings, through, newest) == expected


def test_the_folded_lines_end_right_before_the_next_turns_feed() -> None:
    settings = BotSettings(window_size=8, window_overlap=2)
    newest = 30
    folded = lines_to_fold(settings, 0, newest)
    next_feed_first = (newest + 1) - settings.window_size
    assert folded.stop == next_feed_first


def line(seq: int, role: Role, text: str, speaker: str | None = None) -> Line:
    moment = datetime(2024, 5, 1, 12, seq, tzinfo=UTC)
    return Line(seq, "membot", "alice", "t1", seq, role, text, moment, 3, speaker)


LINES = [
    line(1, Role.HUMAN, "I am moving to Lisbon in June."),
    line(2, Role.BOT, "Exciting! Why Lisbon?"),
    line(3, Role.TOOL, "22C sunny", speaker="TOOL weather"),
]


def test_fold_shows_the_old_summary_and_the_lines_with_the_bots_names() -> None:
    llm = ScriptedLLM(["  Alice moves to Lisbon in June.  "])
    settings = BotSettings(human_name="Alice", bot_name="Guide")
    summary = fold(llm, settings, "Alice is a teacher.", LINES)
    assert summary == "Alice moves to Lisbon in June."
    ((message,),) = llm.history
    content = message["content"]
    assert "between Alice and Guide" in content
    assert "Summary so far:\n<summary>\nAlice is a teacher.\n</summary>" in content
    assert (
        "Lines to add:\n<transcript>\nAlice: I am moving to Lisbon in June.\n"
        "Guide: Exciting! Why Lisbon?\nTOOL weather: <tool_result>22C sunny</tool_result>\n"
        "</transcript>\n" in content
    )
    assert content.endswith("Updated summary:")
    assert llm.json_modes == [False]


def test_fold_without_a_summary_says_none_yet() -> None:
    llm = ScriptedLLM(["s"])
    fold(llm, BotSettings(), "", LINES[:1])
    assert "Summary so far:\n(none yet)" in llm.history[0][0]["content"]


def test_an_empty_reply_folds_nothing() -> None:
    """None: the caller keeps the old summary and the lines wait for the next fold."""
    assert fold(ScriptedLLM(["   "]), BotSettings(), "Alice is a teacher.", LINES) is None


def test_a_failing_model_raises_its_error() -> None:
    from membot import ProviderError

    with pytest.raises(ProviderError, match="down"):
        fold(ScriptedLLM(["!error down"]), BotSettings(), "", LINES)


def test_the_summary_reply_is_short() -> None:
    class Recording(ScriptedLLM):
        def complete(self, messages, max_tokens, *, schema=None):
            self.max_tokens = max_tokens
            return super().complete(messages, max_tokens, schema=schema)

    llm = Recording(["s"])
    fold(llm, BotSettings(), "", LINES)
    assert llm.max_tokens == SUMMARY_TOKENS

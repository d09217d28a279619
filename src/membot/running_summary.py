"""The running summary of a long thread (after JetChat's "infinite chat").

The prompt shows a thread's last ``window_size`` lines as they are. When lines scroll off
the top, they are folded into a short summary of the thread so far, which opens the feed:
the model keeps the thread's gist even where recall finds nothing. Folding waits until a
window's worth of lines (``window_size - window_overlap``, at least one) has scrolled off,
so it costs one LLM call per few turns, after the reply, outside ``memory_total``.
Scrolled-off lines also stay searchable like every line.
"""

from __future__ import annotations

from collections.abc import Sequence

from membot.config import BotSettings
from membot.context import Speakers, render_line
from membot.llm import LLM
from membot.model import Line

INSTRUCTION = (
    "Update the summary of a conversation between {HUMAN} and {BOT}. Keep every fact, name, "
    "date, preference and open question; drop small talk. Write at most 120 words, in the "
    "third person, and nothing else."
)
SUMMARY_TOKENS = 200


def lines_to_fold(settings: BotSettings, summarized_through: int, newest_seq: int) -> range:
    """The seqs that have scrolled off the feed and are not in the summary yet: empty until
    a window's worth is waiting."""
    first_in_feed = newest_seq - settings.window_size + 1
    waiting = range(summarized_through + 1, first_in_feed)
    step = max(settings.window_size - settings.window_overlap, 1)
    return waiting if len(waiting) >= step else range(0)


def fold(llm: LLM, settings: BotSettings, summary: str, lines: Sequence[Line]) -> str | None:
    """The summary with ``lines`` folded in; None when the model wrote nothing (the lines
    then wait for the next fold). Raises the LLM's ``ProviderError``."""
    speakers = Speakers(settings.human_name, settings.bot_name)
    instruction = INSTRUCTION.replace("{HUMAN}", settings.human_name).replace(
        "{BOT}", settings.bot_name
    )
    transcript = "\n".join(render_line(line, speakers) for line in lines)
    content = (
        f"{instruction}\n\nSummary so far:\n{summary or '(none yet)'}\n\n"
        f"Lines to add:\n{transcript}\n\nUpdated summary:"
    )
    reply = llm.complete([{"role": "user", "content": content}], SUMMARY_TOKENS)
    return reply.strip() or None

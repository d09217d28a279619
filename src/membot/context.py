"""The responder prompt: recent window + recalled blocks + the new line, under a token budget.

The layout follows uncany-membot: the earlier conversations that recall found, labelled with
their thread and date and in time order, then the current conversation ending with the new line.
Packing order when the budget is tight: the new line always; then the last few lines of the
current conversation; then recalled blocks, best score first; then older recent lines. What
did not fit is reported in ``cut``. The final text is counted again, and trimmed further if
needed, so the prompt never exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from membot.model import Block, Line, Role, utc_now
from membot.tokens import TokenCounter

# Tokens a chat template adds around the two messages (role markers, separators).
MESSAGE_OVERHEAD = 12
# Recent lines kept ahead of recalled blocks: the turn makes no sense without them.
MIN_RECENT = 4

INSTRUCTIONS = (
    "The {AI} has a conversation with the {HUMAN}. If the {AI} doesn't know the answer to a "
    "question, it can respond by saying it does not know."
)


@dataclass(frozen=True)
class Speakers:
    human: str = "HUMAN"
    ai: str = "AI"

    def label(self, line: Line) -> str:
        if line.speaker:
            return line.speaker
        if line.role == Role.HUMAN:
            return self.human
        if line.role == Role.BOT:
            return self.ai
        return str(line.role).upper()


@dataclass(frozen=True)
class Prompt:
    text: str
    messages: tuple[dict[str, str], ...]
    tokens: int
    blocks: tuple[Block, ...]
    recent: tuple[Line, ...]
    cut: dict[str, int] = field(default_factory=dict)


def render_line(line: Line, speakers: Speakers) -> str:
    return f"{speakers.label(line)}: {line.text}"


def render_block(block: Block, speakers: Speakers) -> str:
    date = block.started_at.strftime("%Y-%m-%d %H:%M UTC")
    header = f'[thread "{block.thread}", {date}]'
    return "\n".join([header, *(render_line(line, speakers) for line in block.lines)])


def render(
    recent: Sequence[Line],
    new_text: str | None,
    blocks: Sequence[Block],
    speakers: Speakers,
    now: datetime,
) -> str:
    parts = [
        INSTRUCTIONS.format(AI=speakers.ai, HUMAN=speakers.human),
        f"It is now {now.strftime('%A %Y-%m-%d %H:%M UTC')}.",
    ]
    if blocks:
        in_time_order = sorted(blocks, key=lambda block: block.started_at)
        parts.append(
            f"Here are PREVIOUS CONVERSATIONS that the {speakers.human} had with the {speakers.ai}:"
        )
        parts.append("\n\n".join(render_block(block, speakers) for block in in_time_order))
    conversation = [render_line(line, speakers) for line in recent]
    if new_text is not None:
        conversation += [f"{speakers.human}: {new_text}", f"{speakers.ai}:"]
    parts.append("Here is the current conversation:")
    parts.append("\n".join(conversation) if conversation else "(it starts now)")
    return "\n\n".join(parts)


def assemble(
    recent: Sequence[Line],
    new_line: Line,
    blocks: Sequence[Block],
    counter: TokenCounter,
    budget: int,
    speakers: Speakers | None = None,
    now: datetime | None = None,
) -> Prompt:
    """Pack the prompt under ``budget`` tokens (message overhead included)."""
    speakers = speakers or Speakers()
    now = now or utc_now()
    limit = budget - MESSAGE_OVERHEAD
    new_text = _fit_new_line(new_line.text, speakers, now, counter, limit)
    keep_recent, keep_blocks = _choose(recent, blocks, new_text, speakers, now, counter, limit)
    text = render(keep_recent, new_text, keep_blocks, speakers, now)
    size = counter.count(text)
    while size > limit and (keep_recent or keep_blocks or new_text):
        # Joins can tokenise a little longer than the parts: drop the least needed piece.
        if len(keep_recent) > MIN_RECENT or (keep_recent and not keep_blocks):
            keep_recent = keep_recent[1:]
        elif keep_blocks:
            keep_blocks.remove(min(keep_blocks, key=lambda block: block.score))
        else:
            new_text = counter.truncate(new_text, max(counter.count(new_text) - 4, 0))
        text = render(keep_recent, new_text, keep_blocks, speakers, now)
        size = counter.count(text)
    cut = {
        "recent_lines": len(recent) - len(keep_recent),
        "recalled_blocks": len(blocks) - len(keep_blocks),
        "new_line_tokens": counter.count(new_line.text) - counter.count(new_text),
    }
    # Chat models get the context as the system message and the new line as the user's turn;
    # ``text`` is the same prompt laid out as one transcript, and is what the budget counts.
    system = render(keep_recent, None, keep_blocks, speakers, now)
    messages = ({"role": "system", "content": system}, {"role": "user", "content": new_text})
    return Prompt(
        text=text,
        messages=messages,
        tokens=size + MESSAGE_OVERHEAD,
        blocks=tuple(keep_blocks),
        recent=tuple(keep_recent),
        cut={name: value for name, value in cut.items() if value},
    )


def _fit_new_line(
    text: str, speakers: Speakers, now: datetime, counter: TokenCounter, limit: int
) -> str:
    """The new line as it goes in the prompt: whole, unless it alone overflows the budget."""
    frame = counter.count(render([], "", [], speakers, now))
    room = max(limit - frame - 2, 0)
    return text if counter.count(text) <= room else counter.truncate(text, room)


def _line_cost(line: Line, speakers: Speakers, counter: TokenCounter) -> int:
    """Tokens of a rendered line, from the count stored with the line: a turn re-tokenises
    only its final prompt, not every candidate line."""
    return line.tokens + counter.count(f"{speakers.label(line)}:") + 2


def _block_cost(block: Block, speakers: Speakers, counter: TokenCounter) -> int:
    header = counter.count(f'[thread "{block.thread}", 2000-01-01 00:00 UTC]') + 2
    return header + sum(_line_cost(line, speakers, counter) for line in block.lines)


def _choose(
    recent: Sequence[Line],
    blocks: Sequence[Block],
    new_text: str,
    speakers: Speakers,
    now: datetime,
    counter: TokenCounter,
    limit: int,
) -> tuple[list[Line], list[Block]]:
    room = limit - counter.count(render([], new_text, [], speakers, now))
    recent_cost = [_line_cost(line, speakers, counter) for line in recent]
    chosen_recent: set[int] = set()
    chosen_blocks: list[Block] = []
    newest_first = list(range(len(recent) - 1, -1, -1))
    for index in newest_first[:MIN_RECENT]:
        if recent_cost[index] > room:
            break
        chosen_recent.add(index)
        room -= recent_cost[index]
    header = counter.count("Here are PREVIOUS CONVERSATIONS that the HUMAN had with the AI:") + 2
    for block in sorted(blocks, key=lambda b: -b.score):
        cost = _block_cost(block, speakers, counter) + (header if not chosen_blocks else 0)
        if cost <= room:
            chosen_blocks.append(block)
            room -= cost
    for index in newest_first[MIN_RECENT:]:
        if index + 1 < len(recent) and index + 1 not in chosen_recent:
            break  # recent lines stay contiguous up to the new line
        if recent_cost[index] > room:
            break
        chosen_recent.add(index)
        room -= recent_cost[index]
    kept_recent = [recent[i] for i in sorted(chosen_recent)]
    kept_blocks = sorted(chosen_blocks, key=lambda block: block.started_at)
    return kept_recent, kept_blocks

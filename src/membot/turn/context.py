"""The prompt of one turn: the bot's templates filled with the feed, the hints and the new
line, packed under the token budget.

Pieces, as AllegroGraph's chatState names them (templates in :mod:`membot.turn.templates`):

- ``{FEED}``: the current thread's last ``window_size`` lines before the new one, oldest
  first, as ``Speaker: text`` lines; when older lines have scrolled off, the thread's running
  summary opens it. ``{STORY}`` is the story template over the feed (``no_story`` without one).
- ``{HISTORY_MATCHES}`` / ``{EXPERTISE_MATCHES}``: one hint per recalled block, remembered
  summary or document chunk, each quoted as data (:mod:`membot.turn.quoting`) between
  ``<memory citation_id="ID">`` (``<document ...>`` for expertise) and its end tag,
  newline-separated; a block's text starts with its date and thread, a summary's with the
  dates it covers. Ids are ``h`` + the block's first line id, ``s`` + a summary's id, ``e`` +
  a chunk's id.
- Everything recalled or untrusted is quoted: the running summary in ``<summary>``, a tool's
  result in ``<tool_result>``, and every line in transcript form on one line, escaped, so no
  text can close a block or pass for a line the bot said.
- ``{HISTORY_HINTS}`` / ``{EXPERTISE_HINTS}``: the hints templates over those matches, or the
  no-hints strings.

No line appears twice: lines already in the feed, or with the same text as a line of a
stronger block, are left out of a block, and a block left empty is dropped.

Budget: ``context_size - reply_tokens`` tokens for the messages sent (the filled prompt as the
system message, the new line as the user's). Packing order when tight: the new line (cut
only if it alone overflows); the last :data:`MIN_FEED` feed lines; hints, strongest first,
history and expertise alike; older feed lines; the running summary. What did not fit is
counted in ``cut``. The final messages are counted exactly and trimmed further if needed, so
a turn never exceeds the budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from membot.config import BotSettings
from membot.errors import ConfigError
from membot.model import Block, ExpertiseChunk, Line, Role, Summary, utc_now
from membot.turn.quoting import escape, one_line, quote
from membot.turn.templates import TEMPLATE_NAMES, fill
from membot.turn.tokens import TokenCounter

# Tokens a chat template adds around the two messages (role markers, separators).
MESSAGE_OVERHEAD = 12
# Feed lines kept ahead of hints: the turn makes no sense without them.
MIN_FEED = 4

JSON_INSTRUCTIONS = (
    "Insert the list of citations whose hints informed the response into the 'citation_ids' "
    'array. Answer with one JSON object and nothing else: {{"response": "what {BOT} says", '
    '"citation_ids": ["the citation IDs of the hints you used"]}}.'
)


@dataclass(frozen=True)
class Hint:
    """One history or expertise match as it enters the prompt."""

    id: str
    source: str  # "history" or "expertise"
    kind: str  # "lines", "summary" or "chunk"
    text: str
    score: float
    block: Block | None = None
    summary: Summary | None = None
    chunk: ExpertiseChunk | None = None
    # A block line's mark by line id: "current", or "earlier; changed on DATE" for a fact a
    # later recalled line changed (membot.turn.changes).
    marks: Mapping[int, str] = field(default_factory=dict)

    def marked(self, line: Line, text: str) -> str:
        """``text`` (a line of this hint's block) with the line's mark, if it has one."""
        mark = self.marks.get(line.id)
        return f"{text} ({mark})" if mark else text

    @property
    def as_match(self) -> str:
        """The hint as it enters the prompt: quoted data, with its citation id."""
        tag = "document" if self.source == "expertise" else "memory"
        return quote(tag, self.text, citation_id=self.id)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "kind": self.kind,
            "score": round(self.score, 4),
            "text": self.text,
        }
        if self.block is not None:
            data["block"] = self.block.to_json()
        if self.summary is not None:
            data["summary"] = self.summary.to_json()
        if self.chunk is not None:
            data["chunk"] = self.chunk.to_json()
        return data


_EMPTY_HINT = Hint("h0", "history", "lines", "", 0.0)  # sizes the hint templates' frame


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
    """The filled templates and what went into them."""

    text: str  # the whole prompt: prompt_fmt filled
    messages: tuple[dict[str, str], ...]
    tokens: int
    values: dict[str, str]  # every placeholder's value
    feed: tuple[Line, ...]
    history: tuple[Hint, ...]
    expertise: tuple[Hint, ...]
    summary_used: bool
    cut: dict[str, int] = field(default_factory=dict)

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(hint.block for hint in self.history if hint.block is not None)


def now_text(now: datetime) -> str:
    """``{NOW}``: the moment in UTC, whatever zone it was given in (a naive one is local)."""
    return now.astimezone(UTC).strftime("%A %Y-%m-%d %H:%M UTC")


def render_line(line: Line, speakers: Speakers) -> str:
    """``Speaker: text`` on one line (a line break in the text cannot start a fake line)."""
    return f"{one_line(speakers.label(line))}: {one_line(line.text)}"


def transcript_line(line: Line, speakers: Speakers) -> str:
    """A line as it enters a prompt's transcript: escaped, and a tool's result quoted."""
    if line.role == Role.TOOL:
        result = quote("tool_result", line.text, inline=True)
        return f"{escape(one_line(speakers.label(line)))}: {result}"
    return escape(render_line(line, speakers))


def transcript(lines: Sequence[Line], speakers: Speakers) -> str:
    return "\n".join(transcript_line(line, speakers) for line in lines)


def block_hint(block: Block, speakers: Speakers, marks: Mapping[int, str] | None = None) -> Hint:
    """A block as a hint: its date and thread, then its lines, each with its mark from
    ``marks`` (by line id: a fact changed since, or the current one)."""
    date = block.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    # The name as a JSON string: a quote or a line break in it cannot end the header.
    header = f"[{date}, thread {json.dumps(block.thread, ensure_ascii=False)}]"
    own = {line.id: (marks or {})[line.id] for line in block.lines if line.id in (marks or {})}
    hint = Hint(f"h{block.lines[0].id}", "history", "lines", "", block.score, block=block,
                marks=own)  # fmt: skip
    lines = [hint.marked(line, render_line(line, speakers)) for line in block.lines]
    return replace(hint, text="\n".join([header, *lines]))


def summary_hint(summary: Summary, score: float) -> Hint:
    start, end = summary.covers_from.date().isoformat(), summary.covers_to.date().isoformat()
    span = start if start == end else f"{start} to {end}"
    labels = f" ({', '.join(summary.categories)})" if summary.categories else ""
    text = f"[summary of a conversation on {span}{labels}]\n{summary.text}"
    return Hint(f"s{summary.id}", "history", "summary", text, score, summary=summary)


def chunk_hint(chunk: ExpertiseChunk, score: float) -> Hint:
    where = chunk.title + (f" — {chunk.heading}" if chunk.heading else "")
    text = f"[{where}]\n{chunk.text}"
    return Hint(f"e{chunk.id}", "expertise", "chunk", text, score, chunk=chunk)


def without_repeats(blocks: Sequence[Block], feed: Sequence[Line]) -> list[Block]:
    """Blocks with the lines already in the feed, or said in a stronger block, left out."""
    seen_ids = {line.id for line in feed}
    seen_texts = {_norm(line.text) for line in feed}
    kept: dict[int, Block] = {}
    for index, block in sorted(enumerate(blocks), key=lambda pair: -pair[1].score):
        lines = tuple(
            line
            for line in block.lines
            if line.id not in seen_ids and _norm(line.text) not in seen_texts
        )
        seen_ids.update(line.id for line in lines)
        seen_texts.update(_norm(line.text) for line in lines)
        if lines:
            kept[index] = Block(block.thread, block.person, lines, block.score,
                                block.matched_seqs, block.carried)  # fmt: skip
    return [kept[index] for index in sorted(kept)]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def feed_text(feed: Sequence[Line], summary: str, speakers: Speakers) -> str:
    parts = [f"Earlier in this conversation, in summary:\n{quote('summary', summary)}"]
    return "\n".join([*(parts if summary else []), transcript(feed, speakers)]).strip("\n")


def _first_values(settings: BotSettings, query: str, feed: str, now: datetime) -> dict[str, str]:
    """The placeholders known before anything is recalled."""
    return {"NOW": now_text(now), "BOT": settings.bot_name, "HUMAN": settings.human_name,
            "QUERY": query, "FEED": feed}  # fmt: skip


def fill_prompt(
    settings: BotSettings,
    query: str,
    feed: Sequence[Line],
    summary: str,
    history: Sequence[Hint],
    expertise: Sequence[Hint],
    now: datetime,
    match_strings: tuple[str, str] = ("", ""),
) -> dict[str, str]:
    """Every placeholder's value and the filled prompt (key ``PROMPT``), in chatState's order."""
    speakers = Speakers(settings.human_name, settings.bot_name)
    # The new line, where the templates show it, cannot open a block or fake a transcript.
    said = escape(one_line(query))
    values = _first_values(settings, said, feed_text(feed, summary, speakers), now)
    story = settings.story_fmt if values["FEED"] else settings.no_story
    values["STORY"] = fill(story, values)
    values["HISTORY_MATCHES"] = "\n".join(hint.as_match for hint in history)
    values["HISTORY_HINTS"] = fill(
        settings.history_hints_fmt if history else settings.no_history_hints, values
    )
    values["EXPERTISE_MATCHES"] = "\n".join(hint.as_match for hint in expertise)
    values["EXPERTISE_HINTS"] = fill(
        settings.expertise_hints_fmt if expertise else settings.no_expertise_hints, values
    )
    prompt = fill(settings.prompt_fmt, values)
    if settings.citations:
        prompt += "\n" + JSON_INSTRUCTIONS.format(BOT=settings.bot_name)
    values["PROMPT"] = prompt
    values["HISTORY_MATCH_STRING"], values["EXPERTISE_MATCH_STRING"] = match_strings
    return values


def match_string(template: str, settings: BotSettings, query: str, feed: Sequence[Line],
                 story: bool = False, now: datetime | None = None) -> str:  # fmt: skip
    """A match string (history or expertise) filled from the new line and the feed."""
    speakers = Speakers(settings.human_name, settings.bot_name)
    plain_feed = "\n".join(render_line(line, speakers) for line in feed)  # embedded, not prompted
    values = _first_values(settings, query, plain_feed, now or utc_now())
    if story:
        values["STORY"] = fill(settings.story_fmt if feed else settings.no_story, values)
    return fill(template, values).strip() or query


# The least room a prompt must leave its new line (which it holds twice: in the prompt and
# as the person's message), in tokens.
MIN_LINE_ROOM = 32


def prompt_shape(settings: BotSettings) -> tuple[object, ...]:
    """What sizes a prompt before anything is recalled: the budget, the names, the
    templates."""
    names = ("context_size", "reply_tokens", "bot_name", "human_name", *TEMPLATE_NAMES)
    return tuple(getattr(settings, name) for name in names)


def check_room(settings: BotSettings, counter: TokenCounter) -> None:
    """``ConfigError`` when the templates alone, with nothing recalled, leave a prompt no
    room for the person's line: :func:`assemble` then cut the line to nothing and still
    sent a prompt past the budget (a probe's bot_name of 100,000 characters)."""
    frame = _frame(settings, counter, history=False, expertise=False)
    limit = settings.prompt_budget - MESSAGE_OVERHEAD
    if frame + 2 * MIN_LINE_ROOM > limit:
        raise ConfigError(
            f"the bot's templates take {frame:,} tokens of the prompt's {limit:,} "
            f"(context_size {settings.context_size:,} less reply_tokens "
            f"{settings.reply_tokens:,} and {MESSAGE_OVERHEAD} for the messages' framing), "
            f"leaving the person's line under {MIN_LINE_ROOM} tokens (it is sent twice): "
            "shorten them or raise context_size"
        )


def _frame(settings: BotSettings, counter: TokenCounter, *, history: bool, expertise: bool,
           now: datetime | None = None) -> int:  # fmt: skip
    """The tokens of the templates with nothing recalled and no line, counted with the hint
    templates of the sources that have hints (longer than the no-hints strings)."""
    values = fill_prompt(settings, "", [], "", [_EMPTY_HINT] if history else [],
                         [_EMPTY_HINT] if expertise else [], now or utc_now())  # fmt: skip
    return counter.count(values["PROMPT"])


# A new line too long for its prompt keeps its start and its end, this between them.
LEFT_OUT = " [...] "
MIN_EDGES = 16  # tokens of room under which only the line's start is kept


def fit_line(line: str, room: int, counter: TokenCounter) -> str:
    """``line`` within ``room`` tokens: whole if it fits; else its start and its end with
    :data:`LEFT_OUT` between them, half the room each. A long message usually ends with what
    it asks, so a cut that kept only the start lost the question."""
    if counter.count(line) <= room:
        return line
    if room < MIN_EDGES:
        return counter.truncate(line, room)
    half = (room - counter.count(LEFT_OUT)) // 2
    head = counter.truncate(line, half)
    # The shortest start of the end that fits: the counts fall as the start moves right.
    low, high = len(head), len(line)
    while low < high:
        middle = (low + high) // 2
        if counter.count(line[middle:]) <= half:
            high = middle
        else:
            low = middle + 1
    fitted = head.rstrip() + LEFT_OUT + line[low:].lstrip()
    # Joins can tokenise a token longer than the parts: give up a token of the end.
    return fitted if counter.count(fitted) <= room else fit_line(line, room - 1, counter)


def assemble(
    settings: BotSettings,
    query: str,
    feed: Sequence[Line],
    history: Sequence[Hint],
    expertise: Sequence[Hint],
    counter: TokenCounter,
    *,
    summary: str = "",
    now: datetime | None = None,
    match_strings: tuple[str, str] = ("", ""),
) -> Prompt:
    """Fill the templates with as much as fits in the bot's budget (see the module doc)."""
    now = now or utc_now()
    budget = settings.prompt_budget
    limit = budget - MESSAGE_OVERHEAD

    def size(
        feed_now: Sequence[Line],
        summary_now: str,
        history_now: Sequence[Hint],
        expertise_now: Sequence[Hint],
        query_now: str,
    ) -> int:
        values = fill_prompt(settings, query_now, feed_now, summary_now, history_now,
                             expertise_now, now)  # fmt: skip
        return counter.count(values["PROMPT"]) + counter.count(query_now)

    # The frame: the templates with nothing recalled, counted with the hint templates of the
    # sources that have hints (longer than the no-hints strings), so packing by parts rarely
    # overshoots and the whole prompt is usually tokenised once.
    frame = _frame(settings, counter, history=bool(history), expertise=bool(expertise), now=now)
    # The new line: whole, unless it alone (twice: in the prompt and as the user's message)
    # overflows the budget.
    room = max((limit - frame) // 2 - 2, 0)
    text = fit_line(query, room, counter)
    speakers = Speakers(settings.human_name, settings.bot_name)
    keep_feed, keep_summary, keep_hints = _choose(
        feed, summary, [*history, *expertise], text, speakers, counter, limit - frame
    )

    def hints_of(source: str) -> list[Hint]:
        return [hint for hint in keep_hints if hint.source == source]

    total = size(keep_feed, keep_summary, hints_of("history"), hints_of("expertise"), text)
    while total > limit:
        # Joins can tokenise a little longer than the parts: drop the least needed pieces
        # until their own counts cover the excess, then count the whole prompt again.
        excess = total - limit
        while excess > 0:
            if keep_summary:
                excess -= counter.count(keep_summary) + 12
                keep_summary = ""
            elif len(keep_feed) > MIN_FEED or (keep_feed and not keep_hints):
                excess -= _line_cost(keep_feed[0], speakers, counter)
                keep_feed = keep_feed[1:]
            elif keep_hints:
                weakest = min(keep_hints, key=lambda hint: hint.score)
                excess -= counter.count(weakest.as_match) + 1
                keep_hints.remove(weakest)
            elif text:
                shorter = fit_line(query, max(counter.count(text) - excess // 2 - 2, 0), counter)
                excess -= 2 * (counter.count(text) - counter.count(shorter))
                text = shorter
                if not text:
                    break
            else:
                break
        if not (keep_summary or keep_feed or keep_hints or text):
            break
        total = size(keep_feed, keep_summary, hints_of("history"), hints_of("expertise"), text)
    history_kept, expertise_kept = hints_of("history"), hints_of("expertise")
    values = fill_prompt(settings, text, keep_feed, keep_summary, history_kept,
                         expertise_kept, now, match_strings)  # fmt: skip
    cut = {
        "feed_lines": len(feed) - len(keep_feed),
        "summary": int(bool(summary) and not keep_summary),
        "history_hints": len(history) - len(history_kept),
        "expertise_hints": len(expertise) - len(expertise_kept),
        "new_line_tokens": counter.count(query) - counter.count(text),
    }
    messages = (
        {"role": "system", "content": values["PROMPT"]},
        {"role": "user", "content": text},
    )
    return Prompt(
        text=values["PROMPT"],
        messages=messages,
        tokens=total + MESSAGE_OVERHEAD,
        values=values,
        feed=tuple(keep_feed),
        history=tuple(history_kept),
        expertise=tuple(expertise_kept),
        summary_used=bool(keep_summary),
        cut={name: value for name, value in cut.items() if value},
    )


def _choose(
    feed: Sequence[Line],
    summary: str,
    hints: Sequence[Hint],
    query: str,
    speakers: Speakers,
    counter: TokenCounter,
    room: int,
) -> tuple[list[Line], str, list[Hint]]:
    """What fits, by the packing order, from token counts of the parts (each line's count is
    stored with it, so a turn re-tokenises only its final prompt)."""
    room -= counter.count(query) * 2 + 2
    newest_first = list(reversed(feed))
    keep_feed: list[Line] = []
    for line in newest_first[:MIN_FEED]:
        cost = _line_cost(line, speakers, counter)
        if cost > room:
            break
        keep_feed.append(line)
        room -= cost
    keep_hints: list[Hint] = []
    for hint in sorted(hints, key=lambda hint: -hint.score):
        cost = counter.count(hint.as_match) + 1
        if cost <= room:
            keep_hints.append(hint)
            room -= cost
    for line in newest_first[len(keep_feed) :]:
        cost = _line_cost(line, speakers, counter)
        if cost > room:
            break
        keep_feed.append(line)
        room -= cost
    keep_summary = ""
    if summary and len(keep_feed) == len(feed):
        cost = counter.count(summary) + 12
        if cost <= room:
            keep_summary = summary
    # Hints keep their given order (history: time order; expertise: best first).
    order = {id(hint): index for index, hint in enumerate(hints)}
    keep_hints.sort(key=lambda hint: order[id(hint)])
    return list(reversed(keep_feed)), keep_summary, keep_hints


def _line_cost(line: Line, speakers: Speakers, counter: TokenCounter) -> int:
    return line.tokens + counter.count(f"{speakers.label(line)}:") + 2


def hints_json(hints: Sequence[Hint]) -> list[dict[str, Any]]:
    return [hint.to_json() for hint in hints]

"""The prompt for a model too small to read the full one (a bot's ``prompt_style`` small).

A 135M-parameter model (the bundled SmolLM2) given the templates' prompt said the answer for
3 of the 27 LoCoMo questions whose prompt held it (docs/answers.md): it loses the fact among
hundreds of tokens of instructions, tags and transcript, and copies their form. It reads a
short passage better. So this prompt holds:

- a system message: one sentence saying who the bot is and who it talks with, then
  :data:`MEMORIES` recalled hints (blocks, summaries or passages): those whose matched line
  said by a person holds most of the question's words, then the best by score, the first of
  them last; each opened by its date, a block's lines as reported speech (``Caroline said:
  "…"``), the people's lines only (:func:`shown_lines`); and one line asking for an answer
  from them in one sentence, or "don't know";
- the last :data:`FEED_LINES` lines of the thread as the chat's earlier messages (the
  thread's lines before them are searched like any other: ``Bot`` recalls with this feed as
  its window, not the bot's ``window_size``);
- the person's message as written, last.

Recalled text is escaped as in the full prompt (:func:`membot.turn.quoting.escape`: no chat
template marker gets through) and written one line per line, but without the quoting tags:
the small model copies them into its reply. The layout was chosen by measurement among
others (docs/answers.md, "A prompt for a small model").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from membot.config import BotSettings
from membot.model import Line, Role
from membot.recall.bm25 import STOPWORDS, index_words, query_terms
from membot.recall.duplicates import statements
from membot.turn.context import MESSAGE_OVERHEAD, Hint, Prompt, Speakers, fit_line, now_text
from membot.turn.quoting import escape, one_line
from membot.turn.templates import DEFAULTS as TEMPLATES
from membot.turn.templates import TEMPLATE_NAMES, fill
from membot.turn.tokens import TokenCounter

MEMORIES = 2  # hints in the prompt, the best by score
FEED_LINES = 2  # the thread's last lines, as earlier messages
REPLY_TOKENS = 64  # the reply's cap: a sentence or two
SYSTEM = "You are {BOT}, a friendly assistant with a memory of past conversations with {HUMAN}."
INSTRUCTION = (
    "Answer the question in one sentence using only the memories above. "
    "If they do not hold the answer, say you don't know."
)


def memory_text(hint: Hint, speakers: Speakers) -> str:
    """A hint as the small prompt shows it: its date, then what each line's speaker said, in
    quotes. Not the transcript's ``Speaker: text``: given that form the model goes on
    writing the transcript (67 replies of 70 against 12, docs/answers.md)."""
    if hint.block is not None:
        when = _day(hint.block.lines[0].created_at)
        said = [escape(hint.marked(line, f'{one_line(speakers.label(line))} said: '
                                         f'"{one_line(line.text)}"'))
                for line in shown_lines(hint.block.lines)]  # fmt: skip
        return "\n".join([f"On {when}:", *said])
    if hint.summary is not None:
        start, end = _day(hint.summary.covers_from), _day(hint.summary.covers_to)
        span = start if start == end else f"{start} to {end}"
        return f"On {span}, in summary:\n{escape(hint.summary.text.strip())}"
    return escape(hint.text.strip())  # a passage, opened by its title


def shown_lines(lines: Sequence[Line]) -> list[Line]:
    """The lines of a block the small prompt shows: what people said (and tools' results),
    not the bot's own replies; all of them where the block holds nothing else. The small
    model's earlier replies are often invented ("My cat is called Sam." to *What is my cat
    called?*), and they echo the question's words, so they were recalled first when the
    question came again and the model copied them: asked the same questions a second time in
    a new thread, 21 of 72 replies held the answer with them, 31 without (docs/answers.md,
    "The bot's own replies left out")."""
    return [line for line in lines if line.role != Role.BOT] or list(lines)


def question_words(hint: Hint, query: str, speakers: Speakers) -> int:
    """How many of the query's content words (not stopwords, not the speakers' names) the
    hint holds: a block, in the matched line said by a person that holds most of them, read
    in its sentences that do not ask (0 for a block matched only through the bot's replies or
    through the question asked before, which repeat the question's words without answering
    it); another hint, in its text. Chit-chat recalled for a name or a greeting
    holds few; the line with the answer usually repeats the question's words ("What did the
    charity race raise awareness for?", "I ran a charity race for mental health")."""
    if hint.block is None:
        return len(content_words(hint.text) & content_words(query))
    lines = hint.block.lines
    matched = [line for line in lines if line.seq in hint.block.matched_seqs] or list(lines)
    matched = [line for line in matched if line.role != Role.BOT]
    names = {word for line in lines for word in content_words(speakers.label(line))}
    wanted = content_words(query) - names
    stated = (" ".join(statements(line.text)) for line in matched)
    return max((len(content_words(text) & wanted) for text in stated), default=0)


def content_words(text: str) -> set[str]:
    """The stems of ``text``'s words that are not stopwords, none shorter than three letters."""
    words = [word for word in query_terms(text, STOPWORDS) if len(word) > 2]
    return {stem for word in words if word not in STOPWORDS for stem in index_words(word)}


def resolved_style(settings: BotSettings, llm: object) -> str:
    """``small`` or ``full``: the bot's ``prompt_style``, with ``auto`` read as small for a
    model that says it cannot read a long prompt (``reads_long_prompts`` false, as the
    bundled SmolLM2) while the prompt templates are the defaults (a bot whose templates were
    written for it keeps them)."""
    if settings.prompt_style != "auto":
        return settings.prompt_style
    if getattr(llm, "reads_long_prompts", True):
        return "full"
    own = any(getattr(settings, name) != TEMPLATES[name] for name in TEMPLATE_NAMES)
    return "full" if own else "small"


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%-d %B %Y")


def assemble_small(
    settings: BotSettings,
    query: str,
    feed: Sequence[Line],
    history: Sequence[Hint],
    expertise: Sequence[Hint],
    counter: TokenCounter,
    *,
    now: datetime,
    match_strings: tuple[str, str] = ("", ""),
) -> Prompt:
    """The small prompt, within the bot's budget: the weakest memory, then the oldest feed
    line, then the end of a long message are given up first."""
    speakers = Speakers(settings.human_name, settings.bot_name)
    # A block chosen for its score alone was often chit-chat around a name (docs/answers.md)
    chosen = sorted([*history, *expertise],
                    key=lambda hint: (-question_words(hint, query, speakers), -hint.score)
                    )[:MEMORIES]  # fmt: skip
    kept_feed = list(feed[-FEED_LINES:]) if FEED_LINES else []
    limit = settings.prompt_budget - MESSAGE_OVERHEAD * (2 + len(kept_feed))
    text = fit_line(query, max(limit // 2, 0), counter)
    while True:
        messages = _messages(settings, text, kept_feed, chosen, speakers)
        excess = sum(counter.count(message["content"]) for message in messages) - limit
        if excess <= 0:
            break
        if chosen:
            chosen.pop()
        elif kept_feed:
            kept_feed.pop(0)
        elif text:
            text = fit_line(text, max(counter.count(text) - excess, 0), counter)
        else:
            break
    tokens = sum(counter.count(message["content"]) for message in messages)
    cut = {
        "feed_lines": len(feed) - len(kept_feed),
        "history_hints": len(history) - sum(hint.source == "history" for hint in chosen),
        "expertise_hints": len(expertise) - sum(hint.source == "expertise" for hint in chosen),
        "new_line_tokens": counter.count(query) - counter.count(text),
    }
    return _prompt(settings, text, kept_feed, chosen, messages, tokens, now, match_strings,
                   {name: value for name, value in cut.items() if value})  # fmt: skip


def _messages(settings: BotSettings, text: str, feed: Sequence[Line], chosen: Sequence[Hint],
              speakers: Speakers) -> list[dict[str, str]]:  # fmt: skip
    system = fill(SYSTEM, {"BOT": settings.bot_name, "HUMAN": settings.human_name})
    if chosen:  # the first chosen last: nearest the question
        memories = "\n\n".join(memory_text(hint, speakers) for hint in reversed(chosen))
        system += f"\nMemories:\n{memories}\n\n{INSTRUCTION}"
    messages = [{"role": "system", "content": system}]
    for line in feed:
        role = "assistant" if line.role == Role.BOT else "user"
        said = one_line(line.text)
        if line.role not in (Role.BOT, Role.HUMAN):
            said = f"{one_line(speakers.label(line))}: {said}"
        messages.append({"role": role, "content": escape(said)})
    messages.append({"role": "user", "content": escape(text)})
    return messages


def _prompt(settings: BotSettings, text: str, kept_feed: Sequence[Line],
            chosen: Sequence[Hint], messages: list[dict[str, str]], tokens: int, now: datetime,
            match_strings: tuple[str, str], cut: dict[str, int]) -> Prompt:  # fmt: skip
    speakers = Speakers(settings.human_name, settings.bot_name)
    kept_history = tuple(hint for hint in chosen if hint.source == "history")
    kept_expertise = tuple(hint for hint in chosen if hint.source == "expertise")
    values = {
        "NOW": now_text(now), "BOT": settings.bot_name, "HUMAN": settings.human_name,
        "QUERY": escape(one_line(text)),
        "FEED": "\n".join(escape(f"{speakers.label(line)}: {one_line(line.text)}")
                          for line in kept_feed),
        "STORY": "",
        "HISTORY_MATCHES": "\n\n".join(memory_text(hint, speakers) for hint in kept_history),
        "EXPERTISE_MATCHES": "\n\n".join(memory_text(hint, speakers) for hint in kept_expertise),
    }  # fmt: skip
    values["HISTORY_HINTS"] = values["HISTORY_MATCHES"]
    values["EXPERTISE_HINTS"] = values["EXPERTISE_MATCHES"]
    values["PROMPT"] = "\n\n".join(message["content"] for message in messages)
    values["HISTORY_MATCH_STRING"], values["EXPERTISE_MATCH_STRING"] = match_strings
    return Prompt(
        text=values["PROMPT"],
        messages=tuple(messages),
        tokens=tokens + MESSAGE_OVERHEAD * len(messages),
        values=values,
        feed=tuple(kept_feed),
        history=kept_history,
        expertise=kept_expertise,
        summary_used=False,
        cut=cut,
    )

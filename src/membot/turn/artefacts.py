"""What a small model leaves in its reply besides the answer, and the one step that takes it out.

Seen in the bundled SmolLM2's replies (docs/answers.md), each a kind of :data:`ARTEFACTS`:

- ``speaker label``: the reply opens with a speaker's name, as the transcript writes lines
  ("AI: …", "HUMAN (not in the first person): …", "Caroline: …", any name the bot, the
  person or a recalled line speaks as): the label is left out, and where the model wrote
  another's line before the bot's, that line too;
- ``transcript continued``: after its answer the model writes the next lines of the
  conversation ("…\\nCaroline: Hey, Melanie!"): the reply is cut there;
- ``opener``: "The AI responds:", "Here is the response:", "The AI's utterance is", "The
  answer is:" (before a colon or a quote: "The answer is 42." is an answer);
- ``markup``: tags it copies or invents (``<memory citation_id="h697">``, ``<response text>``,
  ``<|im_end|>``);
- ``question repeated``: the person's question written back; a reply that only repeats it
  is empty;
- ``sentence repeated``: a sentence of the reply written again ("I'm glad you're learning the
  cello. I'm glad you're learning the cello. …", until the token cap): the reply is cut
  before the second one;
- ``previous reply repeated``: a sentence of the bot's previous reply in the thread written
  again (the small prompt shows it as the chat's last message, and the small model copies
  it: "Bruno is a golden retriever." to *Where do I work?* after *What breed is Bruno?*):
  the reply is cut before it. Only where the turn gives that reply (the small prompt's);
- ``unfinished sentence``: a reply the token cap stopped in the middle of a sentence ("… I'm
  glad you're enjoying your"): the unfinished sentence is left out where a finished one comes
  before it. Only where the turn asks for whole sentences (the small prompt's, whose replies
  are capped at a sentence or two).

:func:`clean_reply` removes them all and says which it found; a reply left with no word is
empty, and the bot answers with its ``no_response`` instead (``Bot.turn``). While a reply is
streamed, :func:`shown_part` gives what may be shown so far: what could still turn out to be
one of these is held back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from membot.turn.quoting import TAGS

# How a turn's notes say what the clean-up took out (``Bot.turn``; read back by
# :func:`left_out_of`, e.g. for a benchmark's records).
LEFT_OUT_NOTE = "left out of the reply: "

ARTEFACTS = (
    "speaker label",
    "transcript continued",
    "opener",
    "markup",
    "question repeated",
    "sentence repeated",
    "previous reply repeated",
    "unfinished sentence",
)

# Names every transcript may use for its two sides, besides the bot's own two.
BOT_NAMES = ("ai", "assistant", "bot")
OTHER_NAMES = ("human", "user")
# A label: a name, perhaps with a parenthesis ("HUMAN (not in the first person)"), perhaps
# emphasised, perhaps "said" (the small prompt's form of a memory) or "says", then a colon.
_LABEL_TAIL = r"(?:\s*\([^()\n]{0,60}\))?[*_]*(?:\s+(?:said|says))?\s*:(?!//)"
# Tags: membot's quoting tags and the ones a model makes up for its answer, opening or
# closing, with any attributes; and chat templates' markers.
_MARKUP = re.compile(
    rf"</?\s*(?:{'|'.join(TAGS)}|response|reply|answer|citation|hint|utterance)\b[^<>\n]{{0,80}}>"
    r"|<\|[a-z_]{1,20}\|>(?:assistant|user|system)?",
    re.IGNORECASE,
)
_OPENER_PHRASES = (
    *(f"{here} {whose} {what}" for here in ("here is", "here's")
      for whose in ("the", "my", "a", "an") for what in ("response", "reply", "answer")),
    *(f"{whose} {what} is" for whose in ("the", "my") for what in ("response", "reply", "answer")),
    "response", "reply", "answer",
)  # fmt: skip
_OPENER_VERBS = ("responds", "replies", "answers", "says", "response is", "reply is",
                 "answer is", "utterance is", "response", "utterance")  # fmt: skip
_QUOTES = "\"'“”‘’«»"
_WORD = re.compile(r"[^\W_]+")
# A sentence's end: its mark(s) and the space or line break after them.
_SENTENCE_END = re.compile(r"[.!?]+[" + _QUOTES + r")]*(?:\s+|$)|\n+")
# A sentence this short written twice ("Yes. Yes.") may be meant.
_REPEAT_WORDS = 3


@dataclass(frozen=True)
class ReplyContext:
    """What a reply's artefacts are recognised by: the names the bot speaks as, the names of
    everyone else in the prompt, and the person's question."""

    bot_names: tuple[str, ...]
    other_names: tuple[str, ...]
    question: str = ""
    previous: str = ""  # the bot's previous reply, whose sentences a reply may not repeat
    whole_sentences: bool = False  # a reply the cap stops mid-sentence ends at the one before

    @classmethod
    def of(cls, bot_name: str, human_name: str, speakers: Iterable[str] = (),
           question: str = "", previous: str = "", *,
           whole_sentences: bool = False) -> ReplyContext:  # fmt: skip
        """The context of a turn: its bot's and person's names, the speakers of the lines
        in its prompt, the question, the bot's previous reply where it must not be
        repeated, and whether the reply ends with a whole sentence."""
        bots = _names([bot_name, *BOT_NAMES])
        others = _names([human_name, *OTHER_NAMES, *speakers])
        return cls(bots, tuple(name for name in others if name not in bots), question,
                   previous, whole_sentences)  # fmt: skip

    def said_before(self) -> list[tuple[str, ...]]:
        """The words of each sentence of the previous reply long enough to count."""
        spans = _sentences(self.previous)
        said = (tuple(_words(self.previous[start:end])) for start, end in spans)
        return [words for words in said if len(words) >= _REPEAT_WORDS]

    def openers(self) -> tuple[str, ...]:
        """The openers this bot's replies may start with, lower case, longest first."""
        said = [
            f"{article}{name}{possessive} {verb}"
            for name in self.bot_names
            for article in ("the ", "")
            for possessive in ("", "'s")
            for verb in _OPENER_VERBS
        ]
        return tuple(sorted({*said, *_OPENER_PHRASES}, key=len, reverse=True))

    def label(self, line: str) -> tuple[str, str] | None:
        """``("bot" or "other", the rest of the line)`` when ``line`` opens with a label."""
        for side, names in (("bot", self.bot_names), ("other", self.other_names)):
            for name in names:
                match = re.match(rf"\s*[*_]*{re.escape(name)}{_LABEL_TAIL}\s*", line, re.I)
                if match:
                    return side, line[match.end() :]
        return None


def _names(names: Iterable[str]) -> tuple[str, ...]:
    kept = {" ".join(name.split()).lower() for name in names if name and name.strip()}
    return tuple(sorted(kept, key=len, reverse=True))  # "AI Helper" before "AI"


@dataclass(frozen=True)
class Cleaned:
    text: str
    found: tuple[str, ...]  # the kinds of ARTEFACTS taken out, in that order


def clean_reply(text: str, context: ReplyContext, *, at_cap: bool = False) -> Cleaned:
    """``text`` without the artefacts of :data:`ARTEFACTS`; empty when no word is left.
    ``at_cap``: the model was stopped by the reply's token cap, not by its own end."""
    found: set[str] = set()
    text = _without_markup(text, found)
    for _ in range(3):  # an opener may hold the question: 'The AI's utterance is "Q?"', or a
        before = text  # label: 'The answer is: HUMAN said: "…"'
        text = _first_turn(text, context, found)
        text = _without_opener(text, context, found)
        text = _without_question(text, context.question, found)
        if text == before:
            break
    text = _without_repeats(text, found, context.said_before())
    unfinished = _unfinished_start(text) if at_cap and context.whole_sentences else None
    if unfinished is not None:
        found.add("unfinished sentence")
        text = text[:unfinished].rstrip()
    if not _WORD.search(text):
        text = ""
    return Cleaned(text, tuple(kind for kind in ARTEFACTS if kind in found))


def left_out_of(notes: Iterable[str]) -> list[str]:
    """The kinds of :data:`ARTEFACTS` a turn's ``notes`` say were left out of its reply."""
    kinds: list[str] = []
    for note in notes:
        for part in note.split("; "):
            if part.startswith(LEFT_OUT_NOTE):
                named = part[len(LEFT_OUT_NOTE) :].split(", ")
                kinds += [kind for kind in named if kind in ARTEFACTS]
    return kinds


def _without_markup(text: str, found: set[str]) -> str:
    cleaned = _MARKUP.sub("", text)
    if cleaned != text:
        found.add("markup")
        # "Sure <response text>." leaves "Sure ." behind
        cleaned = re.sub(r"[ \t]+([.,!?;:])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned))
    return cleaned.strip()


def _first_turn(text: str, context: ReplyContext, found: set[str]) -> str:
    """The reply's own turn, without its label, and cut at the next labelled line. A reply
    that opens with another speaker's line and goes on with the bot's ("HUMAN: <the
    question>\nAI: …") starts at the bot's; one that answers under another's name
    ("Caroline: It was a necklace.") keeps what it said."""
    lines = text.split("\n")
    labels = [context.label(line) for line in lines]
    start = next((index for index, line in enumerate(lines) if line.strip()), 0)
    speakers = [label[0] if label is not None else None for label in labels]
    if speakers[start] == "other":
        start = next(
            (index for index in range(start + 1, len(lines)) if speakers[index] == "bot"), start
        )
    kept: list[str] = []
    for line, labelled in zip(lines[start:], labels[start:], strict=True):
        if labelled is None:
            kept.append(line)
        elif any(each.strip() for each in kept):
            found.add("transcript continued")
            break
        else:
            found.add("speaker label")
            kept = [_without_quotes(labelled[1])]
    return "\n".join(kept).strip()


def _without_opener(text: str, context: ReplyContext, found: set[str]) -> str:
    lowered = text.lower()
    for opener in context.openers():
        if lowered.startswith(opener):
            rest = text[len(opener) :]
            match = re.match(r"\s*[:,\-–—]\s*|\s+(?=[" + _QUOTES + r"<])", rest)
            if match or not rest.strip():
                found.add("opener")
                return _unquoted(rest[match.end() :] if match else "")
    return text


def _unquoted(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES + ".":
        inner = text[1:].rstrip(".").rstrip(_QUOTES)
        if not any(quote in inner for quote in _QUOTES):
            return inner.strip()
    return text


def _without_quotes(said: str) -> str:
    """A labelled line's text without the quotes around it ('Melanie said: "…"'), the
    opening one dropped as soon as it is written, so a stream shows what is stored."""
    said = said.strip()
    if not said or said[0] not in _QUOTES:
        return said
    said = said[1:]
    end = said.rstrip(".!?")
    if end and end[-1] in _QUOTES:
        said = end[:-1] + said[len(end) :]
    return said


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _without_question(text: str, question: str, found: set[str]) -> str:
    """``text`` without the question written back, wherever it stands, whole."""
    words = _words(question)
    if len(words) < 3:  # "ok thanks" written back may be the answer itself
        return text
    pattern = r"[\W_]+".join(re.escape(word) for word in words)
    spaced = rf"[{_QUOTES}]?\b{pattern}\b[?.!]*[{_QUOTES}]?"
    cleaned = re.sub(spaced, "", text, flags=re.IGNORECASE)
    if cleaned == text:
        return text
    found.add("question repeated")
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip(" \t\n:,-")


def _sentences(text: str) -> list[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends (the last may be unfinished)."""
    spans, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        if end.end() > start and text[start : end.start()].strip():
            spans.append((start, end.end()))
        start = end.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def _without_repeats(text: str, found: set[str], before: list[tuple[str, ...]]) -> str:
    """``text`` cut before the first sentence of at least ``_REPEAT_WORDS`` words that it has
    written before, or that the bot's previous reply held (``before``): a small model, once
    it repeats a sentence, writes it until the cap."""
    previous = set(before)
    seen: set[tuple[str, ...]] = set()
    for start, end in _sentences(text):
        words = tuple(_words(text[start:end]))
        if len(words) >= _REPEAT_WORDS and words in seen | previous:
            found.add("sentence repeated" if words in seen else "previous reply repeated")
            return text[:start].rstrip()
        seen.add(words)
    return text


def _unfinished_start(text: str) -> int | None:
    """Where the last sentence of ``text`` starts, when it is unfinished (no mark ends it) and
    a sentence comes before it; None otherwise (a reply of one unfinished sentence is kept:
    it is all the model said)."""
    spans = _sentences(text)
    if len(spans) < 2 or _SENTENCE_END.search(text[spans[-1][0] :]):
        return None
    return spans[-1][0]


def _repeat_begun(text: str, before: list[tuple[str, ...]]) -> bool:
    """Whether the last sentence of ``text``, unfinished, may be the start of one written
    before in it or in the bot's previous reply (``before``): a stream holds it back until
    it is not."""
    spans = _sentences(text)
    if not spans or _SENTENCE_END.search(text[spans[-1][0] :]):
        return False
    last = _words(text[spans[-1][0] :])
    if not last:
        return False
    written = [_words(text[start:end]) for start, end in spans[:-1]]
    for earlier in [*written, *(list(words) for words in before)]:
        if len(earlier) >= _REPEAT_WORDS and len(last) <= len(earlier):
            *whole, half = last  # the last word may be half written
            if whole == earlier[: len(whole)] and earlier[len(whole)].startswith(half):
                return True
    return False


def shown_part(text: str, context: ReplyContext) -> str | None:
    """What of a reply still being written may be shown: its clean form, once nothing at its
    start could still become an artefact (a label, an opener, the question, a tag) and
    without a last line that could still open with a label or a tag still open; None while
    the start is undecided."""
    start = text.lstrip().lower()
    if _may_become_start(start, context):
        return None
    head, newline, last = text.rpartition("\n")
    if newline and _may_become_label(last, context):
        text = head
    opened = text.rfind("<")
    if opened >= 0 and ">" not in text[opened:] and len(text) - opened < 80:
        text = text[:opened]
    cleaned = clean_reply(text, context).text
    if _repeat_begun(cleaned, context.said_before()):  # shown once it is no sentence said again
        cleaned = cleaned[: _sentences(cleaned)[-1][0]].rstrip()
    unfinished = _unfinished_start(cleaned) if context.whole_sentences else None
    if unfinished is not None:  # shown once it ends: the cap may stop it first
        cleaned = cleaned[:unfinished].rstrip()
    # what is left after an opener may itself be the start of one ('… is "What does')
    return None if _may_become_start(cleaned.lower(), context) else cleaned


def _may_become_start(start: str, context: ReplyContext) -> bool:
    if not start:
        return True
    if "\n" not in start and _may_become_label(start, context):
        return True
    if any(opener.startswith(start) for opener in context.openers()):
        return True
    said, asked = _words(start), _words(context.question)
    if len(asked) >= 3 and 0 < len(said) <= len(asked):
        *whole, last = said  # the last word may be half written
        if whole == asked[: len(whole)] and asked[len(whole)].startswith(last):
            return True  # it may be writing the question back
    return start.startswith("<") and ">" not in start


def _may_become_label(line: str, context: ReplyContext) -> bool:
    """Whether ``line`` is, so far, the start of a label: part of a name, or a name and part
    of what may follow it before the colon ("HUMAN (not in")."""
    stripped = line.strip().lstrip("*_").lower()
    if not stripped:
        return True
    for name in (*context.bot_names, *context.other_names):
        if name.startswith(stripped):
            return True
        if stripped.startswith(name) and _PARTIAL_TAIL.fullmatch(stripped[len(name) :]):
            return True
    return False


_PARTIAL_TAIL = re.compile(
    r"[*_]*(?:\s*\([^()\n]{0,60}\)?)?[*_]*(?:\s+s(?:a(?:i(?:d)?|y(?:s)?)?)?)?\s*"
)

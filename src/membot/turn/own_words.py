"""Key points and running summaries in the person's own words, for a model too small to
write them.

The bundled SmolLM2-135M cannot write either. Held to the key points' JSON shape it copies
the instruction's example ("HUMAN is allergic to peanuts") and a placeholder ("...") whatever
the thread said, so :mod:`membot.memory.grounding` leaves everything out and remembering kept
nothing. Folding lines into a running summary, it wrote "AI: My sister Ana lives in Porto
and is training for a half marathon" from "My sister Ana lives in Porto" and "I'm training
for a half marathon": every word was said, so the check let it by; and each fold cost a
model call after the reply.

An LLM that declares ``writes_summaries = False`` is not asked. The key points, and the
running summary, are then the person's own statements, each dated by its line and marked as
said by them ("2026-11-23: HUMAN said: I just adopted a cat named Miso"): what was said, so
nothing invented. A question, a greeting or an acknowledgement ("ok thanks") holds nothing
about the person and is left out, as is a sentence that reads as an order to a model. The
key points still go through the grounding check and the bot's remember policy, as a model's
would; the running summary's rows, once said, are not checked again (a row of an earlier
day would fail the date check against a later day's lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from membot.config import BotSettings
from membot.memory.grounding import content_stems, name_words, reads_as_instruction
from membot.model import Line, Role
from membot.sentences import sentences

# Fewer content words, and a sentence is small talk ("ok thanks", "sounds good"); one is
# enough where the person speaks of themselves ("I'm vegan", "my knee hurts").
MIN_CONTENT_WORDS = 2
MAX_POINT_CHARS = 300  # a long line keeps its first sentences up to this length
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", re.I)
_NUMBER = re.compile(r"\d")
# Chinese and Japanese write a sentence without spaces between its words: counted by
# characters instead, at least MIN_UNSPACED ("谢谢" and "你好吗" are small talk).
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
MIN_UNSPACED = 4
_TRAILING_ELLIPSIS = re.compile(r"\s*(?:\.{2,}|…)+$")
_ELLIPSIS = re.compile(r"\s*(?:\.{3,}|…)+\s*")  # read by membot.memory.grounding as a placeholder
# Words of greeting and acknowledgement: not content ("ok thanks bye", "good morning").
SMALL_TALK = frozenset({
    "hi", "hello", "hey", "thanks", "thank", "bye", "goodbye", "okay", "ok", "yes", "yeah",
    "yep", "sure", "cool", "great", "nice", "good", "fine", "lol", "haha", "please", "sorry",
    "welcome", "morning", "evening", "night", "later", "cheers", "awesome",
    # said of oneself, still small talk: "I see", "my bad", "I think so", "I got it"
    "see", "bad", "pleasure", "think", "got", "guess", "know", "agree", "understand", "mean",
})  # fmt: skip
# The same in scripts written without spaces, read as whole sentences.
SMALL_TALK_UNSPACED = frozenset({
    "谢谢", "谢谢你", "你好", "再见", "哈哈", "哈哈哈", "哈哈哈哈", "好的", "ありがとう",
    "ありがとうございます", "こんにちは", "おはよう", "おはようございます", "さようなら",
    "すみません", "はい", "そうですね",
})  # fmt: skip
_QUESTION_END = re.compile(r"[?？]$|吗$")
# A greeting or an "ok" opening a sentence that goes on to tell something ("Hi, I just
# adopted a cat"): not part of what is kept.
_OPENING = re.compile(
    r"^(?:(?:hi|hello|hey|ok|okay|oh|so|well|yes|yeah|thanks|thank you)(?: there)?[\s,!.:;]+)+",
    re.IGNORECASE,
)
# Chinese and Japanese end a sentence with a full-width mark and no space after it.
_UNSPACED_END = re.compile(r"(?<=[。！？])(?=\S)")
_UNSPACED_JOIN = re.compile(r"(?<=[。！？]) ")


# A person's name a kept point can carry: one word as SAID_LABEL reads it, not a channel's
# stand-in for a name (a texter is "sms-" and a keyed hash: membot.service.text_messages).
_PLAIN_NAME = re.compile(r"[\w.-]{1,40}")


def person_label(line: Line, settings: BotSettings, person: str) -> str:
    """How a kept point names who said ``line``: as the line names them (its speaker), else
    by their own name in membot ("ana"), not the bot's word for anyone it talks with
    (``human_name``, "Student"), which is left for a person known only by a stand-in."""
    if line.speaker:
        return line.speaker
    if settings.human_name.casefold() == person.casefold():
        return settings.human_name  # their name, as the bot's owner wrote it ("Alice")
    if _PLAIN_NAME.fullmatch(person) and not person.startswith("sms-"):
        return person
    return settings.human_name


def person_name(lines: Sequence[Line], settings: BotSettings, person: str) -> str:
    """How the key points of a thread name its person: as their latest line names them
    (:func:`person_label`)."""
    said = [line for line in lines if line.role == Role.HUMAN]
    return person_label(said[-1], settings, person) if said else settings.human_name


def own_statements(
    lines: Sequence[Line], settings: BotSettings, person: str, limit: int = 20
) -> list[str]:
    """``person``'s statements in ``lines`` as dated points, each naming them
    (:func:`person_label`), in the order said: at most ``limit``, the ones with the
    most content words where there are more. The speakers' names are not content words."""
    ignore = SMALL_TALK | _names(settings, person)
    found: list[tuple[int, int, str]] = []  # (content words, position, point)
    seen: set[str] = set()
    for line in lines:
        if line.role != Role.HUMAN:
            continue
        said = _statement(line.text, ignore)
        key = " ".join(said.lower().split())
        if not said or key in seen:
            continue
        seen.add(key)
        day = line.created_at.date().isoformat()
        point = f"{day}: {person_label(line, settings, person)} said: {said}"
        found.append((len(content_stems(said, ignore)), len(found), point))
    chosen = sorted(found, key=lambda item: (-item[0], item[1]))[:limit]
    return [point for _, _, point in sorted(chosen, key=lambda item: item[1])]


def _statement(text: str, ignore: frozenset[str]) -> str:
    """The sentences of ``text`` that tell something (not questions, not small talk, not
    orders to a model), on one line, cut at a sentence (or a word) to ``MAX_POINT_CHARS``."""
    kept: list[str] = []
    # An ellipsis is a pause, not a sentence's end: "I work... at the hospital" stays whole.
    text = _ELLIPSIS.sub(" - ", _TRAILING_ELLIPSIS.sub("", " ".join(text.split())))
    for sentence in sentences(_UNSPACED_END.sub("\n", text)):
        sentence = _TRAILING_ELLIPSIS.sub("", sentence).strip(" -")
        if _QUESTION_END.search(sentence.rstrip("!！。. ")) or reads_as_instruction(sentence):
            continue
        if not _tells_something(sentence, ignore):
            continue
        if (opened := _OPENING.match(sentence)) and opened.end() < len(sentence):
            rest = sentence[opened.end() :]
            sentence = rest[0].upper() + rest[1:]
        if kept and len(" ".join([*kept, sentence])) > MAX_POINT_CHARS:
            break
        kept.append(sentence)
    said = _UNSPACED_JOIN.sub("", " ".join(kept))  # no space after a full-width stop
    if len(said) > MAX_POINT_CHARS:
        said = said[:MAX_POINT_CHARS].rsplit(" ", 1)[0]
    return said


def _tells_something(sentence: str, ignore: frozenset[str]) -> bool:
    """Whether ``sentence`` holds more than small talk: two content words, or one (or a
    number) where the person speaks of themselves; counted by characters where words are
    not spaced."""
    unspaced = len(_UNSPACED.findall(sentence))
    if unspaced:
        bare = re.sub(r"[\W_]+", "", sentence)
        return unspaced >= MIN_UNSPACED and bare not in SMALL_TALK_UNSPACED
    words = len(content_stems(sentence, ignore))
    if _FIRST_PERSON.search(sentence):  # "I'm vegan", "I'm 34"
        return words >= 1 or bool(_NUMBER.search(sentence))
    return words >= MIN_CONTENT_WORDS


def running_statements(
    summary: str, lines: Sequence[Line], settings: BotSettings, person: str, max_words: int
) -> str:
    """A running summary in ``person``'s own words: the statements ``summary`` held, then
    those of ``lines``, one a line; past ``max_words`` words, the statements with the fewest
    content words go first (the oldest of equals)."""
    kept = [entry.strip() for entry in summary.splitlines() if entry.strip()]
    kept += [point for point in own_statements(lines, settings, person, limit=len(lines))
             if point not in kept]  # fmt: skip
    ignore = _names(settings, person)
    weights = [len(content_stems(entry.split(" said: ", 1)[-1], ignore)) for entry in kept]
    words = sum(len(entry.split()) for entry in kept)
    while len(kept) > 1 and words > max_words:
        least = weights.index(min(weights))
        words -= len(kept[least].split())
        del kept[least], weights[least]
    return "\n".join(kept)


def _names(settings: BotSettings, person: str) -> frozenset[str]:
    return name_words((settings.human_name, settings.bot_name, person))

"""Is a point a model wrote about a person supported by what was said?

A memory must never hold what the person did not say. When a thread ends with "remember
this", a model writes the key points; small models copy the instruction's example ("is
allergic to peanuts"), leave a placeholder ("2026-11-23: ..."), date a point a week ahead, or
write the bot's own advice as the person's fact; a line that says "ignore previous
instructions" may make a model write what it is told. Before anything is kept, each point
is checked, with no model involved, in this order (the first failure is the reason given):

1. **placeholder**: no content word once its date and the speakers' names are gone, or
   template marks ("...", "YYYY", "[name]");
2. **instruction**: it reads as an order to a model ("ignore previous instructions", "answer
   keep", a decision, JSON), not as a fact about a person;
3. **example**: it is the instruction's own example, and the person's words do not all
   support it;
4. **date**: every ISO date in it falls within the thread's days or on a day the person named
   (:mod:`membot.memory.named_dates`): no "dated a week ahead";
5. **names**: every name in it (a capitalised word that does not open a sentence) is in some
   line of the thread, either side's: a point borrowed from someone else's memory keeps
   that someone's names;
6. **support**: more than ``MIN_WORD_SHARE`` of its content words (not stopwords, not the
   speakers' names, not dates or numbers) occur in ``WORD_SPAN`` adjacent lines of what was
   said, compared on a crude stem ("allergic" finds "allergy"), or, without its date and the
   names, it has a cosine of at least ``MIN_COSINE`` with one line in the memory's embedder
   (a paraphrase: "Sam is moving to Berlin" for "We are relocating to Germany next month",
   0.66 with the bundled MiniLM, where "Sam has three cats" for "My dog barks at the
   neighbours" is 0.25). The words must meet in a few adjacent lines because a point
   borrowed from someone else ("cherishes time with family and feels most alive") finds
   its common words scattered over a long thread, where a point about the person rests on
   what they said in one place.

The thresholds are calibrated on LoCoMo (``benchmarks/grounding.py --calibrate``; the
figures are in docs/reliability.md). The same check guards a thread's running summary,
sentence by sentence, against all the lines it folds (:func:`grounded_summary`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np

from membot.memory.named_dates import CALENDAR_WORDS, Span, named_days, within
from membot.model import Line
from membot.recall.bm25 import STOPWORDS
from membot.sentences import sentences

# Calibrated on LoCoMo conversations 0-1 (benchmarks/grounding.py --calibrate): of the
# settings keeping at least 0.9 of true points, this one kept the fewest invented ones.
MIN_COSINE = 0.55
MIN_WORD_SHARE = 0.5
WORD_SPAN = 3  # adjacent lines of what was said that a point's words must be found in
_WORD = re.compile(r"[^\W\d_]+")
_DATE_PREFIX = re.compile(r"^\s*(?:[-*•]\s*)?\(?\d{4}-\d{2}-\d{2}\)?\s*:?\s*")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_PLACEHOLDER = re.compile(r"\.\.\.|…|\byyyy\b|\bmm-dd\b|\[[a-z _]+\]|\{[a-z_]*\}|^\W*$", re.I)
# Orders to a model, not facts about a person: what injected text asks for.
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,60}?\b(?:instruction|rule|polic|prompt"
    r"|previous|prior|above|earlier|everything)"
    r"|\b(?:previous|prior|above|earlier|new|system|updated|your|all|any|following|real)\s+"
    r"(?:instructions?|rules|prompt)\b"
    r"|\b(?:json|citation_ids?|system prompt|policy check(?:er)?|memory checker)\b"
    r"|\b(?:decision|verdict)\b.{0,20}?\b(?:keep|trim|drop)\b"
    r"|\b(?:answer|respond|reply|output|return)\s+(?:with\s+)?(?:only\s+)?"
    r"(?:[\"'{]|keep\b|yes\b|no\b)"
    r"|\byou (?:must|should|shall|will|are now|have to|need to|may)\b"
    r"|[{}]",  # JSON: a verdict or a reply, never a fact (markup may be what was said)
    re.I,
)
# A speaker's label before their own words (membot.turn.own_words): a name of up to three words
# ("HUMAN said: ", "Alice Smith said: "), then "said:"; not a model's "Sam's doctor said: ".
SAID_LABEL = re.compile(r"^([\w.-]{1,40}(?: [\w.-]{1,40}){0,2}) said:\s*")
# A capitalised word of three letters or more that does not open the text or a sentence.
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)(?<![.!?:])\b([A-Z][a-z]{2,})\b")
# What a model may call the two sides instead of their names ("the User's cat").
_ROLES = frozenset({"human", "user", "person", "assistant", "bot"})
# Names this long are met by their stem too; a shorter one only as itself.
_STEMMED_NAME = 6
Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Evidence:
    """What points may rest on: the lines said, the thread's days, the days named in them."""

    said: tuple[str, ...]
    days: Span | None  # the thread's first and last day
    named: tuple[Span, ...]
    ignore: frozenset[str]  # the speakers' names, lower case
    mentioned: frozenset[str] = frozenset()  # every word in the thread, either side's, lower case

    @classmethod
    def of(
        cls,
        said: Sequence[Line],
        thread: Sequence[Line],
        names: Sequence[str] = (),
        more: Sequence[str] = (),
    ) -> Evidence:
        """From the lines that may support a point (``said``), the thread's lines (its span)
        and texts that count as said beside them (``more``: an earlier, checked summary)."""
        moments = [line.created_at.date() for line in thread]
        named = [span for line in said for span in named_days(line.text, line.created_at)]
        texts = {line.text for line in (*thread, *said)} | set(more)
        return cls(
            tuple(line.text for line in said) + tuple(more),
            (min(moments), max(moments)) if moments else None,
            tuple(named),
            name_words(names),
            frozenset(word.lower() for text in texts for word in _WORD.findall(text)),
        )


@dataclass(frozen=True)
class Verdict:
    point: str
    kept: bool
    reason: str = ""  # why it was dropped


def _stem(word: str) -> str:
    """A crude English stem, enough to meet a word again in another form: "flies" and
    "fly", "allergic" and "allergy", "running" and "run"."""
    word = word.lower()
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # "runn", "stopp"
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):  # "like" and "lik(ed)"
        word = word[:-1]
    return word[:5]


def name_words(names: Sequence[str]) -> frozenset[str]:
    """The words of ``names``, lower case: what a point or line may leave out of its
    content ("Sam" in "Sam moved to Berlin")."""
    return frozenset(part.lower() for name in names for part in _WORD.findall(name))


def content_stems(text: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """The stems of ``text``'s content words: no stopwords, no words in ``ignore``, none
    shorter than three letters."""
    words = (word.lower() for word in _WORD.findall(text))
    return {_stem(w) for w in words if len(w) > 2 and w not in STOPWORDS and w not in ignore}


def undated(point: str) -> str:
    """The point without its leading date."""
    return _DATE_PREFIX.sub("", point).strip()


def claim(point: str, ignore: frozenset[str]) -> str:
    """What ``point`` says: without its leading date, and without a "HUMAN said:" label
    naming one of the speakers (``ignore``) before the person's own words (as
    :mod:`membot.turn.own_words` writes them). The label's "said" is no word of what was said:
    "HUMAN said: My name is Priya" held one word of two ("name", not "said") and was
    left out."""
    text = undated(point)
    label = SAID_LABEL.match(text)
    if label and set(_WORD.findall(label.group(1).lower())) <= ignore | _ROLES:
        return text[label.end() :].strip() or text
    return text


def _without_names(text: str, ignore: frozenset[str]) -> str:
    """``text`` without the speakers' names (and their possessive 's): lines say "I"."""
    kept = re.sub(
        r"\b(\w+)'s\b", lambda m: m.group(0) if m.group(1).lower() not in ignore else "", text
    )
    words = [word for word in kept.split() if word.strip(".,:;!?").lower() not in ignore]
    return " ".join(words) or text


def reads_as_instruction(text: str) -> bool:
    """Whether ``text`` reads as an order to a model rather than a fact about a person."""
    return bool(_INSTRUCTION.search(text))


def _bad_date(point: str, evidence: Evidence) -> str | None:
    """The first ISO date in ``point`` outside the thread's days and every day named."""
    for match in _ISO_DATE.finditer(point):
        try:
            day = date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            return match[0]
        in_thread = evidence.days is not None and within(day, [evidence.days])
        if not in_thread and not within(day, evidence.named):
            return match[0]
    return None


def _first_failure(point: str, evidence: Evidence, heard: set[str], examples: set[str]) -> str:
    """Why ``point`` fails checks 1-5 (the module doc), or "" when it passes them."""
    text = claim(point, evidence.ignore)
    stems = content_stems(text, evidence.ignore)
    if not stems or _PLACEHOLDER.search(text):
        return "a placeholder, not a point"
    if reads_as_instruction(text):
        return "reads as an instruction to a model, not as something said"
    if " ".join(sorted(stems)) in examples and not stems <= heard:
        return "the instruction's example, not something said"
    if bad := _bad_date(point, evidence):
        days = evidence.days
        span = "no lines" if days is None else " to ".join(dict.fromkeys(map(str, days)))
        return f"dated {bad}: outside the conversation ({span}) and not a day named in it"
    if stranger := _unmentioned_name(text, evidence):
        return f"names {stranger}, which nobody in the conversation mentioned"
    return ""


def _unmentioned_name(text: str, evidence: Evidence) -> str | None:
    """The first name in ``text`` (a capitalised word not opening a sentence, not a
    stopword, month or weekday) that no line of the thread holds, either side's; None when
    every one is there, or when the thread's words are not known. A name is met as a word;
    only a longer one also by its stem ("Painting" for "painted"): the crude stem of a short
    name is a common word's ("Tim" and "time" are both "tim")."""
    if not evidence.mentioned:
        return None
    stems: set[str] | None = None
    for match in _NAME.finditer(text):
        word = match.group(1).lower()
        if word in STOPWORDS or word in CALENDAR_WORDS or word in _ROLES or word in evidence.ignore:
            continue
        if word in evidence.mentioned:
            continue
        if len(word) >= _STEMMED_NAME:
            stems = stems if stems is not None else {_stem(w) for w in evidence.mentioned}
            if _stem(word) in stems:
                continue
        return match.group(1)
    return None


def check_points(
    points: Sequence[str],
    evidence: Evidence,
    embed: Embed | None,
    examples: Sequence[str] = (),
    span: int = WORD_SPAN,
) -> list[Verdict]:
    """A verdict for each of ``points``, in order (see the module doc): its words are looked
    for in ``span`` adjacent texts of what was said; without ``embed``, support is judged
    by words alone."""
    said = [content_stems(text, evidence.ignore) for text in evidence.said]
    heard = set().union(*said)
    windows = word_windows(said, span)
    example_keys = {" ".join(sorted(content_stems(undated(e), evidence.ignore))) for e in examples}
    verdicts: list[Verdict | None] = []
    shares: dict[int, tuple[int, int]] = {}
    for index, point in enumerate(points):
        if why := _first_failure(point, evidence, heard, example_keys):
            verdicts.append(Verdict(point, False, why))
            continue
        stems = content_stems(claim(point, evidence.ignore), evidence.ignore)
        found = max(len(stems & window) for window in windows)
        verdicts.append(Verdict(point, True) if found / len(stems) > MIN_WORD_SHARE else None)
        shares[index] = (found, len(stems))
    doubtful = [index for index, verdict in enumerate(verdicts) if verdict is None]
    cosines = _best_cosines([points[i] for i in doubtful], evidence, embed)
    for index, cosine in zip(doubtful, cosines, strict=True):
        found, total = shares[index]
        if cosine >= MIN_COSINE:
            verdicts[index] = Verdict(points[index], True)
            continue
        measured = f"; best cosine {cosine:.2f}" if embed is not None and evidence.said else ""
        within = f" in {span} adjacent lines" if len(evidence.said) > span else ""
        why = f"not supported by what was said ({found} of {total} words{within}{measured})"
        verdicts[index] = Verdict(points[index], False, why)
    return [verdict for verdict in verdicts if verdict is not None]


def word_windows(said: Sequence[set[str]], span: int = WORD_SPAN) -> list[set[str]]:
    """The stems of every ``span`` adjacent texts of ``said`` (each given as its stems),
    together: a point's words are looked for in each (one set, at least)."""
    starts = range(max(len(said) - span + 1, 1))
    return [set().union(*said[at : at + span]) for at in starts]


def _best_cosines(points: Sequence[str], evidence: Evidence, embed: Embed | None) -> list[float]:
    """Each point's best cosine (without its date and the names) to one text said."""
    if not points or not evidence.said or embed is None:
        return [0.0] * len(points)
    asked = [_without_names(claim(point, evidence.ignore), evidence.ignore) for point in points]
    vectors = np.asarray(embed(asked + list(evidence.said)), np.float32)
    cosines = vectors[: len(points)] @ vectors[len(points) :].T
    return [float(row.max()) for row in cosines]


def unsupported_points(
    points: Sequence[str], said: Sequence[str], embed: Embed | None, names: Sequence[str] = ()
) -> list[str]:
    """The ``points`` that nothing in ``said`` supports by words or meaning, in order (the
    support check alone: no dates, no thread)."""
    ignore = name_words(names)
    evidence = Evidence(tuple(said), None, (), ignore)
    dated = [undated(point) for point in points]  # no thread days: dates are not checked here
    verdicts = check_points(dated, evidence, embed)
    return [point for point, verdict in zip(points, verdicts, strict=True) if not verdict.kept]


def grounded_summary(
    summary: str, evidence: Evidence, embed: Embed | None
) -> tuple[str, list[Verdict]]:
    """``summary`` with the sentences nothing said supports left out, and the verdicts on
    the sentences left out. A sentence's words may come from anywhere in the lines: a
    running summary folds many lines, either side's, into one sentence."""
    whole = max(len(evidence.said), 1)
    rows = [sentences(row) for row in summary.splitlines()]
    verdicts = check_points([part for row in rows for part in row], evidence, embed, span=whole)
    found = iter(verdicts)
    kept_rows = [" ".join(v.point for v in (next(found) for _ in row) if v.kept) for row in rows]
    kept = "\n".join(row for row in kept_rows if row)  # its line breaks as written
    return kept, [verdict for verdict in verdicts if not verdict.kept]


def only_removes(rewritten: Sequence[str], draft: Sequence[str]) -> list[Verdict]:
    """Verdicts on the points a check ``rewritten`` from ``draft``: one is kept only if its
    words and dates are all in one draft point, so a check can take away, never add."""
    drafts = [(content_stems(point), set(_ISO_DATE.findall(point))) for point in draft]
    verdicts = []
    for point in rewritten:
        stems, dates = content_stems(point), set(_ISO_DATE.findall(point))
        if any(stems <= words and dates <= days for words, days in drafts) and stems:
            verdicts.append(Verdict(point, True))
        else:
            verdicts.append(Verdict(point, False, "the check added what the draft did not say"))
    return verdicts

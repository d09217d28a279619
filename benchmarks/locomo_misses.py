"""Where LoCoMo's missed multi-hop and open-domain evidence lines rank, and what they are.

Each question of the chosen categories (multi-hop and open-domain by default) is asked as
``membot eval locomo`` asks it (``blend``; ``--set`` options as there). An evidence line is
missed when it is not among the question's first 10 lines in context. For the missed lines it
counts where they rank (11-25, 26-100, beyond 100), whether they share a photo (``[shares a
photo: ...]``), who said them (the person the question names, the other, or a question that
names nobody who speaks), whether they are short (at most :data:`SHORT_WORDS` words of their
own, the caption left out: "Yes, it was amazing!"), whether they say the name of the person
the question names ("Wow, Melanie! ..."), whether a found evidence line or any of the
first 10 lines is in their session, and how many evidence lines their question has; each
share is printed beside the same share among the found evidence lines, among the other lines
of the first 10 of a question that misses some (what beat them) and among every line. Then
the loss (questions times 1 - R@10) by the number of evidence lines.
docs/recall.md, "Why multi-hop and open-domain questions miss".

    .venv/bin/python benchmarks/locomo_misses.py ../shared/data/locomo/locomo_dev.json
    .venv/bin/python benchmarks/locomo_misses.py FILE --set unnamed_weight=0 --show 20
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_EMBEDDER, parse_numbers
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.locomo import CATEGORIES, context_refs, lines_by_conversation
from membot.memory.importers import load_json
from membot.model import LineInput
from membot.recall.named_speakers import named_in
from membot.recall.ranked import settings_for_ranking

TOP = 10  # the first lines a question is scored on (R@10)
DEPTH = 100  # lines read in context order; an evidence line past them ranks "beyond"
SHORT_WORDS = 8  # a line of at most this many words of its own is short
PHOTO = re.compile(r"\s*\[shares a photo: [^\]]*\]\s*$")


@dataclass(frozen=True)
class Said:
    """One line of a conversation as the analysis reads it."""

    ref: str
    session: str
    seq: int
    speaker: str
    words: int  # words of its own, the caption left out
    photo: bool
    text: str


@dataclass(frozen=True)
class Row:
    """An evidence line of a question, or a line that ranked in the first 10."""

    line: Said
    rank: int  # 0-based place in context order; DEPTH when past it
    named: str  # "named": said by a speaker the question names; "other"; "none named"
    found_session: bool  # a found evidence line of the question is in its session
    top_session: bool  # one of the question's first 10 lines is in its session
    evidence: int  # the question's number of evidence lines
    mentions: bool  # it says the name of a speaker the question names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=V")
    parser.add_argument("--categories", default="1,3", help="LoCoMo category numbers")
    parser.add_argument("--show", type=int, default=0, help="print this many missed lines")
    args = parser.parse_args()
    settings = settings_for_ranking("blend", parse_numbers(args.set))
    categories = {int(number) for number in args.categories.split(",")}
    model = cached_embedder(DEFAULT_EMBEDDER)
    by_sample = lines_by_conversation(args.file)
    missed: list[Row] = []
    found: list[Row] = []
    beaten: list[Row] = []
    every: list[Said] = []
    loss: dict[int, defaultdict[str, float]] = defaultdict(
        lambda: defaultdict(float)
    )  # by category
    shown: list[str] = []
    for sample in load_json(args.file):
        lines = by_sample[sample["sample_id"]]
        said = _said(lines)
        every += said.values()
        speakers = {line.speaker for line in said.values()}
        with fresh_memory(model, lines) as memory:
            for qa in sample["qa"]:
                if qa["category"] not in categories:
                    continue
                evidence = [ref for ref in dict.fromkeys(qa["evidence"]) if ref in said]
                if not evidence:
                    continue
                order = context_refs(memory, settings, qa["question"], DEPTH)
                rows = _rows(qa["question"], evidence, order, said, speakers)
                lost = [row for row in rows if row.rank >= TOP]
                missed += lost
                found += [row for row in rows if row.rank < TOP]
                beaten += _beaten(qa["question"], evidence, order, said, speakers, rows)
                bucket = _evidence_bucket(len(evidence))
                loss[qa["category"]][f"questions {bucket}"] += 1
                loss[qa["category"]][f"lost {bucket}"] += len(lost) / len(evidence)
                if len(shown) < args.show:
                    shown += [_shown(qa["question"], row, lines) for row in lost]
    for text in shown[: args.show]:
        print(text)
    _print_counts(missed, found, beaten, every)
    _print_loss(loss)


def _said(lines: Sequence[LineInput]) -> dict[str, Said]:
    said = {}
    for seq, line in enumerate(lines):
        own = PHOTO.sub("", line.text)
        said[line.ref or ""] = Said(line.ref or "", line.thread, seq, line.speaker or "",
                                    len(own.split()), own != line.text, line.text)  # fmt: skip
    return said


def _named(question: str, speaker: str, speakers: set[str]) -> str:
    named = named_in(question, speakers)
    if not named:
        return "none named"
    return "named" if speaker in named else "other"


def _mentions(question: str, text: str, speakers: set[str]) -> bool:
    """Whether ``text`` says the name of a speaker the question names."""
    return bool(named_in(text, named_in(question, speakers)))


def _rows(
    question: str, evidence: list[str], order: list[str], said: dict[str, Said], speakers: set[str]
) -> list[Row]:
    rank = {ref: place for place, ref in enumerate(order)}
    top_sessions = {said[ref].session for ref in order[:TOP] if ref in said}
    found_sessions = {said[ref].session for ref in evidence if rank.get(ref, DEPTH) < TOP}
    return [
        Row(said[ref], rank.get(ref, DEPTH), _named(question, said[ref].speaker, speakers),
            said[ref].session in found_sessions, said[ref].session in top_sessions, len(evidence),
            _mentions(question, said[ref].text, speakers))
        for ref in evidence
    ]  # fmt: skip


def _beaten(
    question: str,
    evidence: list[str],
    order: list[str],
    said: dict[str, Said],
    speakers: set[str],
    rows: list[Row],
) -> list[Row]:
    """The first 10 lines that are not evidence, of a question that misses some."""
    if all(row.rank < TOP for row in rows):
        return []
    return [
        Row(said[ref], place, _named(question, said[ref].speaker, speakers), False, True,
            len(evidence), _mentions(question, said[ref].text, speakers))
        for place, ref in enumerate(order[:TOP])
        if ref in said and ref not in evidence
    ]  # fmt: skip


def _evidence_bucket(count: int) -> str:
    return "3+" if count >= 3 else str(count)


def _shown(question: str, row: Row, lines: Sequence[LineInput]) -> str:
    line = lines[row.line.seq]
    rank = row.rank if row.rank < DEPTH else f">{DEPTH}"
    return f"{question} | rank {rank} | {line.speaker}: {line.text}"


def _share(rows: Sequence[Any], test: Callable[[Any], bool]) -> str:
    return f"{sum(map(test, rows)) / len(rows):.2f}" if rows else "-"


def _print_counts(
    missed: list[Row], found: list[Row], beaten: list[Row], every: list[Said]
) -> None:
    print(f"\nevidence lines: {len(missed) + len(found)}; missed (not in the first {TOP}): "
          f"{len(missed)}; found: {len(found)}")  # fmt: skip
    ranks = Counter(
        "11-25" if row.rank < 25 else "26-100" if row.rank < DEPTH else "beyond 100"
        for row in missed
    )
    print("missed lines by rank: " + ", ".join(f"{name} {ranks[name]}" for name in
                                               ("11-25", "26-100", "beyond 100")))  # fmt: skip
    print(f"{'share of lines':<48} {'missed':>7} {'found':>7} {'beaten':>7} {'every':>7}")
    short = f"short (<= {SHORT_WORDS} words, caption left out)"
    tests: list[tuple[str, Callable[[Row], bool], Callable[[Said], bool] | None]] = [
        ("share a photo", lambda row: row.line.photo, lambda line: line.photo),
        (short, lambda row: row.line.words <= SHORT_WORDS, lambda line: line.words <= SHORT_WORDS),
        ("say the name of a speaker the question names", lambda row: row.mentions, None),
        ("said by the person the question names", lambda row: row.named == "named", None),
        ("said by the other (the question names one)", lambda row: row.named == "other", None),
        ("the question names no speaker", lambda row: row.named == "none named", None),
        ("in a session of a found evidence line", lambda row: row.found_session, None),
        (f"in a session of one of the first {TOP}", lambda row: row.top_session, None),
        ("of a question with 3+ evidence lines", lambda row: row.evidence >= 3, None),
    ]
    for name, test, of_line in tests:
        whole = _share(every, of_line) if of_line else ""
        print(f"{name:<48} {_share(missed, test):>7} {_share(found, test):>7} "
              f"{_share(beaten, test):>7} {whole:>7}")  # fmt: skip
    photo_missed = [row for row in missed if row.line.photo]
    print(f"missed lines that share a photo, by rank: 11-25 "
          f"{sum(row.rank < 25 for row in photo_missed)}, 26+ "
          f"{sum(row.rank >= 25 for row in photo_missed)}")  # fmt: skip


def _print_loss(loss: dict[int, defaultdict[str, float]]) -> None:
    print("\nloss at R@10 (questions x (1 - R@10)) by the question's number of evidence lines")
    for category, counts in sorted(loss.items()):
        name = CATEGORIES.get(category, str(category))
        total = sum(value for key, value in counts.items() if key.startswith("lost"))
        buckets = ("1", "2", "3+")
        parts = ", ".join(
            f"{bucket}: {counts[f'questions {bucket}']:g} questions, lost "
            f"{counts[f'lost {bucket}']:.1f}"
            for bucket in buckets
        )
        asked = sum(counts[f"questions {bucket}"] for bucket in buckets)
        print(f"  {name}: {parts}; lost {total:.1f} of {asked:g}")


if __name__ == "__main__":
    main()

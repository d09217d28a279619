"""A memory holds only what was said: how many invented points the grounding check keeps.

Scripted "key points" over LoCoMo sessions (``../shared/data/locomo``, read in place), each
session taken once with either speaker as the person (the other as the bot):

* **true points**: LoCoMo's own observations about the person in that session, dated on the
  session's day;
* **invented points**: observations about people of *other* conversations (the name changed
  to the person's), the points instruction's example ("is allergic to peanuts"),
  placeholders ("...", "[name]"), and true observations dated a week after the session
  (or later, when the person named that day);
* for information, the other speaker's observations of the session (what the bot's side
  said: membot keeps only what the person said, so these should mostly go too).

Each point is checked by :func:`membot.memory.grounding.check_points` against the person's lines,
with the bundled MiniLM. ``--calibrate`` first sweeps ``WORD_SPAN``, ``MIN_COSINE`` and
``MIN_WORD_SHARE`` on the calibration conversations and prints the sweep; the report is on
the other conversations, with the module's settings. Goals: invented points kept 0, true
kept >= 0.9. The calibration conversations borrow ``CALIBRATION_BORROWED`` times as many
points from other people as the report's: with one per true point, almost every setting
keeps none of them there, and the sweep could not tell the settings apart.

    .venv/bin/python benchmarks/grounding.py              # report (about 2 minutes on 2 cores)
    .venv/bin/python benchmarks/grounding.py --calibrate  # the sweep, then the report
    .venv/bin/python benchmarks/grounding.py --frontier   # the report, then its upper bound

``--frontier`` asks what rules of this check's kind reach on the report: words found OR
meaning close OR both past lower bars, every threshold of a fine grid (about 500,000 rules),
chosen on the report itself (so a bound on what tuning could give, never a setting). For
each number of invented points kept it prints the most true points kept.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from membot import Line, Role
from membot.embed import default_embedder
from membot.eval import shared_data_dir
from membot.memory import grounding as g
from membot.memory.named_dates import within
from membot.turn.ending import EXAMPLE_POINT

LOCOMO_PATH = shared_data_dir() / "locomo" / "locomo_dev.json"
CALIBRATION = (0, 1)  # conversation indexes the thresholds are chosen on; the rest report
CALIBRATION_BORROWED = 10  # other people's points per true point in those conversations
SPANS = (1, 2, 3, 4, 0)  # 0: all the person's lines, as before WORD_SPAN
COSINES = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65)
SHARES = (0.4, 0.5, 0.6, 0.7)


@dataclass
class Case:
    conversation: int
    kind: str  # "true", "other people", "example", "placeholder", "wrong date", "bot side"
    point: str
    evidence: g.Evidence
    failure: str = ""  # checks 1-5 of membot.memory.grounding
    shares: dict[int, float] = field(default_factory=dict)  # by span of adjacent lines
    cosine: float = 0.0


def session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y")


def sessions(conversation: dict):
    talk = conversation["conversation"]
    for key in sorted((k for k in talk if re.fullmatch(r"session_\d+", k)), key=_number):
        observed = conversation["observation"].get(f"{key}_observation", {})
        yield session_time(talk[f"{key}_date_time"]), talk[key], observed


def _number(key: str) -> int:
    return int(key.rsplit("_", 1)[1])


def build_cases(
    data: list[dict], conversations: set[int], borrowed: int = 1, seed: int = 13
) -> list[Case]:
    """The cases of ``conversations``, with ``borrowed`` other people's points per true
    point."""
    rng = random.Random(seed)
    strangers = {  # each conversation's observations, for the others to borrow
        index: [
            (who, obs[0])
            for _, _, observed in sessions(c)
            for who, items in observed.items()
            for obs in items
        ]
        for index, c in enumerate(data)
    }
    cases = []
    for index, conversation in enumerate(data):
        if index not in conversations:
            continue
        speakers = (
            conversation["conversation"]["speaker_a"],
            conversation["conversation"]["speaker_b"],
        )
        for when, turns, observed in sessions(conversation):
            lines = [
                Line(n, "bench", "p", "t", n, Role.HUMAN, turn["text"], when, 0, turn["speaker"])
                for n, turn in enumerate(turns, 1)
            ]
            for person in speakers:
                other = speakers[1] if person == speakers[0] else speakers[0]
                said = [line for line in lines if line.speaker == person]
                if not said:
                    continue
                evidence = g.Evidence.of(said, lines, (person, other))
                cases += session_cases(
                    index, person, other, when, observed, evidence, strangers, rng, borrowed
                )
    return cases


def session_cases(
    index, person, other, when, observed, evidence, strangers, rng, borrowed
) -> list[Case]:
    day = when.date().isoformat()
    truths = [obs[0] for obs in observed.get(person, [])]
    cases = [Case(index, "true", f"{day}: {text}", evidence) for text in truths]
    cases += [
        Case(index, "bot side", f"{day}: {obs[0]}", evidence) for obs in observed.get(other, [])
    ]
    others = [item for key, items in strangers.items() if key != index for item in items]
    for who, text in rng.sample(others, min(borrowed * len(truths), len(others))):
        cases.append(Case(index, "other people", f"{day}: {text.replace(who, person)}", evidence))
    example = EXAMPLE_POINT.replace("2024-05-01", day).replace("{HUMAN}", person)
    cases.append(Case(index, "example", example, evidence))
    cases += [
        Case(index, "placeholder", f"{day}: {text}", evidence)
        for text in ("...", f"{person} ...", f"{person} [name]", "YYYY-MM-DD: ...")
    ]
    for text in truths[:2]:
        later = when + timedelta(days=7)
        while within(later.date(), evidence.named):  # a day the person named is no lie
            later += timedelta(days=30)
        cases.append(Case(index, "wrong date", f"{later.date().isoformat()}: {text}", evidence))
    return cases


def measure(cases: list[Case], embed) -> None:
    """Each case's failure of checks 1-5, word shares and best cosine (once, for any
    setting)."""
    said: dict[int, list[set[str]]] = {}
    windows: dict[tuple[int, int], list[set[str]]] = {}
    for case in cases:
        ignore = case.evidence.ignore
        lines = said.setdefault(
            id(case.evidence), [g.content_stems(t, ignore) for t in case.evidence.said]
        )
        examples = {" ".join(sorted(g.content_stems(g.undated(_example(case)), ignore)))}
        case.failure = g._first_failure(case.point, case.evidence, set().union(*lines), examples)
        stems = g.content_stems(g.undated(case.point), ignore)
        case.shares = {}
        for span in SPANS:  # each thread's windows of adjacent lines made once per span
            key = (id(case.evidence), span)
            if key not in windows:
                windows[key] = g.word_windows(lines, span or len(lines))
            found = max(len(stems & window) for window in windows[key])
            case.shares[span] = found / len(stems) if stems else 0.0
    texts = sorted({t for c in cases for t in c.evidence.said} | {_asked(c) for c in cases})
    vectors = dict(zip(texts, np.asarray(embed(texts), np.float32), strict=True))
    for case in cases:
        evidence = np.stack([vectors[t] for t in case.evidence.said])
        case.cosine = float((evidence @ vectors[_asked(case)]).max())


def _example(case: Case) -> str:
    person = sorted(case.evidence.ignore)[0] if case.evidence.ignore else ""
    return EXAMPLE_POINT.replace("{HUMAN}", person)


def _asked(case: Case) -> str:
    return g._without_names(g.undated(case.point), case.evidence.ignore)


def kept(case: Case, span: int, cosine: float, share: float) -> bool:
    return not case.failure and (case.shares[span] > share or case.cosine >= cosine)


def shares_kept(cases: list[Case], span: int, cosine: float, share: float) -> dict[str, Any]:
    by_kind: dict[str, list[bool]] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(kept(case, span, cosine, share))
    invented = [k for kind, ks in by_kind.items() if kind not in ("true", "bot side") for k in ks]
    result: dict[str, Any] = {
        "true": float(np.mean(by_kind["true"])),
        "invented": float(np.mean(invented)),
    }
    result |= {kind: float(np.mean(ks)) for kind, ks in by_kind.items() if kind != "true"}
    result["counts"] = {kind: len(ks) for kind, ks in by_kind.items()}
    return result


def calibrate(cases: list[Case]) -> tuple[int, float, float]:
    names = ", ".join(map(str, CALIBRATION))
    invented = sum(case.kind not in ("true", "bot side") for case in cases)
    print(
        f"calibration (conversations {names}, {invented} invented points): kept shares, "
        "true/invented, by WORD_SPAN (0: all lines), MIN_COSINE and MIN_WORD_SHARE"
    )
    rows = []
    for span in SPANS:
        print(f"  WORD_SPAN {span}: MIN_COSINE, then MIN_WORD_SHARE " + "  ".join(map(str, SHARES)))
        for cosine in COSINES:
            cells = []
            for share in SHARES:
                found = shares_kept(cases, span, cosine, share)
                rows.append((found["invented"], -found["true"], span, cosine, share))
                cells.append(f"{found['true']:.3f}/{found['invented']:.4f}")
            print(f"    {cosine:.2f}  " + "  ".join(cells))
    # The goal for true points (0.9) first, then the fewest invented points kept.
    meeting = [row for row in rows if -row[1] >= 0.9] or rows
    least, true, span, cosine, share = min(meeting)
    print(
        f"chosen: WORD_SPAN {span} MIN_COSINE {cosine} MIN_WORD_SHARE {share} (of those "
        f"keeping >= 0.9 of true points, the fewest invented kept: invented {least:.4f}, "
        f"true {-true:.3f})"
    )
    return span, cosine, share


def report(cases: list[Case], embed) -> dict:
    """The module's thresholds on the report conversations. Every case is measured in one
    batch; on a few sessions :func:`membot.memory.grounding.check_points` itself is run and must
    agree, so the rule measured is the module's."""
    measure(cases, embed)
    groups: dict[int, list[Case]] = {}
    for case in cases:
        groups.setdefault(id(case.evidence), []).append(case)
    for group in list(groups.values())[:6]:
        verdicts = g.check_points(
            [c.point for c in group], group[0].evidence, embed, [_example(group[0])]
        )
        assert [v.kept for v in verdicts] == [
            kept(c, g.WORD_SPAN, g.MIN_COSINE, g.MIN_WORD_SHARE) for c in group
        ]
    found = shares_kept(cases, g.WORD_SPAN, g.MIN_COSINE, g.MIN_WORD_SHARE)
    counts = found.pop("counts")
    return {
        "true_kept": round(found["true"], 3),
        "invented_kept": round(found["invented"], 3),
        "by_kind": {
            kind: {
                "points": counts[kind],
                "kept": round(found[kind if kind != "true" else "true"], 3),
            }
            for kind in counts
        },
    }


OFF = 2.0  # a threshold no case reaches: that part of the rule off
FRONTIER_SHARES = (*np.round(np.arange(0.3, 0.951, 0.05), 3), OFF)
FRONTIER_COSINES = (*np.round(np.arange(0.4, 0.801, 0.01), 3), OFF)
BOTH_SHARES = tuple(np.round(np.arange(0.2, 0.601, 0.05), 3))
BOTH_COSINES = tuple(np.round(np.arange(0.2, 0.601, 0.025), 3))


def frontier(cases: list[Case], most_invented: int = 6) -> dict[int, tuple[float, str]]:
    """For each count of invented points kept (0 .. ``most_invented``), the highest share of
    true points a rule of the grid keeps with that few, and the rule: words found (share >
    a), or meaning close (cosine >= b), or both past lower bars (share > c and cosine >= d),
    for every WORD_SPAN. Cases measured."""
    chosen = [c for c in cases if c.kind != "bot side"]
    true = np.array([c.kind == "true" for c in chosen])
    failed = np.array([bool(c.failure) for c in chosen])
    cosine = np.array([c.cosine for c in chosen])
    close = {b: cosine >= b for b in FRONTIER_COSINES}
    best: dict[int, tuple[float, str]] = {}
    for span in SPANS:
        share = np.array([c.shares[span] for c in chosen])
        both_rules = [(c, d) for c in BOTH_SHARES for d in BOTH_COSINES]
        both = np.stack([(share > c) & (cosine >= d) for c, d in both_rules])
        for a in FRONTIER_SHARES:
            found = share > a
            for b in FRONTIER_COSINES:
                keeps = (found | close[b] | both) & ~failed  # one row per (c, d)
                invented = keeps[:, ~true].sum(axis=1)
                kept_true = keeps[:, true].sum(axis=1) / true.sum()
                for row in np.flatnonzero(invented <= most_invented):
                    c, d = both_rules[row]
                    rule = (
                        f"WORD_SPAN {span}: share > {a} or cosine >= {b} or "
                        f"(share > {c} and cosine >= {d})"
                    )
                    for at_most in range(int(invented[row]), most_invented + 1):
                        if kept_true[row] > best.get(at_most, (-1.0, ""))[0]:
                            best[at_most] = (float(kept_true[row]), rule)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO_PATH)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--frontier", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    data = json.loads(args.locomo.read_text())
    embedder = default_embedder()
    if args.calibrate:
        calibrating = build_cases(data, set(CALIBRATION), CALIBRATION_BORROWED)
        measure(calibrating, embedder.embed)
        calibrate(calibrating)
    # Drawn with every conversation, as the calibration's were before it borrowed more.
    every = build_cases(data, set(range(len(data))))
    held_out = [case for case in every if case.conversation not in CALIBRATION]
    result = report(held_out, embedder.embed)
    print(
        f"report (conversations {sorted({c.conversation for c in held_out})}, WORD_SPAN "
        f"{g.WORD_SPAN}, MIN_COSINE {g.MIN_COSINE}, MIN_WORD_SHARE {g.MIN_WORD_SHARE}, "
        f"{embedder.name}):"
    )
    print(f"  true points kept:     {result['true_kept']:.3f}  (goal >= 0.9)")
    print(f"  invented points kept: {result['invented_kept']:.3f}  (goal 0)")
    for kind, row in result["by_kind"].items():
        print(f"    {kind:13} {row['points']:5d} points, kept {row['kept']:.3f}")
    if args.frontier:
        print("the best rules of the grid on the report (chosen on the report itself; 2.0: off):")
        for count, (share, rule) in sorted(frontier(held_out).items()):
            print(f"  {count} invented kept: at most {share:.3f} of true points  ({rule})")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

"""Artefacts in the replies of a ``membot eval ... --answers`` run, and how often the reply says
an answer its context held.

Reads the ``OUT.answers.jsonl`` a run writes beside ``--out`` (one record per question) and
counts, per file, the replies that hold an artefact of the kinds ``membot.turn.artefacts``
takes out, found here by its own, broader patterns (so a clean-up that missed one is caught,
not marked by itself):

- *label*: a line opening with a name and a colon ("HUMAN:", "Caroline:", "AI (to Sam):"), or
  a name and "said:" or "says:" and a quote anywhere ('The answer is: HUMAN said: "…"');
- *opener*: "… responds:", "Here is the response:", "The AI's utterance is", "The answer is:";
- *markup*: anything shaped like a tag (``<memory …>``, ``<response text>``, ``<|im_end|>``);
- *question*: the question's words, in order, inside the reply (questions of 3 words or more).

Beside them: *in context*, questions whose recalled context held the answer, and *said*, those
of them whose reply held it too (``context_contained`` and ``contained`` in the records).

    .venv/bin/python benchmarks/reply_artefacts.py reports/answers_locomo_single_hop.answers.jsonl
    .venv/bin/python benchmarks/reply_artefacts.py reports/q100.answers.jsonl --slices 1-10,11-20

``--cut-at-cap N`` prints a row per file with each stored reply as the small prompt's rule
would leave it (a reply of at least N − 1 tokens loses an unfinished last sentence where a
finished one comes before it; ``membot.turn.artefacts``), scored again, and how many replies
it changed and answers it lost (docs/answers.md, "A reply the cap stops mid-sentence").

``--slices`` prints a row per slice too: a record's place is its rank among the file's records
of the same LoCoMo conversation (``conv-26:83``), in question order, from 1.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

LABEL = re.compile(
    r"(?m)^\s*[*_]*(?:[A-Z][\w'.-]*)(?: [A-Z][\w'.-]*)?(?:\s*\([^()\n]*\))?[*_]*:\s"
    r"|\b[A-Z][\w'.-]* (?:said|says): *[\"“]"
)
OPENER = re.compile(
    r"(?i)\b(?:responds|replies|response|reply|utterance)\b(?: is| would be)?\s*[:\"“]"
    r"|\b(?:the|my) (?:response|reply|answer) is\s*[:\"“]"
    r"|here(?:'s| is) (?:the|my|an?) (?:response|reply|answer)"
)
MARKUP = re.compile(r"</?[A-Za-z][^<>\n]{0,80}>|<\|")
WORD = re.compile(r"[^\W_]+")


def repeats_question(reply: str, question: str) -> bool:
    asked = [word.lower() for word in WORD.findall(question)]
    said = " ".join(word.lower() for word in WORD.findall(reply))
    return len(asked) >= 3 and f" {' '.join(asked)} " in f" {said} "


def artefacts(record: dict[str, Any]) -> list[str]:
    reply, found = record["reply"], []
    for kind, pattern in (("label", LABEL), ("opener", OPENER), ("markup", MARKUP)):
        if pattern.search(reply):
            found.append(kind)
    if repeats_question(reply, record["question"]):
        found.append("question")
    return found


def ranked(records: list[dict[str, Any]]) -> list[int]:
    """Each record's rank among the records of its conversation (``SAMPLE:N`` ids), from 1."""
    order: dict[str, list[int]] = {}
    for record in records:
        sample, _, number = str(record["id"]).rpartition(":")
        order.setdefault(sample, []).append(int(number) if number.isdigit() else 0)
    ranks = []
    for record in records:
        sample, _, number = str(record["id"]).rpartition(":")
        place = int(number) if number.isdigit() else 0
        ranks.append(sorted(order[sample]).index(place) + 1)
    return ranks


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def summary(path: Path, show: bool, records: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:  # fmt: skip
    records = read(path) if records is None else records
    flagged = [(record, artefacts(record)) for record in records]
    in_context = [record for record in records if record["context_contained"]]
    said = [record for record in in_context if record["contained"]]
    kinds: dict[str, int] = {}
    for record, found in flagged:
        for kind in found:
            kinds[kind] = kinds.get(kind, 0) + 1
        if show and found:
            print(f"  {record['id']} {found}: {record['reply'][:160]!r}")
    with_any = sum(1 for _, found in flagged if found)
    return {
        "file": str(path),
        "n": len(records),
        "f1": sum(record["f1"] for record in records) / len(records) if records else 0.0,
        "contained": sum(record["contained"] for record in records),
        "in_context": len(in_context),
        "said_in_context": len(said),
        "said_share": round(len(said) / len(in_context), 3) if in_context else None,
        "artefacts": with_any,
        "artefact_share": round(with_any / len(records), 3) if records else None,
        "kinds": kinds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--show", action="store_true", help="print each reply with an artefact")
    parser.add_argument("--slices", default="", help="places FIRST-LAST, comma-separated")
    parser.add_argument(
        "--cut-at-cap",
        type=int,
        default=0,
        metavar="N",
        help="also score the replies as a cap of N tokens would cut them",
    )
    args = parser.parse_args()
    print(
        "| file | n | F1 | contained | in context | said, of in context | replies with artefacts |"
    )
    print("|---|---|---|---|---|---|---|")
    for path in args.files:
        for name, row in rows(path, args.show, args.slices):
            print_row(name, row)
        if args.cut_at_cap:
            records, changed, lost = cut_at_cap(read(path), args.cut_at_cap)
            print_row(f"{path.name}, cut at the cap ({changed} changed, {lost} answers lost)",
                      summary(path, False, records))  # fmt: skip


def cut_at_cap(records: list[dict[str, Any]], cap: int) -> tuple[list[dict[str, Any]], int, int]:
    """The records with each reply as the whole-sentence rule leaves it, scored again; how
    many replies changed, and how many of them held the answer before and not after."""
    from membot.eval.answer_scores import contained, locomo_f1
    from membot.turn.artefacts import ReplyContext, clean_reply

    context = ReplyContext.of("AI", "HUMAN", whole_sentences=True)
    kept, changed, lost = [], 0, 0
    for record in records:
        at_cap = record["reply_tokens"] >= cap - 1
        reply = clean_reply(record["reply"], context, at_cap=at_cap).text
        if reply != record["reply"]:
            changed += 1
            said = contained(reply, record["answer"], record["category"])
            lost += record["contained"] and not said
            f1 = locomo_f1(reply, record["answer"], record["category"])
            record = record | {"reply": reply, "contained": said, "f1": f1}
        kept.append(record)
    return kept, changed, lost


def rows(path: Path, show: bool, slices: str) -> list[tuple[str, dict[str, Any]]]:
    """The file's row, then one per slice."""
    found = [(path.name, summary(path, show))]
    records = read(path)
    places = ranked(records)
    for part in filter(None, slices.split(",")):
        first, _, last = part.partition("-")
        chosen = [record for record, place in zip(records, places, strict=True)
                  if int(first) <= place <= int(last or first)]  # fmt: skip
        if chosen:  # a file may hold fewer places than a slice asks for
            found.append((f"{path.name}, {part}", summary(path, False, chosen)))
    return found


def print_row(name: str, row: dict[str, Any]) -> None:
    share = f"{row['said_share']:.0%}" if row["said_share"] is not None else "-"
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(row["kinds"].items()))
    print(
        f"| {name} | {row['n']} | {row['f1']:.3f} | {row['contained']} | {row['in_context']} | "
        f"{row['said_in_context']} ({share}) | {row['artefacts']} "
        f"({row['artefact_share']:.0%}){f': {kinds}' if kinds else ''} |"
    )


if __name__ == "__main__":
    main()

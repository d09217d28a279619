"""Could a question's words be widened by the embedder's neighbours among a store's words?

LoCoMo's multi-hop and open-domain evidence lines are instances of what the question names
("swimming" for "activities", "violin" for "instruments") and share no word with it
(docs/recall.md, "Why multi-hop and open-domain questions miss"). One design for a second
round without an LLM: embed each word of the conversation once, and search also with the
words whose vectors lie near the question's own content words. Before building it, this
script measures whether those words tell the evidence from the rest.

For each conversation: its vocabulary is the words of its lines as stored (the photo caption
included), four letters or more, no stopword, no speaker's name, each embedded alone with the
bundled MiniLM. For each multi-hop and open-domain question, its content words (the same
rules) are embedded, and its *expansion* is every vocabulary word whose cosine with one of
them is at least ``--threshold``, less the question's own words and words sharing their first
five letters ("camped" and "camping"). It prints, for each threshold, the share of evidence
lines that hold an expansion word and no question word (what the expansion could add) beside
the share of the other lines of the conversation that do (what it would also raise), and the
share of evidence lines holding a question word (what BM25 reads today); with ``--rank``, for
a few words that name a kind of thing, where instances of it rank among the first
conversation's words.

    .venv/bin/python benchmarks/expansion_words.py ../shared/data/locomo/locomo_dev.json
    .venv/bin/python benchmarks/expansion_words.py FILE --threshold 0.5 --show 10 --rank
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from membot.embed import Embedder, default_embedder
from membot.eval.locomo import lines_by_conversation
from membot.memory.importers import load_json
from membot.recall.bm25 import STOPWORDS

_WORD = re.compile(r"[a-z]+")
CATEGORIES = (1, 3)  # multi-hop, open-domain (membot.eval.locomo.CATEGORIES)
# A kind of thing, and instances of it that LoCoMo's conversations hold (--rank).
KINDS = {
    "activities": ("camping", "swimming", "painting", "pottery", "running"),
    "instruments": ("violin", "clarinet", "guitar", "piano"),
    "events": ("parade", "conference", "workshop", "festival"),
    "pets": ("dog", "cat", "horse", "turtle"),
}


def words(text: str, left_out: set[str]) -> set[str]:
    """The words of ``text`` of four letters or more that are not stopwords nor ``left_out``."""
    found = _WORD.findall(text.casefold())
    return {word for word in found if len(word) > 3 and word not in STOPWORDS} - left_out


def closeness(vectors: np.ndarray, asked: set[str], model: Embedder) -> np.ndarray:
    """Each vocabulary word's best cosine with one of the ``asked`` words (all 0 for none)."""
    if not asked:
        return np.zeros(len(vectors), dtype=np.float32)
    return (vectors @ model.embed(sorted(asked)).T).max(axis=1)


def expansion(
    vocabulary: list[str], best: np.ndarray, asked: set[str], threshold: float
) -> set[str]:
    """The vocabulary words whose ``best`` cosine with the ``asked`` words is at least
    ``threshold``, less ``asked`` and the words sharing the first five letters of one of them
    ("camped" and "camping")."""
    near = {vocabulary[index] for index in np.flatnonzero(best >= threshold)} - asked
    return {word for word in near if not any(word[:5] == own[:5] for own in asked)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--threshold", type=float, action="append", help="repeatable")
    parser.add_argument("--show", type=int, default=0, help="print N questions' expansions")
    parser.add_argument("--rank", action="store_true", help="instances' ranks among words")
    args = parser.parse_args()
    thresholds = args.threshold or [0.45, 0.55, 0.65]
    model = default_embedder()
    samples = {sample["sample_id"]: sample for sample in load_json(args.file)}
    counts = {threshold: np.zeros(4, dtype=np.int64) for threshold in thresholds}
    evidence_lines = asked_lines = questions = 0
    shown = 0
    for key, lines in lines_by_conversation(args.file).items():
        speakers = {
            word for line in lines for word in _WORD.findall((line.speaker or "").casefold())
        }
        said = {line.ref or "": words(line.text, speakers) for line in lines}
        vocabulary = sorted(set().union(*said.values()))
        vectors = model.embed(vocabulary)
        if args.rank and key == next(iter(samples)):
            _print_ranks(vocabulary, vectors, model)
        for qa in samples[key]["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            asked = words(qa["question"], speakers)
            evidence = set(qa["evidence"])
            questions += 1
            evidence_lines += sum(ref in evidence for ref in said)
            asked_lines += sum(ref in evidence and bool(own & asked) for ref, own in said.items())
            best = closeness(vectors, asked, model)
            for threshold in thresholds:
                wider = expansion(vocabulary, best, asked, threshold)
                for ref, own in said.items():
                    added = bool(own & wider) and not own & asked
                    hit = ref in evidence
                    counts[threshold] += (hit, hit and added, not hit, not hit and added)
                if shown < args.show and threshold == thresholds[0]:
                    print(f"{qa['question']} -> {', '.join(sorted(wider)[:15])}")
                    shown += 1
    print(f"{questions} questions (multi-hop and open-domain), {evidence_lines} evidence lines; "
          f"holding a question word: {asked_lines / max(evidence_lines, 1):.3f}")  # fmt: skip
    print("threshold  evidence lines with an expansion word only  other lines")
    for threshold, row in counts.items():
        in_evidence, widened, in_other, widened_other = (int(count) for count in row)
        shares = widened / max(in_evidence, 1), widened_other / max(in_other, 1)
        print(f"{threshold:9.2f}  {shares[0]:42.3f}  {shares[1]:11.3f}")


def _print_ranks(vocabulary: list[str], vectors: np.ndarray, model: Embedder) -> None:
    """Where each instance of :data:`KINDS` ranks by cosine with its kind among the words."""
    for kind, instances in KINDS.items():
        scores = vectors @ model.embed([kind])[0]
        ranks = _ranks(vocabulary, scores, instances)
        print(f"{kind} ({len(vocabulary)} words): {ranks}")


def _ranks(vocabulary: list[str], scores: np.ndarray, instances: Iterable[str]) -> str:
    found = []
    for word in instances:
        if word in vocabulary:
            score = scores[vocabulary.index(word)]
            found.append(f"{word} {int((scores > score).sum()) + 1} ({score:.2f})")
    return ", ".join(found) or "none in this conversation"


if __name__ == "__main__":
    main()

"""Where two lines count as near-duplicates for recall, with the bundled all-MiniLM-L6-v2.

Recall collapses matches whose vectors' cosine reaches ``DUPLICATE_COSINE``
(:mod:`membot.recall.duplicates`) into one. This script measures where that bar should sit:

* hand-made pairs: the same line again with small changes ("when is my exam?", "When's my
  exam??"), which should collapse, and lines alike in words but saying something else ("when
  is my maths exam?", "My exam is on 12 December."), which must not;
* the benchmark conversations in ``../shared/data`` (LoCoMo dev, and the user lines of the
  first 20 LongMemEval_S dev haystacks): for each cosine band, how many pairs of lines of one
  conversation fall in it, with a few examples, to see what a bar would collapse in real talk.

Run from the project root (about a minute on 2 cores with the embedding cache warm)::

    .venv/bin/python benchmarks/near_duplicates.py
"""

from __future__ import annotations

import itertools
import json

import numpy as np
from calibrate_threshold import LOCOMO_PATH, LONGMEMEVAL_PATH, encode_all, load_locomo

from membot.recall.duplicates import normalised

SAME = (  # each pair: one line said again, worded a little differently
    ("when is my exam?", "When is my exam?"),
    ("when is my exam?", "when is my exam??"),
    ("when is my exam?", "When's my exam?"),
    ("when is my exam?", "when is my exam again?"),
    ("when is my exam?", "so when is my exam"),
    ("when is my exam?", "What day is my exam?"),
    ("What's my sister's name?", "what is my sister's name"),
    ("Thanks!", "thanks"),
    ("thanks!", "thank you!"),
    ("I don't know when your exam is.", "I don't know when your exam is!"),
    ("Where did I park the car?", "where did I park my car?"),
)
DIFFERENT = (  # alike in words, not the same thing said
    ("when is my exam?", "My exam is on 12 December."),
    ("when is my exam?", "when is my maths exam?"),
    ("when is my maths exam?", "when is my physics exam?"),
    ("when is my exam?", "when was my exam?"),
    ("when is my exam?", "when is my dentist appointment?"),
    ("My exam is on 12 December.", "My exam is on 14 December."),
    ("I love my cat.", "I love my dog."),
    ("See you tomorrow!", "See you on Monday!"),
    ("I don't know when your exam is.", "Your exam is on 12 December."),
    ("Where did I park the car?", "Where did I leave my keys?"),
    ("My sister is called Anna.", "My sister is called Maria."),
    ("I live in Paris.", "I live in Berlin."),
    ("I like green tea.", "I don't like green tea."),
    ("My exam is on 12 December.", "My exam is on 12 January."),
    ("My exam is on 12 December.", "My exam was on 12 December."),
    ("The meeting is at 3pm.", "The meeting is at 4pm."),
    ("GOAL 4 Objective 2 Ideas please", "GOAL 5 Objective 1 Ideas please"),
)
BANDS = (0.85, 0.90, 0.92, 0.95, 0.97, 0.99, 1.01)
LONGMEMEVAL_HAYSTACKS = 20
EXAMPLES = 3


def pair_table(title: str, pairs: tuple[tuple[str, str], ...], vectors: dict) -> list[float]:
    print(f"\n{title}")
    cosines = []
    for a, b in pairs:
        cosine = float(vectors[a] @ vectors[b])
        same_text = normalised(a) == normalised(b)
        cosines.append(cosine)
        print(f"  {cosine:5.3f} {'(same normalised text) ' if same_text else ''}{a!r} / {b!r}")
    return cosines


def conversations() -> list[list[str]]:
    """LoCoMo dev's conversations and the user lines of the first LongMemEval_S haystacks."""
    histories, _ = load_locomo(LOCOMO_PATH)
    talks = [history.texts for history in histories]
    for item in json.loads(LONGMEMEVAL_PATH.read_text())[:LONGMEMEVAL_HAYSTACKS]:
        sessions = item["haystack_sessions"]
        talks.append([turn["content"] for s in sessions for turn in s if turn["role"] == "user"])
    return talks


def band_table(talks: list[list[str]], vectors: dict) -> None:
    """Pairs of lines of one conversation by cosine band, with examples of each."""
    counts = np.zeros(len(BANDS) - 1, dtype=int)
    same_text = np.zeros(len(BANDS) - 1, dtype=int)
    examples: list[list[tuple[float, str, str]]] = [[] for _ in BANDS[:-1]]
    total = 0
    for texts in talks:
        matrix = np.stack([vectors[text] for text in texts])
        cosines = np.triu(matrix @ matrix.T, k=1)
        total += len(texts) * (len(texts) - 1) // 2
        for band, (low, high) in enumerate(itertools.pairwise(BANDS)):
            rows, columns = np.nonzero((cosines >= low) & (cosines < high))
            counts[band] += len(rows)
            for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
                a, b = texts[row], texts[column]
                same_text[band] += normalised(a) == normalised(b)
                if len(examples[band]) < EXAMPLES and normalised(a) != normalised(b):
                    examples[band].append((float(cosines[row, column]), a[:70], b[:70]))
    print(f"\nPairs of lines of one conversation ({len(talks)} conversations, {total:,} pairs)")
    for band, (low, high) in enumerate(itertools.pairwise(BANDS)):
        print(f"  [{low:.2f}, {min(high, 1.0):.2f}{')' if high <= 1 else ']'}: {counts[band]:6,}"
              f" pairs, {same_text[band]:,} of them the same normalised text")  # fmt: skip
        for cosine, a, b in examples[band]:
            print(f"      {cosine:.3f} {a!r} / {b!r}")


def main() -> None:
    talks = conversations()
    texts = [text for pair in SAME + DIFFERENT for text in pair]
    vectors, name = encode_all("minilm", [*texts, *(text for talk in talks for text in talk)])
    print(f"embedder: {name}")
    same = pair_table("The same line again (should collapse):", SAME, vectors)
    different = pair_table("Alike, but saying something else (must not):", DIFFERENT, vectors)
    print(f"\nlowest 'same' cosine {min(same):.3f}; highest 'different' {max(different):.3f}")
    band_table(talks, vectors)


if __name__ == "__main__":
    main()

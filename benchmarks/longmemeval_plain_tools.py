"""The issue's reference points on LongMemEval, rebuilt: plain tools over the user turns.

Issue 3 gives, for the dev file, what plain tools measure: MiniLM over user turns (session
recall_all@5 / turn recall_all@10 / turn ndcg_any@10 about 0.86 / 0.73 / 0.63) and MiniLM +
BM25 fused by reciprocal rank (about 0.94 / 0.80 / 0.70). This script ranks every counted
question's user turns both ways, with nothing of membot's recall in between (no store, no
expansion, no speaker prefix), and scores the rankings with the harness's metric code under
each session reading of ``membot.eval.longmemeval``: ``session`` (sessions ranked by their best
turn, scored with the official session metric) and ``session_turn2session`` (the official
``evaluate_retrieval_turn2session``). For comparison it also runs the official
session-granularity retrieval, where each session's user turns, joined, are one document
(``session documents``). Which reading comes closest to the issue's numbers tells how its
session target was measured.

BM25 is Okapi BM25 (k1 1.2, b 0.75) over lower-cased ``\\w+`` words, stopwords kept;
reciprocal rank fusion adds ``1 / (60 + rank)`` of both rankings.

Run from the project root (seconds with a warm embedding cache; the session documents take
about a minute to embed the first time)::

    .venv/bin/python benchmarks/longmemeval_plain_tools.py [FILE]
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from membot.eval import shared_data_dir
from membot.eval.harness import cached_embedder
from membot.eval.longmemeval import Corpus, question_scores
from membot.eval.metrics import evaluate_retrieval, mean_by_key
from membot.recall.bm25 import TermIndex

DEV_FILE = shared_data_dir() / "longmemeval" / "longmemeval_s_dev.json"
_WORD = re.compile(r"\w+")
SHOWN = (
    ("session", "recall_all@5"),
    ("session_turn2session", "recall_all@5"),
    ("session_documents", "recall_all@5"),
    ("turn", "recall_all@10"),
    ("turn", "ndcg_any@10"),
)


def user_turns(question: dict) -> list[str]:
    """The question's user turns in corpus order (the order ``Corpus.of`` gives them ids)."""
    return [
        turn["content"]
        for session in question["haystack_sessions"]
        for turn in session
        if turn["role"] == "user"
    ]


def session_documents(question: dict) -> tuple[list[str], list[str]]:
    """The official session-granularity corpus: each session's user turns joined, and its id,
    renamed ``noans`` for an answer session without a user turn marked ``has_answer``."""
    texts, ids = [], []
    for session_id, turns in zip(
        question["haystack_session_ids"], question["haystack_sessions"], strict=True
    ):
        users = [turn for turn in turns if turn["role"] == "user"]
        texts.append(" ".join(turn["content"] for turn in users))
        marked = any(turn.get("has_answer") for turn in users)
        ids.append(session_id.replace("answer", "noans") if "answer" in session_id and not marked
                   else session_id)  # fmt: skip
    return texts, ids


def fused(dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """Reciprocal rank fusion of two score arrays (k = 60)."""
    return 1 / (60 + ranks(dense)) + 1 / (60 + ranks(lexical))


def bm25(texts: list[str], query: str) -> np.ndarray:
    terms = TermIndex([Counter(_WORD.findall(text.lower())) for text in texts])
    return terms.bm25(_WORD.findall(query.lower()))


def ranks(scores: np.ndarray) -> np.ndarray:
    """Each item's place (0 = best) when sorted by score, ties in corpus order."""
    order = np.argsort(-scores, kind="stable")
    places = np.empty_like(order)
    places[order] = np.arange(order.size)
    return places


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEV_FILE
    questions = json.loads(path.read_text(encoding="utf-8"))
    embedder = cached_embedder()
    rows: dict[str, list[dict[str, dict[str, float]]]] = {"MiniLM": [], "MiniLM + BM25 (RRF)": []}
    for question in questions:
        corpus = Corpus.of(question)
        if not corpus.counted:
            continue
        texts = user_turns(question)
        query = np.asarray(embedder.embed([question["question"]])[0])
        dense = np.asarray(embedder.embed(texts)) @ query
        lexical = bm25(texts, question["question"])
        documents, ids = session_documents(question)
        dense_documents = np.asarray(embedder.embed(documents)) @ query
        lexical_documents = bm25(documents, question["question"])
        gold = {doc_id for doc_id in ids if "answer" in doc_id}
        for name, scores, document_scores in (
            ("MiniLM", dense, dense_documents),
            (
                "MiniLM + BM25 (RRF)",
                fused(dense, lexical),
                fused(dense_documents, lexical_documents),
            ),
        ):
            order = np.argsort(-scores, kind="stable").tolist()
            row = question_scores(order, corpus)
            documents_order = np.argsort(-document_scores, kind="stable").tolist()
            recall_all = evaluate_retrieval(documents_order, gold, ids, 5).recall_all
            rows[name].append(row | {"session_documents": {"recall_all@5": recall_all}})
    count = len(next(iter(rows.values())))
    print(f"{path.name}: {count} questions (no _abs, a user turn marked has_answer)\n")
    print("| ranking | " + " | ".join(f"{level} {metric}" for level, metric in SHOWN) + " |")
    print("|---" * (len(SHOWN) + 1) + "|")
    for name, scored in rows.items():
        means = {level: mean_by_key([row[level] for row in scored]) for level, _ in SHOWN}
        cells = " | ".join(f"{means[level][metric]:.3f}" for level, metric in SHOWN)
        print(f"| {name} | {cells} |")


if __name__ == "__main__":
    main()

"""Retrieval metrics of the two benchmarks, as their official code computes them.

LongMemEval (``src/retrieval/eval_utils.py``): a ranking is a list of indices into
``corpus_ids``; ``recall_any@k`` is 1 when any gold id is in the top k, ``recall_all@k`` when
every gold id is (so 1 when there is no gold), ``ndcg_any@k`` the NDCG of binary relevance whose
ideal ranking puts every gold item of the corpus first. Session scores of a turn ranking are read
two ways: the official ``evaluate_retrieval_turn2session`` (turn ids lose their ``_<turn>``
suffix and k grows until the top k turns hold k distinct sessions), and membot's own session
ranking (sessions by their best turn) scored with the official ``evaluate_retrieval``, as the
official session-granularity run scores its sessions.

LoCoMo (``task_eval/evaluation.py``): evidence recall is the fraction of a question's evidence
``dia_id`` entries found among the dialog turns in context; a question without evidence scores 1.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RetrievalScores:
    recall_any: float
    recall_all: float
    ndcg_any: float


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first ``k`` relevances (the first is not discounted)."""
    values = np.asarray(relevances, dtype=float)[:k]
    if values.size == 0:
        return 0.0
    return float(values[0] + np.sum(values[1:] / np.log2(np.arange(2, values.size + 1))))


def ndcg(
    rankings: Sequence[int], correct: Collection[str], corpus_ids: Sequence[str], k: int
) -> float:
    """NDCG@k with relevance 1 for every corpus item whose id is in ``correct``."""
    relevances = [1 if doc_id in correct else 0 for doc_id in corpus_ids]
    ideal = dcg(sorted(relevances, reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([relevances[index] for index in rankings[:k]], k) / ideal


def evaluate_retrieval(
    rankings: Sequence[int], correct: Collection[str], corpus_ids: Sequence[str], k: int
) -> RetrievalScores:
    recalled = {corpus_ids[index] for index in rankings[:k]}
    return RetrievalScores(
        recall_any=float(any(doc in recalled for doc in correct)),
        recall_all=float(all(doc in recalled for doc in correct)),
        ndcg_any=ndcg(rankings, correct, corpus_ids, k),
    )


def strip_turn_id(doc_id: str) -> str:
    """``answer_4be1b6b4_2_7`` -> ``answer_4be1b6b4_2``: the session of a turn id."""
    return "_".join(doc_id.split("_")[:-1])


def evaluate_sessions(
    rankings: Sequence[int], correct_sessions: Collection[str], corpus_sessions: Sequence[str],
    k: int,
) -> RetrievalScores:  # fmt: skip
    """Session scores of a turn ranking, ``corpus_sessions`` giving each turn's session:
    k turns are read until they hold k distinct sessions (or the corpus ends)."""
    effective_k = k
    seen = {corpus_sessions[index] for index in rankings[:effective_k]}
    while effective_k <= len(corpus_sessions) and len(seen) < k:
        effective_k += 1
        seen = {corpus_sessions[index] for index in rankings[:effective_k]}
    return evaluate_retrieval(rankings, correct_sessions, corpus_sessions, effective_k)


def evaluate_turn_to_session(
    rankings: Sequence[int], correct_turns: Iterable[str], corpus_turn_ids: Sequence[str], k: int
) -> RetrievalScores:
    """LongMemEval's ``evaluate_retrieval_turn2session``."""
    correct = {strip_turn_id(doc_id) for doc_id in correct_turns}
    return evaluate_sessions(rankings, correct, [strip_turn_id(i) for i in corpus_turn_ids], k)


def sessions_by_best_turn(rankings: Sequence[int], corpus_sessions: Sequence[str]) -> list[str]:
    """Each session once, in the order its first turn appears in a turn ranking."""
    return list(dict.fromkeys(corpus_sessions[index] for index in rankings))


def evaluate_session_ranking(
    rankings: Sequence[int], gold_sessions: Collection[str], corpus_sessions: Sequence[str],
    k: int,
) -> RetrievalScores:  # fmt: skip
    """Session scores with sessions as the retrieved items: the turn ranking read as a ranking
    of sessions by their best turn, scored like the official session-granularity run (the top
    k sessions; NDCG over every session of the corpus). Sessions come from the turns: one
    without turns is not in the corpus (it could never be gold), and a session id given twice
    counts once."""
    sessions = sessions_by_best_turn(rankings, corpus_sessions)
    sessions += [session for session in dict.fromkeys(corpus_sessions) if session not in sessions]
    return evaluate_retrieval(range(len(sessions)), gold_sessions, sessions, k)


def keyed(scores: RetrievalScores, k: int) -> dict[str, float]:
    """The official report keys: ``recall_any@k``, ``recall_all@k``, ``ndcg_any@k``."""
    return {
        f"recall_any@{k}": scores.recall_any,
        f"recall_all@{k}": scores.recall_all,
        f"ndcg_any@{k}": scores.ndcg_any,
    }


def evidence_recall(context: Iterable[str], evidence: Sequence[str]) -> float:
    """LoCoMo's recall accuracy: evidence entries in context over evidence entries, or 1."""
    if not evidence:
        return 1.0
    placed = set(context)
    return sum(entry in placed for entry in evidence) / len(evidence)


def mean_by_key(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of every key over ``rows`` (all rows share their keys); empty for no rows."""
    if not rows:
        return {}
    return {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}

"""Where LongMemEval's missed evidence turns rank, and what ranks above them.

For each counted question (no ``_abs``, a user turn marked ``has_answer``) whose turn
recall_all@10 is 0 under ``blend`` (``--set`` options as ``membot eval``), it reads the ranking
as ``membot eval longmemeval`` does and prints, per question, the ranks of its evidence turns,
their sessions' ranks (sessions by their best turn), their rank among their own session's
turns, their place in their session (0: the session's first user turn), their length and
their days before the question; then a summary of the missed evidence turns against the
turns ranked in the first 10 above them. docs/recall.md, "The line that opens a thread".

    .venv/bin/python benchmarks/longmemeval_misses.py reports/longmemeval_s_dev_dev2.json
    .venv/bin/python benchmarks/longmemeval_misses.py FILE --set opener_weight=0.2
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_EMBEDDER, parse_numbers
from membot.eval.harness import cached_embedder, fresh_memory
from membot.eval.longmemeval import Corpus, corpus_ranking, haystack_lines
from membot.memory.importers import load_json, parse_time
from membot.recall.ranked import settings_for_ranking


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=V")
    args = parser.parse_args()
    options = parse_numbers(args.set)
    settings = settings_for_ranking("blend", options)
    model = cached_embedder(DEFAULT_EMBEDDER)
    questions = load_json(args.file)
    counted, missed, beaten = 0, [], []
    every_place: list[int] = []
    gold_place: list[int] = []
    for question in questions:
        corpus = Corpus.of(question)
        if not corpus.counted:
            continue
        counted += 1
        turns = _turns(question, corpus)
        every_place += [turn["place"] for turn in turns]
        asked = parse_time(question["question_date"])
        with fresh_memory(model, haystack_lines(args.file, question)) as memory:
            order = corpus_ranking(memory, settings, question["question"], corpus, asked)
        gold = [index for index, doc_id in enumerate(corpus.ids) if "answer" in doc_id]
        gold_place += [turns[index]["place"] for index in gold]
        if set(gold) <= set(order[:10]):
            continue
        rank = {index: place for place, index in enumerate(order)}
        session_rank: dict[str, int] = {}
        for index in order:
            session_rank.setdefault(corpus.sessions[index], len(session_rank))
        rows = []
        for index in gold:
            same = [other for other in order if corpus.sessions[other] == corpus.sessions[index]]
            where = {"rank": rank[index], "in_session": same.index(index),
                     "session_rank": session_rank[corpus.sessions[index]]}  # fmt: skip
            rows.append(turns[index] | where)
        missed.append((question, rows))
        beaten += [turns[index] for index in order[:10] if index not in gold]
        _print_question(question, rows)
    _print_summary(counted, missed, beaten, every_place)
    opening = sum(place == 0 for place in gold_place) / len(gold_place) if gold_place else 0.0
    print(f"every evidence turn ({len(gold_place)}): its session's first user turn {opening:.2f}")


def _turns(question: dict[str, Any], corpus: Corpus) -> list[dict[str, Any]]:
    """Each corpus turn's place among its session's user turns, length and days before the
    question."""
    asked = parse_time(question["question_date"])
    dates = dict(zip(question["haystack_session_ids"], question["haystack_dates"], strict=True))
    places: Counter[str] = Counter()
    found = []
    texts = {
        f"{session}:{index}": turn["content"]
        for session, turns in zip(
            question["haystack_session_ids"], question["haystack_sessions"], strict=True
        )
        for index, turn in enumerate(turns)
    }
    for ref, session in zip(corpus.refs, corpus.sessions, strict=True):
        days = (asked - parse_time(dates[session])).total_seconds() / 86400
        found.append({"place": places[session], "length": len(texts[ref]), "days": days})
        places[session] += 1
    return found


def _print_question(question: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    def listed(key: str) -> str:
        return " ".join(str(round(row[key])) for row in rows)

    print(f"{question['question_id']} ({question['question_type']}): {question['question']}")
    print(f"  evidence ranks {listed('rank')}; session ranks {listed('session_rank')}; rank in "
          f"session {listed('in_session')}; place in session {listed('place')}; length "
          f"{listed('length')}; days before {listed('days')}")  # fmt: skip


def _print_summary(
    counted: int, missed: list[Any], beaten: list[dict[str, Any]], every_place: list[int]
) -> None:
    lost = [row for _, rows in missed for row in rows if row["rank"] >= 10]
    kinds = Counter(question["question_type"] for question, _ in missed)
    print(f"\n{counted} counted questions, {len(missed)} with turn recall_all@10 0: {dict(kinds)}")
    if not lost:
        return
    several = sum(len({row["session_rank"] for row in rows}) > 1 for _, rows in missed)
    print(f"  {several} of them have evidence in several sessions")

    def share(rows: list[dict[str, Any]], test: Any) -> str:
        return f"{sum(map(test, rows)) / len(rows):.2f}"

    print(f"evidence turns ranked 10 or lower: {len(lost)}; rank median "
          f"{statistics.median(row['rank'] for row in lost)}")  # fmt: skip
    print(
        f"  in one of the first 5 sessions: {share(lost, lambda r: r['session_rank'] < 5)}; "
        f"not their session's best turn: {share(lost, lambda r: r['in_session'] > 0)}"
    )
    print(
        f"  the first user turn of their session: {share(lost, lambda r: r['place'] == 0)} "
        f"(of the non-evidence turns in the first 10: {share(beaten, lambda r: r['place'] == 0)}"
        f"; of every corpus turn: {sum(p == 0 for p in every_place) / len(every_place):.2f})"
    )
    for key in ("length", "days"):
        print(
            f"  {key} median: {statistics.median(row[key] for row in lost):.0f} (the turns "
            f"above them: {statistics.median(row[key] for row in beaten):.0f})"
        )


if __name__ == "__main__":
    main()

"""LongMemEval retrieval metrics (Wu et al. 2024) of a recall strategy, as a turn runs it.

Each question's haystack goes into a fresh store through the LongMemEval importer (one thread
per session, dated as given), user turns only: the official turn corpus holds no assistant
turns, and embedding them would double the run's time for lines no metric reads. The question
is the query line (not stored), asked at its ``question_date`` (``now`` for the strategy, which
may read the time the question points to); the live turn's code with no threshold
(:mod:`membot.recall.ranked`) orders the lines, expansion included,
and the ranking is read over the official corpus of ``src/retrieval/run_retrieval.py`` at turn
granularity: the user turns, with id ``<session id>_<turn number from 1>``, where a turn of an
``answer`` session without ``has_answer`` is renamed ``noans``; gold = ids holding ``answer``.
Lines a strategy does not rank follow in corpus order, so every ranking covers the corpus.

- ``turn``: the official turn metrics, averaged like the official code over the questions that
  are not abstentions (``_abs``) and hold a user turn marked ``has_answer``;
- ``session``: sessions as the items retrieved: the turn ranking read as sessions ranked by
  their best turn (membot's own session ranking), scored with the official metric code as the
  official session-granularity run scores its sessions; gold = the sessions holding a marked
  user turn (that run renames the others ``noans``); same questions. This reading reproduces
  the issue's reference numbers for plain tools: MiniLM over user turns gives session
  recall_all@5 0.863 here, and MiniLM + BM25 by reciprocal rank 0.941
  (``benchmarks/longmemeval_plain_tools.py``);
- ``session_turn2session``: the official ``evaluate_retrieval_turn2session`` of the turn run,
  where an answer session's unmarked turns (``noans``) count as a session of their own, so a
  session counts only once a marked turn of it is read (MiniLM over user turns: 0.686);
- ``session_any_gold``: session metrics with gold = ``answer_session_ids`` as given, over
  every question that is not an abstention;
- ``bm25_baseline``: the same four for the ``bm25`` strategy without expansion, same stores.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings
from membot.embed import Embedder
from membot.eval.harness import cached_embedder, fresh_memory, progress_bar, rounded
from membot.eval.metrics import (
    evaluate_retrieval,
    evaluate_session_ranking,
    evaluate_sessions,
    evaluate_turn_to_session,
    keyed,
    mean_by_key,
)
from membot.index.vectors import Scope
from membot.memory.facade import Memory
from membot.memory.importers import parse_time, read_file
from membot.model import Role
from membot.recall.ranked import ranked_lines, settings_for_ranking

K_VALUES = (1, 3, 5, 10, 30, 50)


@dataclass(frozen=True)
class Corpus:
    """The official turn-level corpus of one question: its user turns."""

    refs: list[str]  # the importer's ``<session id>:<turn index>`` of each user turn
    ids: list[str]  # official ids, ``noans`` renaming applied
    sessions: list[str]  # each turn's session id as given
    answer_sessions: list[str]
    abstention: bool  # ``_abs``: the question asks about something never said
    marked: bool  # some user turn is marked ``has_answer``

    @property
    def counted(self) -> bool:
        """Averaged by the official code: no abstention, a user-side evidence turn."""
        return not self.abstention and self.marked

    @property
    def gold(self) -> set[str]:
        return {doc_id for doc_id in self.ids if "answer" in doc_id}

    @property
    def gold_sessions(self) -> set[str]:
        """The sessions holding a user turn marked ``has_answer``."""
        pairs = zip(self.sessions, self.ids, strict=True)
        return {session for session, doc_id in pairs if "answer" in doc_id}

    @classmethod
    def of(cls, question: dict[str, Any]) -> Corpus:
        refs, ids, sessions = [], [], []
        marked = False
        for session_id, turns in zip(
            question["haystack_session_ids"], question["haystack_sessions"], strict=True
        ):
            for index, turn in enumerate(turns):
                if turn["role"] != "user":
                    continue
                doc_id = f"{session_id}_{index + 1}"
                if "answer" in session_id and not turn.get("has_answer"):
                    doc_id = doc_id.replace("answer", "noans")
                marked = marked or bool(turn.get("has_answer"))
                refs.append(f"{session_id}:{index}")
                ids.append(doc_id)
                sessions.append(session_id)
        abstention = "_abs" in question["question_id"]
        return cls(refs, ids, sessions, list(question["answer_session_ids"]), abstention, marked)


def evaluate_longmemeval(
    path: Path,
    strategy: str = "blend",
    embedder: Embedder | str = DEFAULT_EMBEDDER,
    show_progress: bool = True,
    options: Mapping[str, float] | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """The official turn and session metrics at k = 1, 3, 5, 10, 30, 50, with a BM25 baseline."""
    started = time.perf_counter()
    rankings = {
        "strategy": settings_for_ranking(strategy, options),
        "bm25_baseline": settings_for_ranking("bm25", {"expand_before": 0, "expand_after": 0}),
    }
    questions = json.loads(Path(path).read_text(encoding="utf-8"))
    questions = questions if isinstance(questions, list) else [questions]
    lines_by_question = defaultdict(list)
    for line in read_file(Path(path), "longmemeval", DEFAULT_BOT, None).lines:
        if line.role == Role.HUMAN:  # the official corpus; assistant turns would double the cost
            lines_by_question[line.user].append(line)
    model = cached_embedder(embedder) if isinstance(embedder, str) else embedder
    scores: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in rankings}
    corpora = []
    with progress_bar(show_progress) as progress:
        task = progress.add_task(f"LongMemEval {strategy}", total=len(questions))
        for question in questions:
            corpus = Corpus.of(question)
            corpora.append(corpus)
            lines = lines_by_question[question["question_id"]]
            asked = parse_time(question["question_date"]) if "question_date" in question else None
            with fresh_memory(model, lines, db) as memory:
                for name, settings in rankings.items():
                    order = corpus_ranking(memory, settings, question["question"], corpus, asked)
                    scores[name].append(question_scores(order, corpus))
            progress.advance(task)
    report = _averages(scores["strategy"], corpora)
    return {
        "benchmark": "longmemeval",
        "file": str(path),
        "strategy": strategy,
        "options": dict(options or {}),
        "embedder": model.name,
        "questions": len(questions),
        "n": sum(corpus.counted for corpus in corpora),
        "n_session_any_gold": sum(not corpus.abstention for corpus in corpora),
        "corpus": "user turns only (official turn granularity); metrics averaged over n "
        "questions: no _abs, at least one user turn marked has_answer",
        "session_levels": "session: sessions ranked by their best turn, gold = sessions holding "
        "a marked user turn (official session-granularity scoring); session_turn2session: the "
        "official evaluate_retrieval_turn2session (unmarked turns of an answer session count "
        "as a noans session)",
        **report,
        "baseline": "bm25_baseline: the bm25 strategy over the same stores, no expansion",
        "bm25_baseline": _averages(scores["bm25_baseline"], corpora),
        "seconds": round(time.perf_counter() - started, 1),
    }


def corpus_ranking(
    memory: Memory,
    settings: BotSettings,
    query: str,
    corpus: Corpus,
    now: datetime | None = None,
) -> list[int]:
    """The strategy's ranking as corpus indices, unranked corpus turns last in corpus order;
    ``now`` is the question's date."""
    scope = Scope.of(memory.store.bot_id(DEFAULT_BOT) or 0, None, roles=("human",))
    index_of = {ref: index for index, ref in enumerate(corpus.refs)}
    order: dict[int, None] = {}
    for line in memory.store.lines(ranked_lines(memory.recall_source, settings, query, scope, now)):
        if line.ref in index_of:  # a line outside the official corpus is not scored
            order.setdefault(index_of[line.ref])
    for index in range(len(corpus.refs)):
        order.setdefault(index)
    return list(order)


def question_scores(order: Sequence[int], corpus: Corpus) -> dict[str, dict[str, float]]:
    turn: dict[str, float] = {}
    session: dict[str, float] = {}
    turn2session: dict[str, float] = {}
    any_gold: dict[str, float] = {}
    gold = corpus.gold
    for k in K_VALUES:
        turn |= keyed(evaluate_retrieval(order, gold, corpus.ids, k), k)
        session |= keyed(
            evaluate_session_ranking(order, corpus.gold_sessions, corpus.sessions, k), k
        )
        turn2session |= keyed(evaluate_turn_to_session(order, gold, corpus.ids, k), k)
        any_gold |= keyed(evaluate_sessions(order, corpus.answer_sessions, corpus.sessions, k), k)
    return {
        "turn": turn,
        "session": session,
        "session_turn2session": turn2session,
        "session_any_gold": any_gold,
    }


def _averages(
    scores: Sequence[dict[str, dict[str, float]]], corpora: Sequence[Corpus]
) -> dict[str, dict[str, float]]:
    counted = [row for row, corpus in zip(scores, corpora, strict=True) if corpus.counted]
    pairs = list(zip(scores, corpora, strict=True))
    not_abstention = [row for row, corpus in pairs if not corpus.abstention]
    return {
        "session": rounded(mean_by_key([row["session"] for row in counted])),
        "session_turn2session": rounded(
            mean_by_key([row["session_turn2session"] for row in counted])
        ),
        "turn": rounded(mean_by_key([row["turn"] for row in counted])),
        "session_any_gold": rounded(
            mean_by_key([row["session_any_gold"] for row in not_abstention])
        ),
    }

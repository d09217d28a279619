"""LongMemEval retrieval metrics (Wu et al. 2024) of a recall strategy, as a turn runs it.

Each question's haystack goes into a fresh store as the LongMemEval importer writes it (one
thread per session, dated as given), user turns only: the official turn corpus holds no
assistant turns, and embedding them would double the run's time for lines no metric reads.
Every turn is stored whole, however long (membot cuts a long line into parts for its vectors,
:mod:`membot.memory.line_parts`). The question
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

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings
from membot.embed import Embedder
from membot.errors import ConfigError, ImportFormatError
from membot.eval.folds import Grid, cross_validate, folds_by_item, metric_reader
from membot.eval.harness import cached_embedder, fresh_memory, progress_bar, rounded
from membot.eval.metrics import (
    RetrievalScores,
    evaluate_retrieval,
    evaluate_session_ranking,
    evaluate_sessions,
    evaluate_turn_to_session,
    keyed,
    mean_by_key,
)
from membot.index.vectors import Scope
from membot.line_checks import checked_line
from membot.memory.facade import Memory
from membot.memory.importers import load_json_items, parse_time
from membot.model import LineInput
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
    folds: int | None = None,
    choose: Mapping[str, Sequence[float]] | None = None,
    metric: str = "turn.recall_all@10",
) -> dict[str, Any]:
    """The official turn and session metrics at k = 1, 3, 5, 10, 30, 50, with a BM25 baseline,
    and by question type; with ``folds``, each fold's held-out numbers (questions split by
    :func:`folds_by_item`), and with ``choose``, the grid point each fold chose on the others
    by ``metric`` (:mod:`membot.eval.folds`)."""
    started = time.perf_counter()
    grid = Grid.for_run(strategy, options, choose, folds)
    questions = load_json_items(Path(path))
    ids = [question["question_id"] for question in questions]
    types = [question.get("question_type", "") for question in questions]
    primary = metric_reader(metric, _metric_template())  # a wrong name fails now, not after
    fold_of = folds_by_item(ids, types, folds) if folds else []
    haystacks = [haystack_lines(path, question) for question in questions]
    model = cached_embedder(embedder) if isinstance(embedder, str) else embedder
    scored = _score(questions, haystacks, grid, model, db, show_progress)
    report = {
        "benchmark": "longmemeval",
        "file": str(path),
        "strategy": strategy,
        "options": dict(options or {}),
        "embedder": model.name,
        "questions": len(questions),
        "n": sum(corpus.counted for corpus in scored.corpora),
        "n_session_any_gold": sum(not corpus.abstention for corpus in scored.corpora),
        "corpus": "user turns only (official turn granularity); metrics averaged over n "
        "questions: no _abs, at least one user turn marked has_answer",
        "session_levels": "session: sessions ranked by their best turn, gold = sessions holding "
        "a marked user turn (official session-granularity scoring); session_turn2session: the "
        "official evaluate_retrieval_turn2session (unmarked turns of an answer session count "
        "as a noans session)",
        **scored.summary([(0, index) for index in range(len(questions))]),
        "baseline": "bm25_baseline: the bm25 strategy over the same stores, no expansion",
        "bm25_baseline": _averages(scored.baseline, scored.corpora),
    }
    if folds:
        labels = [f"{fold_of.count(fold)} questions" for fold in range(folds)]
        result = cross_validate(grid, fold_of, scored.summary, primary, labels)
        report["folds"] = {"split": "by question (stratified by type)", "metric": metric,
                           **result}  # fmt: skip
    return report | {"seconds": round(time.perf_counter() - started, 1)}


def haystack_lines(path: Path, question: Mapping[str, Any]) -> list[LineInput]:
    """The question's user turns as the LongMemEval importer writes them (a thread per
    session, dated as given, ``ref`` ``<session id>:<turn index>``), checked as a store checks
    them."""
    lines: list[LineInput] = []
    try:
        sessions = zip(question["haystack_session_ids"], question["haystack_dates"],
                       question["haystack_sessions"], strict=True)  # fmt: skip
        for session_id, date, turns in sessions:
            when = parse_time(date)
            for index, turn in enumerate(turns):
                if turn["role"] != "user" or not str(turn["content"]).strip():
                    continue
                ref = f"{session_id}:{index}"
                line = LineInput(turn["content"], question["question_id"], str(session_id),
                                 created_at=when, ref=ref, source_key=f"ref:{ref}")  # fmt: skip
                lines.append(checked_line(line))
    except (KeyError, TypeError, ValueError, ConfigError) as error:
        where = question.get("question_id", "?") if isinstance(question, Mapping) else "?"
        raise ImportFormatError(
            f"{path}: question {where}: not a LongMemEval question: {error}"
        ) from error
    return lines


@dataclass
class Scored:
    """Each question's scores under each distinct ranking of a grid, and the baseline's."""

    grid: Grid
    corpora: list[Corpus] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    by_ranking: list[list[dict[str, dict[str, float]]]] = field(default_factory=list)
    baseline: list[dict[str, dict[str, float]]] = field(default_factory=list)

    def summary(self, picks: Sequence[tuple[int, int]]) -> dict[str, Any]:
        """The report's numbers for the (grid point, question) ``picks``: averaged over the
        counted questions (``n``), and by question type."""
        rows = [self.by_ranking[self.grid.points[point].ranking][index] for point, index in picks]
        corpora = [self.corpora[index] for _, index in picks]
        types = [self.types[index] for _, index in picks]
        by_type = {}
        for name in sorted(set(types)):
            of_type = [(row, corpus) for row, corpus, kind in zip(rows, corpora, types, strict=True)
                       if kind == name and corpus.counted]  # fmt: skip
            if of_type:
                by_type[name] = {"n": len(of_type)} | {
                    level: rounded(mean_by_key([row[level] for row, _ in of_type]))
                    for level in ("session", "turn")
                }
        counted = sum(corpus.counted for corpus in corpora)
        return {"n": counted, **_averages(rows, corpora), "by_question_type": by_type}


def _score(
    questions: Sequence[dict[str, Any]],
    haystacks: Sequence[list[LineInput]],
    grid: Grid,
    model: Embedder,
    db: str | None,
    show_progress: bool,
) -> Scored:
    """Each haystack stored once; its question asked under every distinct ranking of the
    grid and the baseline's."""
    baseline = settings_for_ranking("bm25", {"expand_before": 0, "expand_after": 0})
    scored = Scored(grid, by_ranking=[[] for _ in grid.settings])
    with progress_bar(show_progress) as progress:
        task = progress.add_task(f"LongMemEval {grid.strategy}", total=len(questions))
        for question, lines in zip(questions, haystacks, strict=True):
            corpus = Corpus.of(question)
            scored.corpora.append(corpus)
            scored.types.append(question.get("question_type", ""))
            asked = parse_time(question["question_date"]) if "question_date" in question else None
            text = question["question"]
            with fresh_memory(model, lines, db) as memory:
                for place, settings in enumerate(grid.settings):
                    order = corpus_ranking(memory, settings, text, corpus, asked)
                    scored.by_ranking[place].append(question_scores(order, corpus))
                order = corpus_ranking(memory, baseline, text, corpus, asked)
                scored.baseline.append(question_scores(order, corpus))
            progress.advance(task)
    return scored


def _metric_template() -> dict[str, Any]:
    """A summary's shape, to check a metric's name against before a run."""
    numbers = {key: 0.0 for k in K_VALUES for key in keyed(RetrievalScores(0, 0, 0), k)}
    return {level: numbers for level in ("session", "session_turn2session", "turn",
                                         "session_any_gold")}  # fmt: skip


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

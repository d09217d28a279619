"""Answer accuracy on LoCoMo and LongMemEval: each question asked through ``Bot.turn``, the
reply scored against the benchmark's answer (``membot eval locomo|longmemeval --answers``).

Each conversation is stored as the recall harnesses store it (LoCoMo: one store per
conversation, every turn a line; LongMemEval: one store per question, its haystack's user
turns, or all turns with ``assistant_turns``). Each question is then a turn of the default bot
in a new thread of its own, by the person the lines belong to, with the bot's profile (and the
strategy and options given) and the chosen LLM, at the question's moment: LongMemEval's
``question_date``; for LoCoMo, which dates no question, the day after its last session. The
thread is forgotten after the turn, so no question recalls an earlier question or reply.

Each reply is scored by :mod:`membot.eval.answer_scores` (LoCoMo's token F1, "contained", and
with a judge the benchmark's published judge prompt), and so is the turn's recalled context
(``Turn.history_hints``, the history the prompt held), and the lines the benchmark marks as
holding the answer are looked for among the recalled ones: these tell a question memory did
not find from one the model did not say. A record per question is
appended to a JSONL file as soon as it is scored, so a run stopped anywhere goes on from the
next question (``resume``).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from membot.config import DEFAULT_BOT, DEFAULT_EMBEDDER, BotSettings
from membot.embed import Embedder
from membot.errors import ConfigError
from membot.eval.answer_scores import (
    ADVERSARIAL,
    Verdict,
    contained,
    judge_locomo,
    judge_longmemeval,
    locomo_f1,
    mean,
)
from membot.eval.harness import cached_embedder, fresh_memory, progress_bar
from membot.eval.locomo import CATEGORIES, lines_by_conversation
from membot.llm import LLM
from membot.memory.facade import LineInput
from membot.memory.importers import load_json_items, parse_time, read_file
from membot.model import Role
from membot.recall.ranked import BOT_SETTINGS
from membot.turn.artefacts import left_out_of
from membot.turn.bot import Bot

# LoCoMo's categories scored by default: all but adversarial (5), which the LoCoMo paper
# leaves out of its F1 table and mem0's judge skips (its answer is not in the data's
# ``answer`` field but in ``adversarial_answer``).
DEFAULT_LOCOMO_CATEGORIES = (1, 2, 3, 4)


@dataclass(frozen=True)
class Question:
    """One question as the harness asks and scores it."""

    id: str  # LoCoMo: "<sample_id>:<place in its qa list, from 1>"; LongMemEval: question_id
    group: str  # the store it is asked of: a LoCoMo sample, a LongMemEval question
    category: str  # the table's row: LoCoMo's category name, LongMemEval's question_type
    text: str
    answer: str
    user: str  # the person the conversation's lines belong to
    now: datetime | None
    locomo_category: int | None = None  # the rule LoCoMo's F1 applies; None: plain F1
    question_type: str = ""  # LongMemEval's, which picks its judge prompt
    abstention: bool = False  # LongMemEval's ``_abs``: the answer is never said
    evidence: tuple[str, ...] = ()  # refs of the lines holding the answer, as imported


@dataclass(frozen=True)
class Group:
    """Lines stored together and the questions asked of them."""

    key: str
    lines: list[LineInput]
    questions: list[Question] = field(default_factory=list)


# -- reading the benchmarks -------------------------------------------------------------


def locomo_groups(path: Path, categories: Iterable[int] = DEFAULT_LOCOMO_CATEGORIES) -> list[Group]:
    """One group per LoCoMo conversation, with its questions of ``categories``."""
    wanted = set(categories)
    samples = load_json_items(Path(path))
    lines_by_sample = lines_by_conversation(path)
    groups = []
    for sample in samples:
        key = sample["sample_id"]
        lines = lines_by_sample[key]
        now = max(line.created_at for line in lines if line.created_at) + timedelta(days=1)
        user = lines[0].user
        questions = [
            _locomo_question(key, place, qa, user, now)
            for place, qa in enumerate(sample["qa"], start=1)
            if qa["category"] in wanted
        ]
        groups.append(Group(key, lines, questions))
    return groups


def _locomo_question(
    key: str, place: int, qa: dict[str, Any], user: str, now: datetime
) -> Question:
    answer = qa.get("answer", qa.get("adversarial_answer"))  # adversarial: no "answer"
    category = qa["category"]
    return Question(f"{key}:{place}", key, CATEGORIES[category], qa["question"], str(answer),
                    user, now, locomo_category=category,
                    evidence=tuple(qa.get("evidence", ())))  # fmt: skip


def longmemeval_groups(path: Path, assistant_turns: bool = False) -> list[Group]:
    """One group per LongMemEval question: its haystack's user turns (all turns with
    ``assistant_turns``) and the question, asked at its ``question_date``."""
    lines_by_question: dict[str, list[LineInput]] = defaultdict(list)
    for line in read_file(Path(path), "longmemeval", DEFAULT_BOT, None).lines:
        if assistant_turns or line.role == Role.HUMAN:
            lines_by_question[line.user].append(line)
    groups = []
    for entry in load_json_items(Path(path)):
        key = entry["question_id"]
        abstention = "_abs" in key
        asked = parse_time(entry["question_date"]) if "question_date" in entry else None
        question = Question(
            id=key, group=key, category="abstention" if abstention else entry["question_type"],
            text=entry["question"], answer=str(entry["answer"]), user=key, now=asked,
            question_type=entry["question_type"], abstention=abstention,
            evidence=_marked_turns(entry),
        )  # fmt: skip
        groups.append(Group(key, lines_by_question[key], [question]))
    return groups


def _marked_turns(entry: dict[str, Any]) -> tuple[str, ...]:
    """The refs (``<session id>:<turn index>``, as the importer writes them) of the turns
    marked ``has_answer``: on either side, though only user turns are stored by default."""
    return tuple(
        f"{session_id}:{index}"
        for session_id, turns in zip(entry["haystack_session_ids"], entry["haystack_sessions"],
                                     strict=True)
        for index, turn in enumerate(turns)
        if turn.get("has_answer")
    )  # fmt: skip


def selected(
    groups: Sequence[Group], ids: Iterable[str] = (), limit: int | None = None
) -> list[Group]:
    """The groups with only the questions named in ``ids`` (all when empty), then the first
    ``limit`` of those in file order; ``ConfigError`` for an id the file does not hold."""
    wanted = set(ids)
    known = {question.id for group in groups for question in group.questions}
    if unknown := wanted - known:
        raise ConfigError(
            f"no question {', '.join(sorted(unknown))} in the file (or not in the categories "
            "chosen): LoCoMo's ids are SAMPLE_ID:N, N its place in the sample's qa list from 1"
        )
    left = limit if limit is not None else len(known)
    kept = []
    for group in groups:
        questions = [q for q in group.questions if not wanted or q.id in wanted][: max(left, 0)]
        left -= len(questions)
        if questions:
            kept.append(Group(group.key, group.lines, questions))
    return kept


# -- asking and scoring ---------------------------------------------------------------


@dataclass(frozen=True)
class AnswerRun:
    """How questions are asked: the model that answers, the judge (none: no judge), the
    embedder, the turn's settings over the bot's profile, and the store (None: temporary
    SQLite files; a ``postgresql://`` URL: a schema of its own there)."""

    benchmark: str  # locomo | longmemeval
    llm: LLM
    judge: LLM | None = None
    embedder: Embedder | str = DEFAULT_EMBEDDER
    settings: Mapping[str, Any] = field(default_factory=dict)
    db: str | None = None


def turn_settings(strategy: str | None, options: Mapping[str, float] | None) -> dict[str, Any]:
    """A turn's ``settings`` for ``strategy`` and its options (``NAME``: a strategy option, or
    one of the bot settings a benchmark may set), as ``--strategy`` and ``--set`` give them."""
    known = {item.name for item in fields(BotSettings)}
    settings: dict[str, Any] = {"strategy": strategy} if strategy else {}
    for name, value in (options or {}).items():
        key = name if name in BOT_SETTINGS and name in known else f"strategy.{name}"
        settings[key] = int(value) if name in BOT_SETTINGS and value == int(value) else value
    return settings


def ask(bot: Bot, question: Question, run: AnswerRun) -> dict[str, Any]:
    """Ask ``question`` in a new thread, score the reply and what was recalled, and forget the
    thread; the question's record."""
    thread = f"answers/{question.id}"
    started = time.perf_counter()
    turn = bot.turn(
        question.text, user=question.user, thread=thread, now=question.now,
        settings=dict(run.settings),
    )  # fmt: skip
    seconds = time.perf_counter() - started
    bot.memory.forget(user=question.user, bot=bot.name, thread=thread)
    reply = turn.response
    context = "\n".join(part for part in (turn.history_hints, turn.expertise_hints) if part)
    rule = question.locomo_category
    recalled = {line.ref for block in turn.recalled for line in block.lines}
    evidence = [ref for ref in question.evidence if ref in recalled]
    record = {
        "id": question.id,
        "category": question.category,
        "question": question.text,
        "answer": question.answer,
        "reply": reply,
        "f1": round(locomo_f1(reply, question.answer, rule), 4),
        "contained": contained(reply, question.answer, rule),
        "context_contained": contained(context, question.answer, rule),
        # the share of the lines holding the answer that the prompt held; None without any
        "evidence_recalled": round(len(evidence) / len(question.evidence), 4)
        if question.evidence
        else None,
        # the hints the reply cited (named by the model, or found by its words) and whether
        # one of them holds the answer
        "cited": [citation.id for citation in turn.citations],
        "cited_by": turn.citations[0].found_by if turn.citations else None,
        "cited_contained": contained(
            "\n".join(citation.text for citation in turn.citations), question.answer, rule
        ),
        "judge": None,
        "seconds": round(seconds, 2),
        "reply_tokens": turn.tokens.get("response", 0),
        "prompt_tokens": turn.tokens.get("prompt", 0),
        "now": question.now.isoformat() if question.now else None,
        "error": turn.error,
        # what the reply's clean-up took out (membot.turn.artefacts), by kind
        "left_out": left_out_of(turn.notes),
        "llm": run.llm.name,
        "context": context,
    }
    if run.judge is not None:
        verdict = _judged(run, question, reply)
        record["judge"], record["judge_said"] = verdict.correct, verdict.said
    return record


def _judged(run: AnswerRun, question: Question, reply: str) -> Verdict:
    assert run.judge is not None
    if run.benchmark == "locomo":
        return judge_locomo(run.judge, question.text, question.answer, reply)
    return judge_longmemeval(run.judge, question.question_type, question.text,
                             question.answer, reply, question.abstention)  # fmt: skip


def evaluate_answers(
    file: Path,
    groups: Sequence[Group],
    run: AnswerRun,
    records: Path | None = None,
    resume: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Ask every question of ``groups`` (those ``records`` holds already skipped, with
    ``resume``), appending each record to ``records``; the report over all of them."""
    done = _done_records(records, resume, run)
    finished = {record["id"] for record in done}
    pending = [
        Group(group.key, group.lines, [q for q in group.questions if q.id not in finished])
        for group in groups
    ]
    pending = [group for group in pending if group.questions]
    model = cached_embedder(run.embedder) if isinstance(run.embedder, str) else run.embedder
    wanted = [question.id for group in groups for question in group.questions]
    results = {record["id"]: record for record in done}
    with progress_bar(show_progress) as progress:
        task = progress.add_task(f"{run.benchmark} answers", total=len(wanted))
        progress.advance(task, len(set(wanted) & finished))
        for group in pending:
            with fresh_memory(model, group.lines, run.db) as memory:
                bot = Bot(memory, run.llm)
                for question in group.questions:
                    record = ask(bot, question, run)
                    _append(records, record)
                    results[question.id] = record
                    progress.advance(task)
    chosen = [results[key] for key in wanted if key in results]
    return answers_report(file, run, model.name, chosen, records)


def _done_records(records: Path | None, resume: bool, run: AnswerRun) -> list[dict[str, Any]]:
    """The records a run stopped earlier left in ``records``; an empty file for a new run.
    ``ConfigError`` rather than mixing runs: records there without ``resume``, or answered by
    another model."""
    if records is None:
        if resume:
            raise ConfigError("--resume needs --out: the answers are kept beside the report")
        return []
    if not records.exists() or records.stat().st_size == 0:
        return []
    if not resume:
        raise ConfigError(
            f"{records} holds the answers of an earlier run: --resume to go on from where it "
            "stopped, or remove the file to start again"
        )
    done = []
    texts = records.read_text(encoding="utf-8").splitlines()
    for number, text in enumerate(texts, start=1):
        try:
            done.append(json.loads(text))
        except json.JSONDecodeError:
            if number < len(texts):  # only the last line can be one a killed run was writing
                raise ConfigError(f"{records}: line {number} is not JSON") from None
            # that line is dropped, so the next record starts a line of its own
            kept = "".join(line + "\n" for line in texts[:-1])
            records.write_text(kept, encoding="utf-8")
    models = {record.get("llm") for record in done}
    if models - {run.llm.name}:
        raise ConfigError(
            f"{records} holds answers by {', '.join(sorted(map(str, models)))}, not "
            f"{run.llm.name}: give another --out for this model"
        )
    return done


def _append(records: Path | None, record: dict[str, Any]) -> None:
    if records is None:
        return
    records.parent.mkdir(parents=True, exist_ok=True)
    with records.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


# -- the report ------------------------------------------------------------------------


def _row(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Averages over ``records``: F1, the shares contained in the reply and in the context,
    the two kinds of failure, the judge's share (None without a judge), total seconds and
    mean reply tokens."""
    judged = [float(r["judge"]) for r in records if r.get("judge") is not None]
    evidence = [r["evidence_recalled"] for r in records if r.get("evidence_recalled") is not None]

    def share(test: Callable[[dict[str, Any]], object]) -> float | None:
        return mean([float(bool(test(r))) for r in records])

    def rounded(value: float | None, digits: int = 3) -> float | None:
        return None if value is None else round(value, digits)

    return {
        "n": len(records),
        "f1": rounded(mean([r["f1"] for r in records])),
        "contained": rounded(share(lambda r: r["contained"])),
        "context_contained": rounded(share(lambda r: r["context_contained"])),
        "not_found": rounded(share(lambda r: not r["context_contained"])),
        "found_not_said": rounded(share(lambda r: r["context_contained"] and not r["contained"])),
        "evidence_recalled": rounded(mean(evidence)),
        "cited": rounded(share(lambda r: r.get("cited"))),
        "cited_contained": rounded(share(lambda r: r.get("cited_contained"))),
        "judge": rounded(mean(judged)),
        "seconds": round(sum(r["seconds"] for r in records), 1),
        "reply_tokens": rounded(mean([r["reply_tokens"] for r in records]), 1),
    }


def answers_report(
    file: Path,
    run: AnswerRun,
    embedder: str,
    records: Sequence[dict[str, Any]],
    records_path: Path | None = None,
) -> dict[str, Any]:
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(record)
    return {
        "benchmark": run.benchmark,
        "file": str(file),
        "llm": run.llm.name,
        "seed": getattr(run.llm, "seed", None),  # the bundled model's first seed (--seed)
        "judge": run.judge.name if run.judge is not None else None,
        "embedder": embedder,
        "settings": dict(run.settings),
        "metric": "f1: LoCoMo's token F1 by its category rules (LongMemEval: plain F1); "
        "contained: the normalised answer appears in the reply; evidence_recalled: share of "
        "the lines marked as holding the answer (LoCoMo's evidence, LongMemEval's has_answer) "
        "that the prompt held, over questions with any; context_contained: the answer appears "
        "in the recalled history of the turn's prompt; not_found: share whose context lacked "
        "it; found_not_said: share whose context held it and whose reply did not; cited: "
        "share of replies citing a hint (named by the model or found by the reply's words); "
        "cited_contained: share whose cited hints hold the answer; judge: "
        "share the judge called correct; seconds: total; reply_tokens: mean",
        "questions": len(records),
        "overall": _row(records),
        "by_category": {name: _row(rows) for name, rows in sorted(by_category.items())},
        "errors": sum(1 for record in records if record.get("error")),
        "records": str(records_path) if records_path else None,
    }


COLUMNS = (
    ("n", "n"), ("f1", "F1"), ("contained", "contained"),
    ("evidence_recalled", "evidence recalled"), ("context_contained", "in context"),
    ("found_not_said", "in context, not said"),
    ("judge", "judge"), ("seconds", "seconds"), ("reply_tokens", "reply tokens"),
)  # fmt: skip


def answers_table(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: a row per category, then all."""
    columns = [(key, title) for key, title in COLUMNS if key != "judge" or report.get("judge")]
    lines = [
        "| category | " + " | ".join(title for _, title in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    rows = [*report["by_category"].items(), ("all", report["overall"])]
    for name, row in rows:
        cells = ["" if row[key] is None else str(row[key]) for key, _ in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def records_path_for(out: Path) -> Path:
    """Where the per-question records of a report written to ``out`` go: beside it."""
    return out.with_name(out.stem + ".answers.jsonl")


def parse_categories(text: str) -> list[int]:
    """``"4"``, ``"single-hop,temporal"`` or ``"1,2"`` -> LoCoMo category ids."""
    names = {name: number for number, name in CATEGORIES.items()}
    chosen = []
    for part in (item.strip() for item in text.split(",") if item.strip()):
        if part.isdigit() and int(part) in CATEGORIES:
            chosen.append(int(part))
        elif part in names:
            chosen.append(names[part])
        else:
            known = ", ".join(f"{number} {name}" for number, name in CATEGORIES.items())
            raise ConfigError(f"unknown LoCoMo category {part!r}: use {known}")
    return chosen


__all__ = [
    "ADVERSARIAL",
    "AnswerRun",
    "Group",
    "Question",
    "answers_report",
    "answers_table",
    "evaluate_answers",
    "locomo_groups",
    "longmemeval_groups",
    "parse_categories",
    "records_path_for",
    "selected",
    "turn_settings",
]

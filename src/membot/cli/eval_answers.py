"""``membot eval locomo|longmemeval --answers``: the options of the answer harness and the
run, a thin adapter over :mod:`membot.eval.answers`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from membot import LLM, BundledSmolLM2, ConfigError, resolve_llm
from membot.cli.common import Options, print_json
from membot.cli.eval_reports import save_report
from membot.eval.answers import (
    AnswerRun,
    Group,
    answers_table,
    evaluate_answers,
    records_path_for,
    selected,
    turn_settings,
)

AnswersOption = Annotated[
    bool,
    typer.Option(
        "--answers",
        help="Ask each question through Bot.turn and score the reply (token F1, answer "
        "contained, in the recalled context; see docs/answers.md) instead of measuring recall.",
    ),
]
LlmOption = Annotated[
    str | None,
    typer.Option(
        "--llm",
        help="With --answers: the model that answers, smollm2 | openai:MODEL[@URL] | "
        "script:PATH [default: the root command's --llm, else smollm2].",
        show_default=False,
    ),
]
JudgeOption = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="With --answers: an LLM judge, openai:MODEL[@URL] (or script:PATH), asked with "
        "the benchmark's published judge prompt [default: no judge].",
        show_default=False,
    ),
]
JudgeKeyOption = Annotated[
    str | None,
    typer.Option(
        "--judge-key-env",
        help="Environment variable holding the judge's API key (default: OPENAI_API_KEY for "
        "OpenAI itself, none for other servers).",
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="With --answers: go on from the answers kept beside --out (OUT.answers.jsonl), "
        "skipping the questions answered there.",
    ),
]
LimitOption = Annotated[
    int | None,
    typer.Option("--limit", min=1, help="With --answers: only the first N questions chosen."),
]
QuestionsOption = Annotated[
    str | None,
    typer.Option(
        "--questions",
        help="With --answers: only these question ids, comma-separated (LoCoMo: SAMPLE_ID:N, "
        "N its place in the sample's qa list from 1; LongMemEval: question_id).",
    ),
]

SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed",
        min=0,
        help="With --answers and the bundled smollm2: its first seed (each reply's seed follows "
        "the one before), to measure what the model's draws alone move [default: its own].",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class AnswerOptions:
    """The ``--answers`` options as one command was given them."""

    answers: bool = False
    llm: str | None = None
    judge: str | None = None
    judge_key_env: str | None = None
    resume: bool = False
    limit: int | None = None
    questions: str | None = None
    seed: int | None = None

    def check_used(self, extra: dict[str, Any]) -> None:
        """``ConfigError`` for an answer option given without ``--answers``."""
        if self.answers:
            return
        given = {
            "--llm": self.llm, "--judge": self.judge, "--judge-key-env": self.judge_key_env,
            "--resume": self.resume, "--limit": self.limit, "--questions": self.questions,
            "--seed": self.seed, **extra,
        }  # fmt: skip
        # --seed 0 is given: 0 == False, so ``value not in (None, False)`` would miss it
        if used := [name for name, value in given.items()
                    if value is not None and value is not False and value != ""]:  # fmt: skip
            raise ConfigError(f"{', '.join(used)}: only with --answers")


def answering_model(context: typer.Context, spec: str | None, seed: int | None = None) -> LLM:
    """The model ``--llm`` names (this command's, else the root command's, else smollm2),
    made as every command makes it; ``seed`` its first seed (the bundled model only)."""
    root = context.find_root().obj
    options = root if isinstance(root, Options) else Options("", None, None, None)
    llm = replace(options, llm_spec=spec or options.llm_spec).make_llm()
    if seed is not None:
        if not isinstance(llm, BundledSmolLM2):
            raise ConfigError(f"--seed: only the bundled smollm2 is seeded, not {llm.name}")
        llm.seed = seed
    return llm


def run_answers(
    context: typer.Context,
    benchmark: str,
    file: Path,
    groups: Callable[[], list[Group]],
    chosen: AnswerOptions,
    strategy: str,
    options: dict[str, float],
    as_json: bool,
    out: Path | None,
    embedder: str,
    db: str | None,
) -> dict[str, Any]:
    """Read the benchmark, ask the questions chosen, print the table (and the report as JSON
    with ``as_json``), write the report to ``out`` and the answers beside it."""
    ids = [part.strip() for part in (chosen.questions or "").split(",") if part.strip()]
    chosen_groups = selected(groups(), ids, chosen.limit)
    judge = resolve_llm(chosen.judge, key_env=chosen.judge_key_env) if chosen.judge else None
    run = AnswerRun(
        benchmark, answering_model(context, chosen.llm, chosen.seed), judge, embedder,
        turn_settings(strategy, options), db,
    )  # fmt: skip
    records = records_path_for(out) if out else None
    report = evaluate_answers(file, chosen_groups, run, records, resume=chosen.resume)
    if out:
        save_report(report, out, also=f", answers to {records}")
    if as_json:
        print_json(report)
    else:
        sys.stderr.write(answers_table(report) + "\n")  # as it is: Markdown, for the docs
    return report

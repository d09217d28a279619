"""``membot eval``: recall on the LoCoMo and LongMemEval benchmarks, a thin adapter over
:mod:`membot.eval.locomo` and :mod:`membot.eval.longmemeval`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from membot import (
    DEFAULT_EMBEDDER,
    ConfigError,
    parse_numbers,
    strategy_options,
)
from membot.cli.common import err, print_json
from membot.cli.eval_answers import (
    AnswerOptions,
    AnswersOption,
    JudgeKeyOption,
    JudgeOption,
    LimitOption,
    LlmOption,
    QuestionsOption,
    ResumeOption,
    SeedOption,
    run_answers,
)
from membot.cli.eval_reports import check_writable, save_report
from membot.eval import evaluate_locomo, evaluate_longmemeval
from membot.eval.answers import (
    DEFAULT_LOCOMO_CATEGORIES,
    locomo_groups,
    longmemeval_groups,
    parse_categories,
)
from membot.eval.fold_tables import folded_tables
from membot.eval.folds import parse_choices

eval_app = typer.Typer(
    rich_markup_mode=None, help="Measure recall on public benchmarks.", no_args_is_help=True
)

STRATEGIES = " | ".join(strategy_options())  # membot's own and any other package's
StrategyOption = Annotated[
    str, typer.Option("--strategy", "-s", help=f"Recall strategy: {STRATEGIES}.")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="A number of the strategy, NAME=VALUE (e.g. lexical_weight=0.7, or expand_before=2); "
        "repeatable.",
    ),
]
FoldsOption = Annotated[
    int | None,
    typer.Option(
        "--folds",
        help="Cross-validate: cut the questions into K folds (LoCoMo: whole conversations, "
        "K <= their number; LongMemEval: questions, stratified by type) and print each fold's "
        "held-out numbers beside the dev numbers, with their mean, std and range.",
    ),
]
ChooseOption = Annotated[
    list[str] | None,
    typer.Option(
        "--choose",
        help="With --folds: values to choose among, NAME=V1,V2,... (a --set name; repeatable, "
        "every combination tried): each fold takes the best on the other folds by --metric "
        "and is scored with it.",
    ),
]
MetricOption = Annotated[
    str | None,
    typer.Option(
        "--metric",
        help="With --choose: the number a choice maximises, LEVEL.KEY of the report "
        "[default: LoCoMo R@10 (recall_at.10), LongMemEval turn.recall_all@10].",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")]
OutOption = Annotated[Path | None, typer.Option("--out", help="Also write the JSON report here.")]
FileArgument = Annotated[
    Path,
    typer.Argument(exists=True, dir_okay=False, help="The data file (.json, or gzipped .json.gz)."),
]


def _embedder(context: typer.Context) -> str:
    """The root command's ``--embedder`` when there is one."""
    return getattr(context.find_root().obj, "embedder", None) or DEFAULT_EMBEDDER


def _db(context: typer.Context) -> str | None:
    """The root command's ``--db`` when it names a PostgreSQL database: each sample is then
    stored in a schema of its own there (dropped after). Otherwise samples go to temporary
    SQLite files, never into the store ``--db`` names."""
    db = context.find_root().params.get("db")
    return db if db and db.split("://", 1)[0] in ("postgresql", "postgres") else None


@dataclass(frozen=True)
class Folding:
    """``--folds``, ``--choose`` and ``--metric`` as given."""

    folds: int | None
    choose: list[str] | None
    metric: str | None

    def arguments(self) -> dict[str, Any]:
        """The harness's keyword arguments; ConfigError for a grid without folds."""
        if (self.choose or self.metric) and not self.folds:
            raise ConfigError("--choose and --metric need --folds: a choice is scored on the "
                              "folds it was not made on")  # fmt: skip
        chosen: dict[str, Any] = {"folds": self.folds, "choose": parse_choices(self.choose or [])}
        return chosen | ({"metric": self.metric} if self.metric else {})

    def check_unused(self) -> None:
        if self.folds or self.choose or self.metric:
            raise ConfigError("--folds, --choose and --metric measure recall: not with --answers")


def _run(
    evaluate: Callable[..., dict[str, Any]],
    context: typer.Context,
    file: Path,
    strategy: str,
    settings: list[str] | None,
    folding: Folding,
    as_json: bool,
    out: Path | None,
) -> dict[str, Any]:
    options = _options(settings or [])
    folded = folding.arguments()
    if out:
        check_writable(out)  # before a run that can take an hour, not after it
    report = evaluate(file, strategy=strategy, embedder=_embedder(context), options=options,
                      db=_db(context), **folded)  # fmt: skip
    if out:
        save_report(report, out)
    if as_json:
        print_json(report)
    elif "folds" in report:
        sys.stdout.write(folded_tables(report))
    return report


def _answers(
    context: typer.Context,
    benchmark: str,
    file: Path,
    groups: Callable[[], list[Any]],
    chosen: AnswerOptions,
    strategy: str,
    settings: list[str] | None,
    as_json: bool,
    out: Path | None,
) -> None:
    """``--answers``: each question asked through ``Bot.turn``, the reply scored."""
    options = _options(settings or [])
    if out:
        check_writable(out)
    run_answers(context, benchmark, file, groups, chosen, strategy, options, as_json, out,
                _embedder(context), _db(context))  # fmt: skip


def _options(settings: list[str]) -> dict[str, float]:
    """``["lexical_weight=0.7"]`` -> ``{"lexical_weight": 0.7}``; ConfigError otherwise."""
    return parse_numbers(settings)


@eval_app.command()
def locomo(
    context: typer.Context,
    file: FileArgument,
    strategy: StrategyOption = "blend",
    settings: SetOption = None,
    folds: FoldsOption = None,
    choose: ChooseOption = None,
    metric: MetricOption = None,
    as_json: JsonOption = False,
    out: OutOption = None,
    answers: AnswersOption = False,
    llm: LlmOption = None,
    judge: JudgeOption = None,
    judge_key_env: JudgeKeyOption = None,
    resume: ResumeOption = False,
    limit: LimitOption = None,
    questions: QuestionsOption = None,
    seed: SeedOption = None,
    categories: Annotated[
        str | None,
        typer.Option(
            "--categories",
            help="With --answers: LoCoMo categories asked, ids or names, comma-separated "
            "(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) "
            "[default: 1,2,3,4].",
        ),
    ] = None,
) -> None:
    """LoCoMo evidence recall at 5, 10, 25, 50 dialog turns in context; with --answers, the
    answers' token F1."""
    chosen = AnswerOptions(answers, llm, judge, judge_key_env, resume, limit, questions, seed)
    chosen.check_used({"--categories": categories})
    folding = Folding(folds, choose, metric)
    if answers:
        folding.check_unused()
        asked = parse_categories(categories) if categories else DEFAULT_LOCOMO_CATEGORIES
        groups = lambda: locomo_groups(file, asked)  # noqa: E731
        _answers(context, "locomo", file, groups, chosen, strategy, settings, as_json, out)
        return
    report = _run(evaluate_locomo, context, file, strategy, settings, folding, as_json, out)
    if not as_json:
        recall = ", ".join(f"R@{k} {value:.3f}" for k, value in report["recall_at"].items())
        err.print(
            f"{report['questions']} questions, {strategy}: {recall}", highlight=False, markup=False
        )


@eval_app.command()
def longmemeval(
    context: typer.Context,
    file: FileArgument,
    strategy: StrategyOption = "blend",
    settings: SetOption = None,
    folds: FoldsOption = None,
    choose: ChooseOption = None,
    metric: MetricOption = None,
    as_json: JsonOption = False,
    out: OutOption = None,
    answers: AnswersOption = False,
    llm: LlmOption = None,
    judge: JudgeOption = None,
    judge_key_env: JudgeKeyOption = None,
    resume: ResumeOption = False,
    limit: LimitOption = None,
    questions: QuestionsOption = None,
    seed: SeedOption = None,
    assistant_turns: Annotated[
        bool,
        typer.Option(
            "--assistant-turns",
            help="With --answers: store the haystacks' assistant turns too (recall stores the "
            "user turns only, as the official corpus holds them).",
        ),
    ] = False,
) -> None:
    """LongMemEval's official retrieval metrics, turn and session level, with a BM25 baseline;
    with --answers, the answers' scores."""
    chosen = AnswerOptions(answers, llm, judge, judge_key_env, resume, limit, questions, seed)
    chosen.check_used({"--assistant-turns": assistant_turns})
    folding = Folding(folds, choose, metric)
    if answers:
        folding.check_unused()
        groups = lambda: longmemeval_groups(file, assistant_turns)  # noqa: E731
        _answers(context, "longmemeval", file, groups, chosen, strategy, settings, as_json, out)
        return
    report = _run(evaluate_longmemeval, context, file, strategy, settings, folding, as_json, out)
    if not as_json:
        for name in ("session", "session_turn2session", "turn"):
            ours, bm25 = report[name], report["bm25_baseline"][name]
            shown = ", ".join(
                f"{key} {ours[key]:.3f} (bm25 {bm25[key]:.3f})"
                for key in ("recall_all@5", "recall_all@10", "ndcg_any@10")
            )
            err.print(
                f"{name}, n={report['n']}, {strategy}: {shown}", highlight=False, markup=False
            )

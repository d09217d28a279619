"""Both harnesses end to end on tiny files in the benchmarks' formats, with the real MiniLM."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from membot.cli.eval import eval_app
from membot.errors import ConfigError, ImportFormatError
from membot.eval.locomo import evaluate_locomo
from membot.eval.longmemeval import Corpus, evaluate_longmemeval, haystack_lines
from membot.memory.importers import read_file
from membot.recall.ranked import ranked_lines, settings_for_ranking

pytestmark = pytest.mark.slow


def turn(speaker: str, dia_id: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


LOCOMO = [
    {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("Ann", "D1:1", "Hi Bob! How was your week?"),
                turn("Bob", "D1:2", "Great, I adopted a golden retriever puppy named Max."),
                turn("Ann", "D1:3", "Lovely! I started learning the violin."),
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [
                turn("Bob", "D2:1", "Max chewed my running shoes today."),
                turn("Ann", "D2:2", "My violin teacher says I play well."),
            ],
        },
        "qa": [
            {"question": "What is the name of Bob's dog?", "answer": "Max",
             "evidence": ["D1:2"], "category": 4},
            {"question": "Which instrument does Ann learn?", "answer": "violin",
             "evidence": ["D1:3", "D2:2"], "category": 1},
            {"question": "Is there anything else?", "answer": "no", "evidence": [],
             "category": 5},
        ],
    }
]  # fmt: skip


def session(*turns: tuple[str, str, bool]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text, "has_answer": mark} for role, text, mark in turns]


def question(question_id: str, text: str, answer_sessions: list[str]) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": text,
        "answer": "x",
        "question_date": "2023/05/30 (Tue) 16:40",
        "haystack_session_ids": ["filler_1", "answer_q1_1"],
        "haystack_dates": ["2023/05/20 (Sat) 00:29", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            session(
                ("user", "Can you suggest a pasta recipe?", False),
                ("assistant", "Try carbonara with eggs and pecorino.", False),
            ),
            session(
                ("user", "I just bought a blue bicycle for commuting.", True),
                ("assistant", "Nice, blue bikes are great.", False),
                ("user", "Any tips on tyre pressure?", False),
            ),
        ],
        "answer_session_ids": answer_sessions,
    }


LONGMEMEVAL = [
    question("q1", "What colour is my bicycle?", ["answer_q1_1"]),
    question("q2_abs", "What colour is my car?", ["answer_q1_1"]),
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"locomo": tmp_path / "locomo.json", "longmemeval": tmp_path / "lme.json"}
    paths["locomo"].write_text(json.dumps(LOCOMO))
    paths["longmemeval"].write_text(json.dumps(LONGMEMEVAL))
    return paths


@pytest.mark.parametrize("strategy", ["lines", "bm25", "hybrid"])
def test_locomo_reports_evidence_recall_by_k_and_category(
    files: dict[str, Path], minilm, strategy: str
) -> None:
    report = evaluate_locomo(files["locomo"], strategy, embedder=minilm, show_progress=False)
    assert report["questions"] == 3
    assert set(report["recall_at"]) == {"5", "10", "25", "50"}
    # five lines in all: at k = 5 every line the strategy ranks is in context
    if strategy == "bm25":  # lines sharing no word with the question are not ranked
        assert 0.5 < report["recall_at"]["5"] < 1.0
    else:
        assert report["recall_at"]["5"] == 1.0
    assert report["by_category"]["4"]["questions"] == 1
    assert report["by_category"]["3"] == {"name": "open-domain", "questions": 0, "recall_at": {}}


def test_longmemeval_reports_the_official_metrics_with_a_bm25_baseline(
    files: dict[str, Path], minilm
) -> None:
    report = evaluate_longmemeval(files["longmemeval"], "hybrid", minilm, show_progress=False)
    assert (report["questions"], report["n"], report["n_session_any_gold"]) == (2, 1, 1)
    for part in (report, report["bm25_baseline"]):
        for level in ("session", "session_turn2session", "turn", "session_any_gold"):
            assert len(part[level]) == 18
    assert report["turn"]["recall_any@1"] == 1.0
    assert report["session"]["recall_all@1"] == 1.0
    assert report["turn"]["ndcg_any@50"] == 1.0


def test_the_official_corpus_holds_user_turns_with_noans_renaming() -> None:
    corpus = Corpus.of(LONGMEMEVAL[0])
    assert corpus.ids == ["filler_1_1", "answer_q1_1_1", "noans_q1_1_3"]
    assert corpus.refs == ["filler_1:0", "answer_q1_1:0", "answer_q1_1:2"]
    assert corpus.gold == {"answer_q1_1_1"}
    assert corpus.gold_sessions == {"answer_q1_1"}
    assert corpus.counted
    assert not Corpus.of(LONGMEMEVAL[1]).counted


def test_the_cli_prints_and_writes_the_report(files: dict[str, Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    out = tmp_path / "report.json"
    args = ["eval", "locomo", str(files["locomo"]), "--strategy", "bm25", "--json"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["strategy"] == "bm25"
    assert json.loads(out.read_text()) == printed


def test_longmemeval_asks_each_question_at_its_question_date(
    files: dict[str, Path], minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[datetime | None] = []

    def recording(memory, settings, query, scope, now=None, depth=None):  # type: ignore[no-untyped-def]
        seen.append(now)
        return ranked_lines(memory, settings, query, scope, now, depth)

    monkeypatch.setattr("membot.eval.longmemeval.ranked_lines", recording)
    evaluate_longmemeval(files["longmemeval"], "lines", minilm, show_progress=False)
    # the strategy's run and the BM25 baseline's, for each of the two questions
    assert seen == [datetime(2023, 5, 30, 16, 40, tzinfo=UTC)] * 4


def test_set_passes_a_strategy_its_numbers(files: dict[str, Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    args = ["eval", "locomo", str(files["locomo"]), "--strategy", "bm25", "--json"]
    sets = ["--set", "expand_before=0", "--set", "expand_after=2", "--set", "lexical_top=2"]
    result = CliRunner().invoke(app, [*args, *sets])
    assert result.exit_code == 0, result.output
    options = {"expand_before": 0.0, "expand_after": 2.0, "lexical_top": 2.0}
    assert json.loads(result.stdout)["options"] == options
    settings = settings_for_ranking("bm25", options)
    assert (settings.expand_before, settings.expand_after) == (0, 2)  # bot settings
    assert settings.option("lexical_top", 3) == 2  # the strategy's own option
    assert (settings.threshold, settings.strategy) == (-1.0, "bm25")  # every line kept
    with pytest.raises(ConfigError, match="expand_before wants a whole number"):
        settings_for_ranking("blend", {"expand_before": 1.5})
    settings = settings_for_ranking("blend", {"lexical_weight": 0.7, "time_weight": 0})
    assert settings.option("lexical_weight", 0.5) == 0.7
    assert settings.option("time_weight", 0.25) == 0
    with pytest.raises(ConfigError, match="partners_only is 1 \\(on\\) or 0 \\(off\\)"):
        settings_for_ranking("blend", {"partners_only": 0.5})
    with pytest.raises(ConfigError, match=r"strategy blend has no option 'speed'.*lexical_weight"):
        settings_for_ranking("blend", {"speed": 2})
    bad = CliRunner().invoke(app, [*args, "--set", "before"])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, ConfigError) and "NAME=VALUE" in str(bad.exception)


def other_conversation() -> dict[str, Any]:
    conversation = json.loads(json.dumps(LOCOMO[0]).replace("conv-t", "conv-u"))
    conversation["qa"] = conversation["qa"][:2]
    return conversation


def test_locomo_folds_hold_out_whole_conversations_and_choose_on_the_others(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locomo.json.gz"
    path.write_bytes(gzip.compress(json.dumps([*LOCOMO, other_conversation()]).encode()))
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    args = ["eval", "locomo", str(path), "--folds", "2", "--choose", "lexical_weight=0.5,2"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["questions"] == 5
    folds = report["folds"]
    assert [fold["held_out"] for fold in folds["folds"]] == ["conv-t", "conv-u"]
    assert [fold["questions"] for fold in folds["folds"]] == [3, 2]
    assert folds["metric"] == "recall_at.10"
    assert all(fold["chosen"]["lexical_weight"] in (0.5, 2.0) for fold in folds["folds"])
    assert "| fold 1 held out (conv-t) | 3 |" in result.stdout
    assert "| held-out mean ± std |" in result.stdout
    assert "| fold | chose | recall_at.10 on the other folds |" in result.stdout
    assert "| single-hop | 2 (1–1) |" in result.stdout


def test_a_fold_or_a_choice_that_cannot_be_made_is_refused_before_the_run(
    files: dict[str, Path],
) -> None:
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    for extra, message in (
        (["--folds", "2"], "--folds needs 2 conversations or more; the file holds 1"),
        (["--choose", "lexical_weight=1,2"], "need --folds"),
        (["--folds", "2", "--metric", "R@7"], "--metric recall_at.7"),
        (["--folds", "2", "--answers"], "not with --answers"),
    ):
        result = CliRunner().invoke(app, ["eval", "locomo", str(files["locomo"]), *extra])
        assert result.exit_code != 0
        assert isinstance(result.exception, ConfigError), result.output
        assert message in str(result.exception)


def long_turn() -> str:
    """A pasted document of about 60,000 characters, with a personal fact near its end."""
    paragraph = (
        "Section {n}. The importer must declare the goods at the port of entry and pay the "
        "duty assessed on the customs value. Records are kept for six years.\n\n"
    )
    text = "".join(paragraph.format(n=n) for n in range(400))[:59_500]
    return text + "By the way, my sister's parrot is called Marmalade. " + "Thanks! " * 60


def test_a_long_turn_is_stored_whole_and_recalled_by_its_fact_near_the_end(
    tmp_path: Path, minilm
) -> None:
    """LongMemEval_S holds user turns of 41,855 characters: stored whole (no longer cut
    under a line limit), and found by a fact near their end through its part's vector."""
    entry = question("q_long", "What is my sister's parrot called?", ["answer_q1_1"])
    sessions = entry["haystack_sessions"]
    sessions[1][2] = {"role": "user", "content": long_turn(), "has_answer": True}
    sessions[1][0]["has_answer"] = False
    assert len(sessions[1][2]["content"]) > 60_000
    path = tmp_path / "lme.json.gz"
    path.write_bytes(gzip.compress(json.dumps([entry]).encode()))
    report = evaluate_longmemeval(path, "blend", minilm, show_progress=False)
    assert report["n"] == 1
    assert report["turn"]["recall_all@1"] == 1.0
    (whole,) = [line for line in haystack_lines(path, entry) if line.ref == "answer_q1_1:2"]
    assert whole.text == sessions[1][2]["content"]


def test_longmemeval_folds_print_each_question_type_with_its_n(tmp_path: Path) -> None:
    entries = []
    for number, kind in enumerate(["knowledge-update", "temporal-reasoning"] * 2):
        entry = question(f"q{number}", "What colour is my bicycle?", ["answer_q1_1"])
        entries.append(entry | {"question_type": kind})
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(entries))
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    result = CliRunner().invoke(app, ["eval", "longmemeval", str(path), "--folds", "2"])
    assert result.exit_code == 0, result.output
    assert "| fold 2 held out (2 questions) | 2 |" in result.stdout
    assert "| knowledge-update | 2 (1–1) |" in result.stdout
    assert "| temporal-reasoning | 2 (1–1) |" in result.stdout


def test_read_file_reads_a_gzipped_file(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json.gz"
    path.write_bytes(gzip.compress(json.dumps(LOCOMO).encode()))
    plan = read_file(path, "locomo", "bot", None)
    assert (len(plan.lines), plan.threads) == (5, 2)
    (tmp_path / "cut.json.gz").write_bytes(path.read_bytes()[:40])
    with pytest.raises(ImportFormatError, match="not a whole gzip file"):
        read_file(tmp_path / "cut.json.gz", "locomo", "bot", None)

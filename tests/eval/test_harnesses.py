"""Both harnesses end to end on tiny files in the benchmarks' formats, with the real MiniLM."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from membot.cli.eval import eval_app
from membot.errors import ConfigError
from membot.eval.locomo import evaluate_locomo
from membot.eval.longmemeval import Corpus, evaluate_longmemeval
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

"""The answer harness: LoCoMo's scores on known strings, the judges' prompts, and whole runs
through ``Bot.turn`` with the scripted LLM (the hashing embedder; the CLI with the real MiniLM)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from small_model import SmallLLM
from typer.testing import CliRunner

from membot.cli.eval import eval_app
from membot.errors import ConfigError
from membot.eval.answer_scores import (
    LONGMEMEVAL_ABSTENTION_PROMPT,
    contained,
    judge_locomo,
    judge_longmemeval,
    locomo_f1,
    multi_answer_f1,
    normalize_answer,
    token_f1,
)
from membot.eval.answers import (
    AnswerRun,
    answers_report,
    answers_table,
    evaluate_answers,
    locomo_groups,
    longmemeval_groups,
    parse_categories,
    records_path_for,
    selected,
    turn_settings,
)
from membot.llm import ScriptedLLM


def test_normalisation_is_locomos() -> None:
    assert normalize_answer("The Sunday before 25 May, 2023!") == "sunday before 25 may 2023"
    assert normalize_answer("Bread and an apple") == "bread apple"  # "and" goes too


def test_token_f1_stems_and_counts_shared_words() -> None:
    assert token_f1("Adoption agencies", "adoption agency") == 1.0  # stemmed alike
    # reply: she, research, adopt, agenc (4); gold: adopt, agenc (2): P 1/2, R 1
    assert token_f1("She researched adoption agencies", "Adoption agencies") == pytest.approx(2 / 3)
    assert token_f1("nothing in common", "Max") == 0.0
    assert token_f1("", "Max") == 0.0


def test_each_locomo_category_has_its_rule() -> None:
    # multi-hop: each part of the answer scored by the best part of the reply, averaged
    assert multi_answer_f1("pottery, camping", "pottery, camping, painting, swimming") == 0.5
    assert locomo_f1("pottery, camping", "pottery, camping, painting, swimming", 1) == 0.5
    plain = locomo_f1("pottery, camping", "pottery, camping, painting, swimming", 4)
    assert plain == pytest.approx(2 / 3)  # other categories: one F1 over all the words
    # open-domain: the answer up to its first ";"
    assert locomo_f1("Likely no", "Likely no; though she likes reading", 3) == 1.0
    # adversarial: whether the reply says the thing was never mentioned
    assert locomo_f1("That was not mentioned.", "self-care is important", 5) == 1.0
    assert locomo_f1("Self-care is important.", "self-care is important", 5) == 0.0
    assert locomo_f1("2022", 2022, 2) == 1.0  # answers that are numbers in the data


def test_contained_wants_the_answers_words_together() -> None:
    assert contained("His dog is called Max.", "Max")
    assert not contained("Maxwell is his dog", "Max")  # whole words only
    assert contained("On 7 May, 2023 she went", "7 May 2023")
    assert not contained("On 7 June 2023, in May", "7 May 2023")
    assert contained("camping, swimming and pottery", "pottery, camping, swimming", 1)
    assert not contained("camping and pottery", "pottery, camping, swimming", 1)
    assert not contained("anything at all", "")


def test_the_locomo_judge_asks_mem0s_prompt_and_reads_its_label() -> None:
    judge = ScriptedLLM(['{"label": "CORRECT"}', "The answer is WRONG.", "CORRECT"])
    verdict = judge_locomo(judge, "What is Bob's dog called?", "Max", "It's Max.")
    assert verdict.correct and verdict.said == '{"label": "CORRECT"}'
    prompt = judge.history[0][0]["content"]
    assert "Question: What is Bob's dog called?\nGold answer: Max\nGenerated answer: It's Max." in (
        prompt
    )
    assert prompt.startswith("\nYour task is to label an answer to a question as ’CORRECT’")
    assert judge.schemas[0] is not None  # asked for JSON, as mem0 asks
    assert not judge_locomo(judge, "q", "a", "r").correct
    assert judge_locomo(judge, "q", "a", "r").correct


def test_the_longmemeval_judge_picks_the_prompt_of_the_question_type() -> None:
    judge = ScriptedLLM(["Yes.", "no", "yes"])
    assert judge_longmemeval(judge, "temporal-reasoning", "How many days?", "18", "19", False)
    assert "do not penalize off-by-one errors" in judge.history[0][0]["content"]
    assert not judge_longmemeval(judge, "knowledge-update", "q", "a", "r", False).correct
    assert judge_longmemeval(judge, "multi-session", "Q?", "E.", "R.", True).correct
    assert judge.history[2][0]["content"] == LONGMEMEVAL_ABSTENTION_PROMPT.format("Q?", "E.", "R.")
    with pytest.raises(ValueError, match="no judge prompt"):
        judge_longmemeval(judge, "riddles", "q", "a", "r", False)


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
                turn("Bob", "D1:1", "Bob adopted a dog named Max, the dog of Bob."),
                turn("Ann", "D1:2", "Ann learns the violin, Ann's instrument is the violin."),
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [turn("Bob", "D2:1", "Max chewed my running shoes today.")],
        },
        "qa": [
            {"question": "What is the name of the dog of Bob?", "answer": "Max",
             "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument does Ann learn?", "answer": "violin",
             "evidence": ["D1:2"], "category": 1},
            {"question": "What does Ann's cat eat?", "adversarial_answer": "fish",
             "evidence": [], "category": 5},
            {"question": "When did Max chew the shoes of Bob?", "answer": "9 June 2023",
             "evidence": ["D2:1"], "category": 2},
        ],
    }
]  # fmt: skip


def session(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text} for role, text in turns]


LONGMEMEVAL = [
    {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What colour is my bicycle?",
        "answer": "blue",
        "question_date": "2023/05/30 (Tue) 16:40",
        "haystack_session_ids": ["answer_q1_1"],
        "haystack_dates": ["2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "My bicycle is blue.", "has_answer": True},
                {"role": "assistant", "content": "A blue bicycle, nice."},
            ]
        ],
        "answer_session_ids": ["answer_q1_1"],
    },
    {
        "question_id": "q2_abs",
        "question_type": "multi-session",
        "question": "What colour is my car?",
        "answer": "You did not mention a car.",
        "question_date": "2023/06/01 (Thu) 09:00",
        "haystack_session_ids": ["s2"],
        "haystack_dates": ["2023/05/22 (Mon) 10:00"],
        "haystack_sessions": [session(("user", "I like walking."))],
        "answer_session_ids": [],
    },
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"locomo": tmp_path / "locomo.json", "longmemeval": tmp_path / "lme.json"}
    paths["locomo"].write_text(json.dumps(LOCOMO))
    paths["longmemeval"].write_text(json.dumps(LONGMEMEVAL))
    return paths


def locomo_run(llm: ScriptedLLM, embedder, judge: ScriptedLLM | None = None) -> AnswerRun:
    # threshold 0: the hashing embedder's cosines are low; every line sharing a word counts
    return AnswerRun("locomo", llm, judge, embedder, {"threshold": 0.0})


def test_each_question_is_a_turn_of_its_own_after_the_last_session(
    files: dict[str, Path], embedder, tmp_path: Path
) -> None:
    groups = locomo_groups(files["locomo"])
    assert [q.id for q in groups[0].questions] == ["conv-t:1", "conv-t:2", "conv-t:4"]  # no 5
    llm = ScriptedLLM(["AI: Bob's dog is Max.", "Ann plays the piano.", "No idea."])
    records = tmp_path / "run.answers.jsonl"
    report = evaluate_answers(files["locomo"], groups, locomo_run(llm, embedder), records,
                              show_progress=False)  # fmt: skip
    assert len(llm.history) == 3
    first, second = (call[0]["content"] for call in llm.history[:2])
    assert "It is now Saturday 2023-06-10 10:00 UTC" in first  # the day after session 2
    assert "Bob adopted a dog named Max" in first
    assert "Bob's dog is Max" not in second  # the first question's thread was forgotten
    saved = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["id"] for r in saved] == ["conv-t:1", "conv-t:2", "conv-t:4"]
    dog, instrument, _ = saved
    assert (dog["f1"], dog["contained"], dog["context_contained"]) == (0.4, True, True)
    assert (instrument["contained"], instrument["context_contained"]) == (False, True)
    assert (dog["evidence_recalled"], instrument["evidence_recalled"]) == (1.0, 1.0)
    assert dog["reply"] == "Bob's dog is Max."  # the label the model wrote is left out ...
    assert (dog["left_out"], instrument["left_out"]) == (["speaker label"], [])  # ... and named
    assert report["overall"]["n"] == 3
    assert report["by_category"]["multi-hop"]["found_not_said"] == 1.0
    assert report["by_category"]["single-hop"]["f1"] == 0.4
    assert report["overall"]["judge"] is None
    # a model that names no hint, asked for citations: none, and none found for it
    assert (dog["cited"], dog["cited_by"], dog["cited_contained"]) == ([], None, False)
    assert report["overall"]["cited"] == 0.0


def test_a_record_holds_the_memories_the_reply_drew_on(
    files: dict[str, Path], embedder, tmp_path: Path
) -> None:
    groups = selected(locomo_groups(files["locomo"]), ["conv-t:1", "conv-t:2"])
    llm = SmallLLM(["Max, the dog he adopted.", "No idea."])
    records = tmp_path / "run.answers.jsonl"
    report = evaluate_answers(files["locomo"], groups, locomo_run(llm, embedder), records,
                              show_progress=False)  # fmt: skip
    dog, instrument = (json.loads(line) for line in records.read_text().splitlines())
    assert dog["cited"] and dog["cited_by"] == "words" and dog["cited_contained"] is True
    assert (instrument["cited"], instrument["cited_contained"]) == ([], False)
    assert (report["overall"]["cited"], report["overall"]["cited_contained"]) == (0.5, 0.5)


def test_the_table_has_a_row_per_category_then_all(files: dict[str, Path], embedder) -> None:
    groups = locomo_groups(files["locomo"], [1, 4])
    llm, judge = ScriptedLLM(["Max", "violin"]), ScriptedLLM(['{"label": "CORRECT"}'] * 2)
    report = evaluate_answers(files["locomo"], groups, locomo_run(llm, embedder, judge),
                              show_progress=False)  # fmt: skip
    table = answers_table(report).splitlines()
    assert table[0].startswith("| category | n | F1 | contained | evidence recalled | in context |")
    assert "judge" in table[0]
    assert [row.split(" | ")[0] for row in table[2:]] == ["| multi-hop", "| single-hop", "| all"]
    assert table[-1].startswith("| all | 2 | 1.0 | 1.0 | 1.0 | 1.0 | 0.0 | 1.0 |")


def test_limit_and_questions_choose_in_file_order(files: dict[str, Path]) -> None:
    groups = locomo_groups(files["locomo"], parse_categories("1,single-hop,temporal"))
    assert [q.id for g in selected(groups, limit=2) for q in g.questions] == [
        "conv-t:1",
        "conv-t:2",
    ]
    assert [q.id for g in selected(groups, ["conv-t:4"]) for q in g.questions] == ["conv-t:4"]
    with pytest.raises(ConfigError, match="no question conv-t:9"):
        selected(groups, ["conv-t:9"])
    with pytest.raises(ConfigError, match="unknown LoCoMo category 'hops'"):
        parse_categories("hops")


def test_resume_asks_only_the_questions_not_answered(
    files: dict[str, Path], embedder, tmp_path: Path
) -> None:
    groups = locomo_groups(files["locomo"])
    records = records_path_for(tmp_path / "report.json")
    assert records == tmp_path / "report.answers.jsonl"
    first = ScriptedLLM(["Max"])
    evaluate_answers(files["locomo"], selected(groups, limit=1), locomo_run(first, embedder),
                     records, show_progress=False)  # fmt: skip
    with records.open("a") as out:
        out.write('{"id": "conv-t:2", "categ')  # the line a killed run was writing
    with pytest.raises(ConfigError, match="--resume to go on"):
        evaluate_answers(files["locomo"], groups, locomo_run(first, embedder), records,
                         show_progress=False)  # fmt: skip
    later = ScriptedLLM(["violin", "in June"])
    report = evaluate_answers(files["locomo"], groups, locomo_run(later, embedder), records,
                              resume=True, show_progress=False)  # fmt: skip
    assert len(later.history) == 2  # conv-t:1 was answered before
    assert "Which instrument" in later.history[0][-1]["content"]
    assert report["questions"] == 3
    ids = [json.loads(line)["id"] for line in records.read_text().splitlines()]
    assert ids == ["conv-t:1", "conv-t:2", "conv-t:4"]  # the broken line gone
    other = ScriptedLLM()
    other.name = "another-model"
    with pytest.raises(ConfigError, match="holds answers by scripted"):
        evaluate_answers(files["locomo"], groups, locomo_run(other, embedder), records,
                         resume=True, show_progress=False)  # fmt: skip


def test_longmemeval_asks_at_the_question_date_with_abstention_apart(
    files: dict[str, Path], embedder
) -> None:
    groups = longmemeval_groups(files["longmemeval"])
    assert [len(group.lines) for group in groups] == [1, 1]  # user turns, as recall stores them
    assert [len(g.lines) for g in longmemeval_groups(files["longmemeval"], True)] == [2, 1]
    assert groups[0].questions[0].now == datetime(2023, 5, 30, 16, 40, tzinfo=UTC)
    llm, judge = ScriptedLLM(["It is blue.", "You never told me."]), ScriptedLLM(["yes", "yes"])
    run = AnswerRun("longmemeval", llm, judge, embedder, {"threshold": 0.0})
    report = evaluate_answers(files["longmemeval"], groups, run, show_progress=False)
    assert "Tuesday 2023-05-30 16:40" in llm.history[0][0]["content"]
    assert set(report["by_category"]) == {"single-session-user", "abstention"}
    assert report["by_category"]["single-session-user"]["contained"] == 1.0
    assert report["by_category"]["single-session-user"]["evidence_recalled"] == 1.0
    assert report["by_category"]["abstention"]["evidence_recalled"] is None  # nothing marked
    assert "unanswerable question" in judge.history[1][0]["content"]
    assert report["overall"]["judge"] == 1.0


def test_the_report_names_the_bundled_models_seed(tmp_path: Path) -> None:
    from membot.llm import BundledSmolLM2

    llm = BundledSmolLM2()  # not loaded: the report reads its settings only
    llm.seed = 5
    report = answers_report(tmp_path / "f.json", AnswerRun("locomo", llm), "minilm", [])
    assert (report["llm"], report["seed"]) == ("smollm2", 5)


def test_turn_settings_set_the_strategy_and_its_options() -> None:
    settings = turn_settings("bm25", {"expand_before": 2.0, "lexical_top": 3.0})
    assert settings == {"strategy": "bm25", "expand_before": 2, "strategy.lexical_top": 3.0}


@pytest.mark.slow
def test_the_cli_writes_the_report_and_resumes(files: dict[str, Path], tmp_path: Path) -> None:
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["Max", "violin", "June", "left"]))
    out = tmp_path / "report.json"
    base = ["eval", "locomo", str(files["locomo"]), "--answers", "--llm", f"script:{script}"]
    first = CliRunner().invoke(app, [*base, "--limit", "1", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "| all | 1 | 1.0 |" in first.stderr
    assert json.loads(out.read_text())["questions"] == 1
    assert json.loads(out.read_text())["seed"] is None  # a scripted model draws nothing
    again = CliRunner().invoke(app, [*base, "--out", str(out), "--resume", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["questions"] == 3
    assert json.loads(script.read_text()) == ["left"]  # two more questions asked, not three
    assert len(records_path_for(out).read_text().splitlines()) == 3
    wrong = CliRunner().invoke(app, ["eval", "locomo", str(files["locomo"]), "--limit", "1"])
    assert isinstance(wrong.exception, ConfigError)
    assert "--limit: only with --answers" in str(wrong.exception)
    unseeded = CliRunner().invoke(app, ["eval", "locomo", str(files["locomo"]), "--seed", "0"])
    assert "--seed: only with --answers" in str(unseeded.exception)
    scripted = CliRunner().invoke(app, [*base, "--seed", "3", "--limit", "1"])
    assert isinstance(scripted.exception, ConfigError)
    assert "--seed: only the bundled smollm2 is seeded, not script" in str(scripted.exception)

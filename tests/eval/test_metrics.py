"""The benchmark metrics on cases worked out by hand."""

from __future__ import annotations

import math

import pytest

from membot.eval.metrics import (
    RetrievalScores,
    dcg,
    evaluate_retrieval,
    evaluate_session_ranking,
    evaluate_sessions,
    evaluate_turn_to_session,
    evidence_recall,
    keyed,
    mean_by_key,
    ndcg,
    sessions_by_best_turn,
    strip_turn_id,
)

CORPUS = ["a", "b", "c", "d"]


def test_dcg_does_not_discount_the_first_item() -> None:
    assert dcg([1, 0, 1], 3) == pytest.approx(1 + 1 / math.log2(3))
    assert dcg([0, 1], 2) == pytest.approx(1.0)  # log2(2) = 1
    assert dcg([], 5) == 0.0


def test_ndcg_compares_with_every_gold_item_of_the_corpus_first() -> None:
    # relevances in ranked order 1, 0, 1, 0; ideal 1, 1, 0, 0
    expected = (1 + 1 / math.log2(3)) / 2
    assert ndcg([1, 0, 3, 2], {"b", "d"}, CORPUS, 4) == pytest.approx(expected)


def test_gold_items_in_either_order_at_the_top_score_one() -> None:
    assert ndcg([3, 1, 0, 2], {"b", "d"}, CORPUS, 2) == pytest.approx(1.0)
    assert ndcg([1, 3, 0, 2], {"b", "d"}, CORPUS, 2) == pytest.approx(1.0)


def test_k_past_the_end_of_the_ranking_reads_the_whole_ranking() -> None:
    scores = evaluate_retrieval([2, 0, 1, 3], {"b", "d"}, CORPUS, 10)
    assert scores.recall_any == scores.recall_all == 1.0
    assert scores.ndcg_any == pytest.approx(ndcg([2, 0, 1, 3], {"b", "d"}, CORPUS, 4))


def test_recall_any_wants_one_gold_item_recall_all_every_one() -> None:
    assert evaluate_retrieval([1, 0, 2, 3], {"b", "d"}, CORPUS, 2) == RetrievalScores(
        1.0, 0.0, pytest.approx(1 / (1 + 1))
    )


def test_without_gold_recall_all_is_one_and_the_others_zero() -> None:
    assert evaluate_retrieval([0, 1], set(), CORPUS, 1) == RetrievalScores(0.0, 1.0, 0.0)


def test_a_turn_id_loses_only_its_last_part() -> None:
    assert strip_turn_id("answer_4be1b6b4_2_7") == "answer_4be1b6b4_2"
    assert strip_turn_id("sharegpt_x_0_12") == "sharegpt_x_0"


def test_session_k_grows_until_k_distinct_sessions_are_read() -> None:
    turns = ["s1_1", "s1_2", "s1_3", "s2_1", "s3_1"]
    # the top 2 turns hold only s1; k grows to 4 turns, which hold s1 and s2
    scores = evaluate_turn_to_session([0, 1, 2, 3, 4], ["s2_1"], turns, 2)
    assert scores.recall_all == 1.0
    # turns of one session each count in the DCG, as in the official code
    relevant = [0, 0, 0, 1, 0]
    assert scores.ndcg_any == pytest.approx(dcg(relevant, 4) / dcg([1], 4))


def test_session_k_stops_at_the_end_of_the_corpus() -> None:
    scores = evaluate_sessions([1, 0], {"s1"}, ["s1", "s1"], 50)
    assert scores == RetrievalScores(1.0, 1.0, 1.0)
    scores = evaluate_sessions([1, 0, 2], {"s2"}, ["s1", "s1", "s2"], 50)
    assert scores.ndcg_any == pytest.approx(1 / math.log2(3))


def test_a_duplicated_gold_turn_counts_once() -> None:
    gold = ["s2_1", "s2_1"]
    scores = evaluate_turn_to_session([0, 1], gold, ["s1_1", "s2_1"], 1)
    assert (scores.recall_any, scores.recall_all) == (0.0, 0.0)


def test_sessions_are_ranked_by_their_best_turn() -> None:
    sessions = ["s1", "s1", "s2", "s3"]
    assert sessions_by_best_turn([3, 1, 2, 0], sessions) == ["s3", "s1", "s2"]


def test_a_session_counts_as_a_whole_when_read_by_its_best_turn() -> None:
    # s1's unmarked turn comes first: read as sessions, s1 is the first session found
    sessions = ["s1", "s1", "s2", "s3"]
    scores = evaluate_session_ranking([1, 2, 3, 0], {"s1"}, sessions, 1)
    assert scores == RetrievalScores(1.0, 1.0, 1.0)
    # the official turn2session reading renames that turn noans: s1 is found only at its
    # marked turn, after two other sessions
    turn_ids = ["s1_1", "noans_s1_2", "s2_1", "s3_1"]
    strict = evaluate_turn_to_session([1, 2, 3, 0], ["s1_1"], turn_ids, 1)
    assert strict.recall_all == 0.0


def test_session_ndcg_counts_each_session_once() -> None:
    sessions = ["s1", "s1", "s2", "s3"]
    # sessions in order s2, s1, s3; gold s1 and s3, at the 2nd and 3rd places (the official
    # DCG discounts the i-th place, from 0, by log2(i + 1) past the first); ideal: both first
    scores = evaluate_session_ranking([2, 0, 1, 3], {"s1", "s3"}, sessions, 3)
    assert scores.recall_all == 1.0
    expected = (1 / math.log2(2) + 1 / math.log2(3)) / (1 + 1 / math.log2(2))
    assert scores.ndcg_any == pytest.approx(expected)
    # a session the ranking leaves out follows, so k past the ranking still finds it
    assert evaluate_session_ranking([2], {"s3"}, sessions, 3).recall_all == 1.0


def test_keyed_names_follow_the_official_report() -> None:
    assert keyed(RetrievalScores(1.0, 0.0, 0.5), 10) == {
        "recall_any@10": 1.0,
        "recall_all@10": 0.0,
        "ndcg_any@10": 0.5,
    }


def test_evidence_recall_is_the_share_of_evidence_entries_in_context() -> None:
    assert evidence_recall(["D1:3", "D2:1"], ["D1:3", "D4:4"]) == 0.5
    assert evidence_recall([], ["D1:3"]) == 0.0
    # entries count as listed, repeats included, like the official code
    assert evidence_recall(["D1:1"], ["D1:1", "D1:1", "D2:3"]) == pytest.approx(2 / 3)
    # context lines repeated or not in the evidence change nothing
    assert evidence_recall(["D1:1", "D1:1", "D9:9"], ["D1:1"]) == 1.0


def test_a_question_without_evidence_counts_one() -> None:
    assert evidence_recall(["D1:1"], []) == 1.0


def test_means_are_taken_key_by_key() -> None:
    rows = [{"5": 1.0, "10": 1.0}, {"5": 0.0, "10": 0.5}]
    assert mean_by_key(rows) == {"5": 0.5, "10": 0.75}
    assert mean_by_key([]) == {}

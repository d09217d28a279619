"""Points a model writes about a person are kept only where the person's lines support them."""

from __future__ import annotations

import pytest

from membot.grounding import content_stems, undated, unsupported_points

SAID = [
    "I'm allergic to peanuts, so no satay for me.",
    "I fly to Lisbon tomorrow and my daughter just started kindergarten.",
]


def test_content_words_meet_again_in_other_forms() -> None:
    assert content_stems("Flies, allergies and running") == content_stems("fly allergy run")
    assert content_stems("Sam likes tea", frozenset({"sam"})) == content_stems("liked tea")
    assert content_stems("the and 2024-05-01 of is") == set()


def test_undated_drops_the_leading_date() -> None:
    assert undated("- 2024-05-01: Sam flies to Lisbon") == "Sam flies to Lisbon"
    assert undated("(2024-05-01) Sam flies") == "Sam flies"


def test_points_sharing_most_words_with_the_person_pass(embedder) -> None:
    points = ["2024-05-01: Sam is allergic to peanuts", "2024-05-02: Sam flies to Lisbon"]
    assert unsupported_points(points, SAID, embedder.embed, names=["Sam"]) == []


def test_invented_points_and_one_shared_word_fail(embedder) -> None:
    points = [
        "2024-05-01: Sam owns three cats",
        "2024-05-01: Sam enjoys satay",  # one word of two, and she said the opposite
        "2024-05-01:",
    ]
    assert unsupported_points(points, SAID, embedder.embed, names=["Sam"]) == points


def test_nothing_said_supports_nothing(embedder) -> None:
    assert unsupported_points(["Sam flies"], [], embedder.embed) == ["Sam flies"]
    assert unsupported_points([], SAID, embedder.embed) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "line", "supported"),
    [
        ("Sam's child began school", "My daughter just started kindergarten last week.", True),
        ("Sam is moving to Berlin", "We are relocating to Germany next month.", True),
        ("Sam likes jazz music", "I play the piano in a jazz band.", True),
        ("Sam has three cats", "My dog barks at the neighbours.", False),
        ("Sam lives in Paris", "I travel a lot for work.", False),
        ("Sam is allergic to peanuts", "I love flat whites; my birthday is in March.", False),
    ],
)
def test_paraphrases_pass_by_meaning_with_the_bundled_minilm(minilm, point, line, supported):
    assert (unsupported_points([point], [line], minilm.embed, names=["Sam"]) == []) is supported

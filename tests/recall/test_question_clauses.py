"""A question that names two things, searched one thing at a time (issue 30, item 4):
where a question is cut, and blend's cosines raised toward each piece's (``clause_weight``)."""

from __future__ import annotations

import numpy as np
import pytest
from asked import asked

from membot import Memory
from membot.index.vectors import Scope
from membot.recall.chat import embedded_question, options_of, searched_forms
from membot.recall.question_clauses import clauses, with_clauses
from membot.recall.ranked import ranked_lines, settings_for_ranking

ASKED = "Which device did I set up first, the smart thermostat or the mesh network system?"
THERMOSTAT = "I installed the smart thermostat in the hallway yesterday; it learned our schedule."
MESH = "Finally got the mesh network system working, the wifi reaches the garage now."
OTHERS = [
    "Which device should I buy first for a new flat, any thoughts?",
    "I set up my new phone over the weekend.",
    "My sister bought a smart speaker for the kitchen.",
    "Our cat knocked a glass off the table again.",
    "My dad asked me to help him set up his computer.",
]


@pytest.mark.parametrize(
    ("line", "pieces"),
    [
        (
            "Which event happened first, my attendance at a cultural festival or the start of "
            "my Spanish classes?",
            ["Which event happened first", "my attendance at a cultural festival",
             "the start of my Spanish classes"],
        ),
        (
            "How many days passed between the concert in Leeds and the trip to York?",
            ["How many days passed", "the concert in Leeds", "the trip to York"],
        ),
        (
            "Which did I buy first: the red kayak, the camping stove, the mountain bike or the "
            "climbing shoes?",
            ["the red kayak", "the camping stove", "the mountain bike", "the climbing shoes"],
        ),
    ],
)  # fmt: skip
def test_a_question_naming_two_things_is_cut_into_pieces(line: str, pieces: list[str]) -> None:
    assert clauses(line) == pieces


@pytest.mark.parametrize(
    "line",
    [
        "What has Melanie painted?",  # nothing to cut
        "Did you like the black and white bowl?",  # "and" alone does not cut
        "Hi, how are you?",  # pieces too short
        "I went to York, then to Leeds, or so I remember.",  # no question
        "",
    ],
)
def test_other_lines_are_not_cut(line: str) -> None:
    assert clauses(line) == []


@pytest.fixture
def devices(make_memory, minilm) -> Memory:  # type: ignore[no-untyped-def]
    memory: Memory = make_memory(embedder=minilm)
    for place, text in enumerate([THERMOSTAT, MESH, *OTHERS]):
        memory.add(text, user="ann", thread=f"t{place}")
    return memory


@pytest.mark.slow
def test_each_lines_cosine_moves_toward_each_pieces_and_never_falls(devices: Memory) -> None:
    source = devices.recall_source
    question = asked(devices, ASKED)
    plain = source.scored(question.vector, question.scope)
    pieces = [source.scored(source.embed([piece])[0], question.scope) for piece in clauses(ASKED)]
    highest = with_clauses(source, question, plain, 1.0)
    best_piece = np.max([piece.scores for piece in pieces], axis=0)
    np.testing.assert_allclose(highest.scores, np.maximum(plain.scores, best_piece), rtol=1e-6)
    half = with_clauses(source, question, plain, 0.5)
    assert (half.scores >= plain.scores).all() and (half.scores <= highest.scores).all()
    # The line about the thermostat rises toward the piece that names it (the line about the
    # mesh system is nearer the whole question than "the mesh network system" alone).
    texts = [line.text for line in devices.store.lines([int(i) for i in plain.ids])]
    at = texts.index(THERMOSTAT)
    assert half.scores[at] > plain.scores[at] + 0.05


@pytest.mark.slow
def test_a_question_that_does_not_cut_is_scored_as_before(devices: Memory) -> None:
    source = devices.recall_source
    for line in ("Which device did I set up first?", ASKED):
        question = asked(devices, line)
        plain = source.scored(question.vector, question.scope)
        assert with_clauses(source, question, plain, 0.0) is plain
    question = asked(devices, "Which device did I set up first?")
    plain = source.scored(question.vector, question.scope)
    assert with_clauses(source, question, plain, 1.0) is plain


@pytest.mark.slow
def test_blend_searches_the_pieces_by_default_and_embeds_them_with_theasked(
    devices: Memory,
) -> None:
    settings = settings_for_ranking("blend")
    assert options_of(settings)["clause_weight"] == 0.5
    assert searched_forms(settings, ASKED) == clauses(ASKED)
    assert searched_forms(settings_for_ranking("blend", {"clause_weight": 0}), ASKED) == []
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return devices.recall_source.embed(texts)

    _, prepared = embedded_question(embed, settings, ASKED)
    assert calls == [[ASKED, *clauses(ASKED)]]  # one batch
    assert sorted(prepared) == sorted(clauses(ASKED))
    scope = Scope.of(devices.store.bot_id("membot") or 0, None)
    ranked = ranked_lines(devices.recall_source, settings, ASKED, scope)
    texts = [line.text for line in devices.store.lines(ranked[:2])]
    assert sorted(texts) == sorted([THERMOSTAT, MESH])

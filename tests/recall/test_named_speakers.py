"""A question that names a speaker, searched by vector without the name (issue 30; blend's
``unnamed_weight``, off): the names read, the question without them, and the cosines mixed,
with the bundled embedder."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from membot import Memory
from membot.index.vectors import Scope
from membot.recall.blend_features import blend_features
from membot.recall.chat import options_of
from membot.recall.named_speakers import named_in, with_names_left_out, without_names
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.recall.strategies import Question

CHAT = [
    ("Caroline", "Hey Melanie, how was your week?"),
    ("Melanie", "I'm off to go swimming with the kids."),
    ("Caroline", "Thanks Melanie, you are so kind to me."),
    ("Melanie", "We went camping in the mountains last week."),
    ("Caroline", "I went to a support group yesterday."),
    ("Melanie", "Thanks, Caroline!"),
]


def test_the_speakers_a_question_names_are_read_as_whole_words_in_any_case() -> None:
    speakers = ["Melanie", "Caroline", "Mel", "You", "", "  "]
    assert named_in("What has melanie painted?", speakers) == ["Melanie"]
    assert named_in("Did Caroline and Melanie's kids meet?", speakers) == ["Caroline", "Melanie"]
    assert named_in("What did you paint, Mel?", speakers) == ["Mel"]  # "You": a common word
    assert named_in("What has Melanies painted?", speakers) == []


@pytest.mark.parametrize(
    ("question", "left"),
    [
        ("What activities has Melanie done with her family?", "What activities has done with "
         "her family?"),
        ("What do Melanie's kids like?", "What do kids like?"),
        ("What did Caroline and Melanie both paint?", "What did and both paint?"),
        ("Melanie?", "?"),
    ],
)  # fmt: skip
def test_a_question_without_the_names(question: str, left: str) -> None:
    assert without_names(question, ["Caroline", "Melanie"]) == left


@pytest.fixture
def chat(make_memory, minilm) -> Memory:  # type: ignore[no-untyped-def]
    memory: Memory = make_memory(embedder=minilm)
    for place, (speaker, text) in enumerate(CHAT):
        when = datetime(2026, 3, 1 + place, tzinfo=UTC)
        memory.add(text, user="ann", speaker=speaker, thread=f"t{place // 3}", created_at=when)
    return memory


def _question(memory: Memory, line: str) -> Question:
    scope = Scope.of(memory.store.bot_id("membot") or 0, None)
    return Question(line, memory.recall_source.embed([line])[0], scope, None, line)


@pytest.mark.slow
def test_the_cosines_move_to_the_question_without_the_names(chat: Memory) -> None:
    source = chat.recall_source
    question = _question(chat, "What activities has Melanie done with her family?")
    plain = source.scored(question.vector, question.scope)
    unnamed = source.scored(
        source.embed(["What activities has done with her family?"])[0], question.scope
    )
    np.testing.assert_allclose(
        with_names_left_out(source, question, plain, 1.0).scores, unnamed.scores, rtol=1e-6
    )
    half = with_names_left_out(source, question, plain, 0.5).scores
    np.testing.assert_allclose(half, (plain.scores + unnamed.scores) / 2, rtol=1e-5)
    # The name's pull is gone: a line that only thanks Melanie by name no longer scores above
    # one about something done.
    texts = [line.text for line in chat.store.lines([int(i) for i in plain.ids])]
    thanks, group = texts.index(CHAT[2][1]), texts.index(CHAT[4][1])
    assert plain.scores[thanks] > plain.scores[group]
    assert unnamed.scores[thanks] < unnamed.scores[group]


@pytest.mark.slow
def test_a_question_naming_no_speaker_is_scored_as_before(chat: Memory) -> None:
    source = chat.recall_source
    for line in ("What did Anna paint?", "Melanie"):  # no speaker named; nothing but a name
        question = _question(chat, line)
        plain = source.scored(question.vector, question.scope)
        assert with_names_left_out(source, question, plain, 1.0) is plain


@pytest.mark.slow
def test_lines_without_speakers_are_scored_as_before(make_memory, minilm) -> None:  # type: ignore[no-untyped-def]
    memory: Memory = make_memory(embedder=minilm)
    for text in ("Melanie went swimming with the kids.", "I like soup."):
        memory.add(text, user="ann", thread="t")
    question = _question(memory, "What has Melanie done?")
    plain = memory.recall_source.scored(question.vector, question.scope)
    assert with_names_left_out(memory.recall_source, question, plain, 1.0) is plain


@pytest.mark.slow
def test_blend_is_unchanged_by_default_and_ranks_with_it_on(chat: Memory) -> None:
    option = options_of(settings_for_ranking("blend"))
    assert option["unnamed_weight"] == 0.0
    question = _question(chat, "What activities has Melanie done with her family?")
    source = chat.recall_source
    found = blend_features(source, question, option, -2.0)
    assert found is not None
    plain = source.scored(question.vector, question.scope)
    np.testing.assert_array_equal(
        found.lines.scores, plain.with_parts(option["part_weight"]).scores
    )
    on = options_of(settings_for_ranking("blend", {"unnamed_weight": 0.75}))
    moved = blend_features(source, question, on, -2.0)
    assert moved is not None and not np.array_equal(moved.lines.scores, found.lines.scores)
    settings = settings_for_ranking("blend", {"unnamed_weight": 0.75})
    ranked = ranked_lines(source, settings, question.text, question.scope)
    assert sorted(ranked) == sorted(int(i) for i in plain.ids)  # every line, once

"""A question that names a speaker, searched by vector without the name (issue 30; blend's
``unnamed_weight``, 0.75): the names read, the question without them, and the cosines mixed,
with the bundled embedder."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from asked import asked

from membot import Memory
from membot.embed import CachedEmbedder, Embedder
from membot.recall.blend_features import blend_features
from membot.recall.chat import chosen_for_turn, options_of
from membot.recall.named_speakers import (
    guessed_names,
    named_in,
    unnamed_guess,
    with_names_left_out,
    without_names,
)
from membot.recall.ranked import context_order, ranked_lines, settings_for_ranking

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


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What activities has Melanie done with her family?", ["Melanie"]),
        ("What do Melanie's kids like? Did Caroline say?", ["Melanie", "Caroline"]),
        ("Melanie, what did you paint?", []),  # a sentence's first word: no guess
        ("When did Melanie go camping in June?", ["Melanie"]),
        ("Was Caroline at the Grand Canyon with Dr. Seuss?", ["Caroline"]),
        ('Did Caroline read "Becoming Nicole" at the LGBTQ group, or did I?', ["Caroline"]),
        ("When was Jon in Paris?", ["Jon", "Paris"]),  # a place looks like a name
    ],
)
def test_names_are_guessed_from_the_text_alone(question: str, names: list[str]) -> None:
    assert guessed_names(question) == names
    left = without_names(question, names)
    assert unnamed_guess(question) == (left if names else None)


def test_no_guess_where_nothing_but_names_is_left() -> None:
    assert unnamed_guess("Jon? Melanie?") is None


class RecordedEmbedder:
    """The bundled embedder, recording each batch it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name = inner, inner.name
        self.calls: list[list[str]] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture
def chat(make_memory, minilm) -> Memory:  # type: ignore[no-untyped-def]
    memory: Memory = make_memory(embedder=RecordedEmbedder(minilm))
    for place, (speaker, text) in enumerate(CHAT):
        when = datetime(2026, 3, 1 + place, tzinfo=UTC)
        memory.add(text, user="ann", speaker=speaker, thread=f"t{place // 3}", created_at=when)
    return memory


@pytest.mark.slow
def test_the_cosines_move_to_the_question_without_the_names(chat: Memory) -> None:
    source = chat.recall_source
    question = asked(chat, "What activities has Melanie done with her family?")
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
        question = asked(chat, line)
        plain = source.scored(question.vector, question.scope)
        assert with_names_left_out(source, question, plain, 1.0) is plain


@pytest.mark.slow
def test_lines_without_speakers_are_scored_as_before(make_memory, minilm) -> None:  # type: ignore[no-untyped-def]
    memory: Memory = make_memory(embedder=minilm)
    for text in ("Melanie went swimming with the kids.", "I like soup."):
        memory.add(text, user="ann", thread="t")
    question = asked(memory, "What has Melanie done?")
    plain = memory.recall_source.scored(question.vector, question.scope)
    assert with_names_left_out(memory.recall_source, question, plain, 1.0) is plain


@pytest.mark.slow
def test_blend_is_unchanged_when_off_and_ranks_with_it_by_default(chat: Memory) -> None:
    option = options_of(settings_for_ranking("blend", {"unnamed_weight": 0}))
    question = asked(chat, "What activities has Melanie done with her family?")
    source = chat.recall_source
    found = blend_features(source, question, option, -2.0)
    assert found is not None
    plain = source.scored(question.vector, question.scope)
    np.testing.assert_array_equal(
        found.lines.scores, plain.with_parts(option["part_weight"]).scores
    )
    on = options_of(settings_for_ranking("blend"))
    assert on["unnamed_weight"] == 0.75
    moved = blend_features(source, question, on, -2.0)
    assert moved is not None and not np.array_equal(moved.lines.scores, found.lines.scores)
    ranked = ranked_lines(source, settings_for_ranking("blend"), question.text, question.scope)
    assert sorted(ranked) == sorted(int(i) for i in plain.ids)  # every line, once


def _unprepared(memory: Memory, line: str, option: dict[str, float]) -> list[int]:
    """The ranking ``ranked_lines`` gives, with the question embedded alone and nothing
    prepared: every other form embedded when the strategy asks for it."""
    source, settings = memory.recall_source, settings_for_ranking("blend", option)
    question = asked(memory, line)
    choices = chosen_for_turn(source, settings, line, question.vector, question.scope, None, line)
    return context_order(source, choices, question.scope)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "option", "batches"),
    [
        # The guess is right: the question's form without the name comes in its batch.
        (
            "What activities has Melanie done with her family?",
            {"unnamed_weight": 0.75},
            [["What activities has Melanie done with her family?",
              "What activities has done with her family?"]],
        ),
        # "Paris" is guessed a name, but is no speaker: the text left is embedded after all.
        (
            "When was Melanie in Paris?",
            {"unnamed_weight": 0.75},
            [["When was Melanie in Paris?", "When was in?"], ["When was in Paris?"]],
        ),
        # The statement form is known from the text: it comes in the batch too.
        (
            "What has Melanie painted?",
            {"unnamed_weight": 0.75, "statement_weight": 0.5},
            [["What has Melanie painted?", "Melanie painted", "What has painted?"]],
        ),
    ],
)  # fmt: skip
def test_forms_embedded_with_the_question_rank_as_those_embedded_apart(
    chat: Memory, line: str, option: dict[str, float], batches: list[list[str]]
) -> None:
    source = chat.recall_source
    embedder = chat.embedder
    assert isinstance(embedder, RecordedEmbedder)
    unprepared = _unprepared(chat, line, option)
    embedder.calls.clear()
    question = asked(chat, line)
    prepared = ranked_lines(source, settings_for_ranking("blend", option), line, question.scope)
    assert embedder.calls[1:] == batches  # the first: asked's own
    assert prepared == unprepared


@pytest.mark.slow
def test_a_turn_embeds_its_line_and_the_guess_at_once_and_keeps_only_the_line(
    make_memory, minilm, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:  # fmt: skip
    recorded = RecordedEmbedder(minilm)
    memory: Memory = make_memory(embedder=CachedEmbedder(recorded, tmp_path / "cache.db"))
    for speaker, text in CHAT:
        memory.add(text, user="ann", speaker=speaker, thread="t")
    memory.configure_bot("membot", **{"strategy.unnamed_weight": 0.75})
    settings = memory.bot_settings("membot")
    line = "What has Melanie done with the kids lately?"
    recorded.calls.clear()
    vector, prepared = memory.embed_question(line, settings)
    assert recorded.calls == [[line, "What has done with the kids lately?"]]
    # The line's vector is in the on-disk cache (it is stored), the guess's is not: asked
    # again, only the guess is embedded.
    memory.embed([line, *prepared], keep=False)
    assert recorded.calls[-1] == list(prepared)
    stored = memory.add(line, user="bob", thread="new")
    recall = memory.recall(stored, settings, vector, now=None, prepared=prepared)
    preview = memory.preview_recall(line, user="bob")
    assert [match.line.id for match in recall.matches] == [
        match.line.id for match in preview.matches if match.line.id != stored.id
    ]


@pytest.mark.slow
def test_a_form_embedded_after_a_wrong_guess_is_not_kept_either(
    make_memory, minilm, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:  # fmt: skip
    """ "Paris" was guessed a name, so the text left ("When was in Paris?") is embedded during
    the search: like the guess, it is not kept in the on-disk cache, where forgetting the
    line asked could not find it."""
    recorded = RecordedEmbedder(minilm)
    memory: Memory = make_memory(embedder=CachedEmbedder(recorded, tmp_path / "cache.db"))
    for speaker, text in CHAT:
        memory.add(text, user="ann", speaker=speaker, thread="t")
    settings = memory.bot_settings("membot")
    line = "When was Melanie in Paris?"
    vector, prepared = memory.embed_question(line, settings)
    memory.recall(memory.add(line, user="ann", thread="q"), settings, vector, now=None,
                  prepared=prepared)  # fmt: skip
    assert recorded.calls[-1] == ["When was in Paris?"]  # embedded during the search
    recorded.calls.clear()
    memory.embed(["When was in Paris?", line], keep=False)
    assert recorded.calls == [["When was in Paris?"]]  # not kept; the line asked is

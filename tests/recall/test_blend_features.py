"""blend's features, computed by one function for a turn and for a fitted ranker's training
(issue 30 item 7): blend's score is their weighted sum, and a ranker fitted on them reads
them as the turn computes them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from membot import Memory
from membot.errors import ConfigError
from membot.index.vectors import Scope
from membot.recall import strategies as strategy_registry
from membot.recall.blend_features import EVERY, FEATURES, blend_features
from membot.recall.chat import options_of, strategies
from membot.recall.fitted_ranker import FittedRanker
from membot.recall.line_strategies import FittedBlendStrategy
from membot.recall.ranked import ranked_lines, settings_for_ranking
from membot.recall.strategies import Question, register_strategy

QUESTION = "what did Rex chase in the park?"
TEXTS = ["my dog Rex chased a ball in the park", "the weather was grey in Leeds",
         "Rex loves the park by the river", "I had soup for lunch", "the park was closed",
         "a red ball rolled away"]  # fmt: skip


@pytest.fixture
def stored(memory: Memory) -> Memory:
    for day, text in enumerate(TEXTS, start=1):
        when = datetime(2026, 3, day, tzinfo=UTC)
        memory.add(text, user="ann", thread=f"t{day % 2}", created_at=when)
    return memory


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strategies registered by a test are gone after it."""
    strategies()  # membot's own registered first, as they are on first use
    monkeypatch.setattr(strategy_registry, "_REGISTERED", dict(strategy_registry._REGISTERED))


def question(memory: Memory) -> Question:
    scope = Scope.of(memory.store.bot_id("membot") or 0, None)
    vector = memory.recall_source.embed([QUESTION])[0]
    return Question(QUESTION, vector, scope, None, QUESTION)


def ranking(memory: Memory, strategy: str = "blend", **options: float) -> list[int]:
    settings = settings_for_ranking(strategy, options)
    scope = Scope.of(memory.store.bot_id("membot") or 0, None)
    return ranked_lines(memory.recall_source, settings, QUESTION, scope)


def test_blends_score_is_the_weighted_sum_of_its_features(stored: Memory) -> None:
    option = options_of(settings_for_ranking("blend", {"recency_weight": 0.3}))
    found = blend_features(stored.recall_source, question(stored), option, -2.0)
    assert found is not None
    weights = np.array([option[name] for name in FEATURES])
    rows = np.arange(len(found.lines.ids))
    np.testing.assert_allclose(found.matrix(rows) @ weights, found.fused, atol=1e-6)
    for name in FEATURES:
        assert 0.0 <= found.columns[name].min() <= found.columns[name].max() <= 1.0, name


def test_every_feature_is_computed_only_when_asked_or_weighed(stored: Memory) -> None:
    option = options_of(settings_for_ranking("blend"))
    plain = blend_features(stored.recall_source, question(stored), option, -2.0)
    every = blend_features(stored.recall_source, question(stored), option, -2.0, every=True)
    assert plain is not None and every is not None
    assert not plain.columns["recency_weight"].any()
    assert every.columns["recency_weight"].max() == 1.0  # the latest line
    np.testing.assert_array_equal(plain.fused, every.fused)  # what is computed, not weighed
    assert "feedback_weight" not in EVERY  # a second dense scan


def test_recency_weight_raises_the_later_of_two_like_lines(memory: Memory) -> None:
    for day in (1, 2):
        memory.add("Rex chased a ball in the park", user="ann", thread=f"t{day}",
                   created_at=datetime(2026, 3, day, tzinfo=UTC))  # fmt: skip
    earlier, later = 1, 2
    assert ranking(memory, recency_weight=0.5)[:2] == [later, earlier]
    assert ranking(memory, recency_weight=-0.5)[:2] == [earlier, later]


@pytest.mark.usefixtures("registry")
def test_a_ranker_with_blends_weights_ranks_as_blend(stored: Memory) -> None:
    option = options_of(settings_for_ranking("blend"))
    ranker = FittedRanker({name: option[name] for name in FEATURES})
    register_strategy(FittedBlendStrategy("fitted-as-blend", ranker), replace=True)
    assert ranking(stored, "fitted-as-blend") == ranking(stored)


@pytest.mark.usefixtures("registry")
def test_a_rankers_products_of_features_count(stored: Memory) -> None:
    """A product weighed alone orders the lines by it: dense times BM25 puts the line that
    both reads like the question and shares its words first."""
    ranker = FittedRanker({}, (("dense_weight", "lexical_weight", 1.0),))
    register_strategy(FittedBlendStrategy("fitted-product", ranker), replace=True)
    first = ranking(stored, "fitted-product", expand_before=0, expand_after=0)[0]
    assert stored.store.lines([first])[0].text == TEXTS[0]


def test_a_ranker_file_naming_an_unknown_feature_is_refused(tmp_path) -> None:
    path = tmp_path / "ranker.json"
    path.write_text('{"linear": {"dense_weight": 1, "mood_weight": 2}}', encoding="utf-8")
    with pytest.raises(ConfigError, match="mood_weight"):
        FittedRanker.read(path)
    path.write_text('{"pairs": [["dense_weight"]]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="not a fitted ranker"):
        FittedRanker.read(path)
    path.write_text('{"linear": {"dense_weight": 1}, "pairs": [["dense_weight", '
                    '"recency_weight", 0.5]]}', encoding="utf-8")  # fmt: skip
    read = FittedRanker.read(path)
    assert read.features == {"dense_weight", "recency_weight"}

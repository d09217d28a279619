"""Strategies are registered objects: membot's own through the same call as another
package's, each owning its options; a registered strategy serves turns and previews through
the one recall path, reading only its :class:`~membot.RecallSource`."""

from __future__ import annotations

from types import MappingProxyType

import pytest

import membot
from membot import BotSettings, Choice, ConfigError, Memory, Question, RecallSource
from membot.index.scope import Scope
from membot.recall import strategies as registry
from membot.recall.chat import check_strategy, strategy_named, strategy_names
from membot.recall.lines import Hit, expand_neighbors

# Every strategy's options and defaults as they were when strategies were an if/elif chain:
# a bot's stored ``strategy.NAME`` settings and the benchmarks' numbers depend on them.
EXPANSION = {"neighbour_decay": 0.85, "partners_only": 1}
KEEP = {"lexical_top": 3, "lexical_margin": 0.1}
OPTIONS = {
    "lines": {**EXPANSION},
    "hybrid": {"dense_weight": 1.0, "lexical_weight": 2.0, "rrf_k": 60.0, **KEEP, **EXPANSION},
    "blend": {
        "dense_weight": 1.0,
        "lexical_weight": 0.5,
        "neighbour_weight": 0.25,
        "time_weight": 0.25,
        "speaker_weight": 0.1,
        "entity_weight": 0.2,
        "feedback_weight": 0.0,
        "feedback_seeds": 10,
        "sentence_weight": 0.0,
        "neighbour_only_weight": 0.0,
        "recency_weight": 0.0,
        "opener_weight": 0.1,
        "opener_threads": 5,
        "part_weight": 0.75,
        "statement_weight": 0.0,
        "statement_max": 1,
        "clause_weight": 0.5,
        "unnamed_weight": 0.75,
        **KEEP,
        **EXPANSION,
        "thread_penalty": 0.0,
        "near_penalty": 0.0,
        "near_lines": 3,
        "many_only": 0,
        "many_decay": 1.0,
    },
    "bm25": {**KEEP, **EXPANSION},
    "prune": {},
    "pairs": {},
    "windows": {},
}


class LatestLine:
    """A strategy another package could register: the latest line in scope, alone (its
    one option, ``bonus``, a whole number, is only checked)."""

    name = "latest"
    options = MappingProxyType({"bonus": 2.0})
    whole_numbers = frozenset({"bonus"})
    switches = frozenset[str]()

    def __init__(self) -> None:
        self.sources: list[RecallSource] = []

    def choose(
        self, source: RecallSource, settings: BotSettings, question: Question
    ) -> list[Choice]:
        self.sources.append(source)
        lines = source.scored(question.vector, question.scope)
        if not len(lines.ids):
            return []
        at = int(lines.ids.argmax())
        hit = Hit(int(lines.ids[at]), int(lines.thread_ids[at]), int(lines.seqs[at]),
                  float(lines.scores[at]))  # fmt: skip
        return [Choice(hit, expand_neighbors(hit, 0, 0), hit.score, 1.0)]


@pytest.fixture
def latest(monkeypatch: pytest.MonkeyPatch) -> LatestLine:
    """A strategy registered for one test (the registry is the process's)."""
    strategy_names()  # membot's own are in before the copy
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    return membot.register_strategy(LatestLine())  # type: ignore[return-value]


def test_membot_registers_its_strategies_with_their_options() -> None:
    assert strategy_names() == tuple(OPTIONS)
    assert membot.strategy_options() == OPTIONS
    assert strategy_named("hybrid").whole_numbers == {"lexical_top"}
    assert strategy_named("blend").switches == {"partners_only", "many_only", "statement_max"}


def test_a_registered_strategy_recalls_for_a_turn_and_a_preview(
    memory: Memory, latest: LatestLine
) -> None:
    for text in ("the ferry leaves at nine", "my sister lives in Oslo", "we like cloudberries"):
        memory.add(text, user="ann", thread="old")
    memory.configure_bot("membot", strategy="latest", threshold=0.0)

    preview = memory.preview_recall("where does my sister live?", user="ann")
    line = memory.add("where does my sister live?", user="ann", thread="new")
    turn = memory.recall(line)

    for recalled in (preview, turn):
        assert [match.line.text for match in recalled.matches] == ["we like cloudberries"]
    assert all(source is memory.recall_source for source in latest.sources)
    assert "latest" in membot.strategy_options()


def test_a_registered_strategy_s_options_are_checked_as_declared(latest: LatestLine) -> None:
    check_strategy(BotSettings().with_values({"strategy": "latest", "strategy.bonus": 3}))
    with pytest.raises(ConfigError, match=r"whole number"):
        check_strategy(BotSettings().with_values({"strategy": "latest", "strategy.bonus": 2.5}))
    with pytest.raises(ConfigError, match=r"no option 'rrf_k' \(it reads: strategy.bonus\)"):
        check_strategy(BotSettings().with_values({"strategy": "latest", "strategy.rrf_k": 1}))


def test_a_name_is_registered_once(latest: LatestLine) -> None:
    with pytest.raises(ConfigError, match="'latest' is registered already"):
        membot.register_strategy(LatestLine())
    replaced = membot.register_strategy(LatestLine(), replace=True)
    assert strategy_named("latest") is replaced


def test_an_unknown_strategy_names_those_registered(latest: LatestLine) -> None:
    with pytest.raises(ConfigError, match=r"use one of lines, hybrid, .*windows, latest"):
        strategy_named("nope")


def test_a_scope_is_built_from_the_bot_s_settings() -> None:
    person = Scope.of(1, 7, BotSettings(recall_roles=("human",)), feed=(3, 10))
    assert person == Scope(1, (7,), None, 3, 10, ("human",))
    shared = Scope.of(1, 7, BotSettings(share_across_people=True))
    assert shared.person_ids is None and shared.roles == ("human", "bot")
    assert Scope.of(1, 7, thread_id=4, roles=["bot"]) == Scope(1, (7,), 4, None, None, ("bot",))

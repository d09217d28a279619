"""Recall, the one implementation: a bot's strategy picks which earlier lines come back.

A live turn (:meth:`membot.Memory.recall`) and the benchmarks (:mod:`membot.recall.ranked`)
both call :func:`chosen_for_turn`: each strategy orders the lines in scope and keeps those its
keep-or-drop rule lets through (``threshold``, ``lexical_top``/``lexical_margin``, at most
``max_matches``); each kept match brings in a block of the lines around it. A turn merges the
blocks into its relevance buffer; a benchmark asks with ``threshold`` -1 (every line kept) and
reads the blocks' lines in the order :func:`membot.recall.ranked.context_order` gives them.

- ``lines`` (uncany-membot): lines whose cosine with the match string reaches ``threshold``,
  best first.
- ``hybrid``: dense and BM25 ranks fused by reciprocal rank. Kept: a line whose cosine
  reaches ``threshold``, or a line among BM25's first ``lexical_top`` whose cosine reaches
  ``threshold - lexical_margin`` -- sharing rare words with the question is evidence too, so
  the bar is lower for it. Options: ``dense_weight``, ``lexical_weight``, ``rrf_k``,
  ``lexical_top``, ``lexical_margin``.
- ``blend`` (the default): a line's cosine plus ``neighbour_weight`` times its previous and
  next lines' cosines, and BM25 over the query's words that are not stopwords, each min-max
  normalised and added (``dense_weight``, ``lexical_weight``). Kept like hybrid's lines (its
  own cosine against ``threshold``, or among BM25's first ``lexical_top`` within
  ``lexical_margin``), in blended order. When the line names a time
  (``membot.recall.timeframe``: "a week ago", "last Friday", "in March 2023"), lines said
  within it are raised by ``time_weight`` and kept at the lower bar too. Then a second round
  (``membot.recall.second_round``): the names and numbers the best ``feedback_seeds`` lines
  hold are searched with BM25 and added at ``entity_weight`` (``feedback_weight``: the seeds'
  mean vector instead, off by default).
- ``bm25``: BM25's order; kept like hybrid's lexical lines.
- ``prune`` (context pruning): the ``lines`` matches, each with its turn partner only (the bot's
  reply to a human line, or the human line a bot line answered).
- ``pairs`` and ``windows``: the unit (exchange, or window of ``window_size`` lines overlapping
  by ``window_overlap``) whose vector reaches ``threshold`` comes back whole.

Expansion (``lines``, ``hybrid``, ``blend``, ``bm25``): a match brings the lines up to
``expand_before``/``expand_after`` away in its thread; with ``partners_only`` (the default) the
block reaches only as far as the farthest line said by the other party (another role or
speaker) -- the exchange around the match, not the same person's neighbouring lines, which
must earn their place by their own score. ``neighbour_decay`` orders a block's lines after
their match for a context cut at k lines (the benchmarks): a line d away counts
``neighbour_decay ** d`` of its match's score.

Every strategy's matches then pass :mod:`membot.recall.duplicates`: near-duplicates collapse
into one match (its ``duplicates`` says how many more it stands for), and a person's question
asked again now gives way to the lines that answer it.

A match's reported score is its cosine with the match string in every strategy (for units,
the unit's), so traces compare across strategies; the order a strategy gives it (its fused
score) travels beside it as :attr:`Choice.order`. Lines are embedded as ``Speaker: text``
where they have a speaker (:func:`membot.memory.facade.embedding_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from membot.config import BotSettings
from membot.errors import ConfigError
from membot.index.scope import Scope
from membot.recall.blend_features import min_max
from membot.recall.builtin import register_builtin_strategies
from membot.recall.duplicates import candidates_for, distinct_choices
from membot.recall.line_strategies import EVERY_LINE, reciprocal_rank_fusion
from membot.recall.lines import Hit, merge_blocks
from membot.recall.named_speakers import unnamed_guess
from membot.recall.question_clauses import clauses
from membot.recall.question_forms import statement_form
from membot.recall.strategies import Choice, Question, Strategy, load_strategies, option_values
from membot.store.base import BufferEntry

if TYPE_CHECKING:
    from membot.recall.source import RecallSource

__all__ = [
    "EVERY_LINE",
    "ChatRecall",
    "Choice",
    "check_strategy",
    "chosen_for_turn",
    "embedded_question",
    "min_max",
    "options_of",
    "recall_for_turn",
    "reciprocal_rank_fusion",
    "strategies",
    "strategy_named",
    "strategy_names",
    "strategy_options",
]


def strategies() -> dict[str, Strategy]:
    """Every registered strategy by name, membot's own first (in their documented order)."""
    return load_strategies(register_builtin_strategies)


def strategy_names() -> tuple[str, ...]:
    return tuple(strategies())


def strategy_options() -> dict[str, dict[str, float]]:
    """Each registered strategy's options and their defaults, by name: what a bot's
    ``strategy.NAME`` settings may set (``membot eval --help``, ``GET /v1/strategies``)."""
    return {name: dict(strategy.options) for name, strategy in strategies().items()}


def strategy_named(name: str) -> Strategy:
    """The strategy registered as ``name``; ConfigError naming those there are."""
    found = strategies().get(name)
    if found is None:
        raise ConfigError(f"unknown strategy {name!r}: use one of {', '.join(strategy_names())}")
    return found


def check_strategy(settings: BotSettings) -> None:
    """ConfigError unless the strategy exists and every option is one it reads, of its kind."""
    strategy = strategy_named(settings.strategy)
    known = strategy.options
    for name, value in settings.strategy_options:
        if name not in known:
            listed = ", ".join(f"strategy.{each}" for each in known) or "none"
            raise ConfigError(
                f"strategy {settings.strategy} has no option {name!r} (it reads: {listed})"
            )
        if name in strategy.switches and value not in (0, 1):
            raise ConfigError(f"strategy.{name} is 1 (on) or 0 (off), not {value}")
        if name in strategy.whole_numbers and not float(value).is_integer():
            raise ConfigError(f"strategy.{name} is a whole number, not {value}")


def options_of(settings: BotSettings) -> dict[str, float]:
    """The strategy's options: its defaults, overridden by the bot's settings."""
    return option_values(strategy_named(settings.strategy), settings)


@dataclass(frozen=True)
class ChatRecall:
    """The matches a strategy kept (best first) and the blocks they bring in."""

    hits: tuple[Hit, ...]
    blocks: tuple[BufferEntry, ...]


def recall_for_turn(
    source: RecallSource,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None = None,
    said: str | None = None,
    prepared: Mapping[str, np.ndarray] | None = None,
) -> ChatRecall:
    """The matches and merged blocks ``settings.strategy`` recalls for one turn asked at
    ``now`` (see :func:`chosen_for_turn`)."""
    choices = chosen_for_turn(source, settings, query, vector, scope, now, said, prepared)
    blocks = merge_blocks([choice.block for choice in choices])
    return ChatRecall(tuple(choice.hit for choice in choices), tuple(blocks))


def chosen_for_turn(
    source: RecallSource,
    settings: BotSettings,
    query: str,
    vector: np.ndarray,
    scope: Scope,
    now: datetime | None = None,
    said: str | None = None,
    prepared: Mapping[str, np.ndarray] | None = None,
) -> list[Choice]:
    """The matches ``settings.strategy`` keeps for one turn, best first, each with its block:
    ``blend`` reads time words such as "last week" in ``said`` (the new line itself; default
    ``query``, the match string) from ``now``; ``prepared``: the vectors embedded with
    ``vector`` (:func:`embedded_question`)."""
    check_strategy(settings)
    if settings.max_matches == 0:
        return []
    question = Question(query, vector, scope, now, said, prepared or {})
    # Asked for more than it keeps: near-duplicates collapse and repeats of the question give
    # way (membot.recall.duplicates), and the next lines take the slots they leave.
    wider = replace(settings, max_matches=candidates_for(settings.max_matches, EVERY_LINE))
    choices = strategy_named(settings.strategy).choose(source, wider, question)
    return distinct_choices(source, choices, question, settings.max_matches)


def embedded_question(
    embed: Callable[[list[str]], np.ndarray],
    settings: BotSettings,
    query: str,
    said: str | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The vector of ``query`` and, by text, those of the other forms of it the strategy will
    search (``said``: the new line, default ``query``), all from one call to ``embed``
    (``query`` first): a second short text in the batch costs about 2 ms of a turn on the
    shared 2-core machine, one embedded on its own about 8 (docs/recall.md, "Why multi-hop
    and open-domain questions miss")."""
    texts = [query, *searched_forms(settings, query, said)]
    vectors = embed(texts)
    return vectors[0], dict(zip(texts[1:], vectors[1:], strict=True))


def searched_forms(settings: BotSettings, query: str, said: str | None = None) -> list[str]:
    """The other texts ``blend`` will embed for ``query`` (``said``: the new line), as far
    as the text alone tells: its statement form where ``statement_weight`` is on
    (:mod:`membot.recall.question_forms`), and where ``unnamed_weight`` is, the question
    without the words that look like names (:func:`~membot.recall.named_speakers.unnamed_guess`;
    used only where they are the speakers it names), and where ``clause_weight`` is, the
    pieces of a question that names two things (:mod:`membot.recall.question_clauses`)."""
    option = options_of(settings)
    forms = [
        statement_form(said or query) if option.get("statement_weight") else None,
        unnamed_guess(query) if option.get("unnamed_weight") else None,
        *(clauses(said or query) if option.get("clause_weight") else []),
    ]
    return list(dict.fromkeys(form for form in forms if form and form != query))

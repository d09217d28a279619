"""Benchmark harnesses (LoCoMo, LongMemEval: recall, and answers asked through ``Bot.turn``)
and where the public evaluation data lives."""

from membot.eval.answers import evaluate_answers, locomo_groups, longmemeval_groups
from membot.eval.data import shared_data_dir
from membot.eval.harness import write_report
from membot.eval.locomo import evaluate_locomo
from membot.eval.longmemeval import evaluate_longmemeval
from membot.recall.chat import strategy_names

__all__ = [
    "STRATEGIES",
    "evaluate_answers",
    "evaluate_locomo",
    "evaluate_longmemeval",
    "locomo_groups",
    "longmemeval_groups",
    "shared_data_dir",
    "strategy_names",
    "write_report",
]

# The strategies registered when the harnesses were imported (membot's own among them).
STRATEGIES = strategy_names()

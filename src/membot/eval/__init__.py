"""Benchmark harnesses (LoCoMo, LongMemEval) and where the public evaluation data lives."""

from membot.eval.data import shared_data_dir
from membot.eval.harness import write_report
from membot.eval.locomo import evaluate_locomo
from membot.eval.longmemeval import evaluate_longmemeval
from membot.recall.chat import strategy_names

__all__ = [
    "STRATEGIES",
    "evaluate_locomo",
    "evaluate_longmemeval",
    "shared_data_dir",
    "strategy_names",
    "write_report",
]

# The strategies registered when the harnesses were imported (membot's own among them).
STRATEGIES = strategy_names()

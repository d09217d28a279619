"""Benchmark support: where the public evaluation data lives."""

from membot.eval.data import shared_data_dir

__all__ = ["shared_data_dir"]

"""Recall strategies. ``lines`` (uncany-membot) is the core's default."""

from membot.recall.lines import (
    Hit,
    blocks_for_hits,
    expand_neighbors,
    merge_blocks,
    push_to_buffer,
)

__all__ = ["Hit", "blocks_for_hits", "expand_neighbors", "merge_blocks", "push_to_buffer"]

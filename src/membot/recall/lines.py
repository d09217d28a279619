"""The default recall strategy, after uncany-membot: match lines, expand, merge, buffer.

1. The newest line is matched against every earlier line in scope (the recent window of the
   current thread excluded: it is in the prompt already).
2. Matches scoring at least ``threshold`` are kept, at most ``max_matches``.
3. Each match grows into a block of ``expand_before`` lines before and ``expand_after`` lines
   after it, in its own thread, found by ``seq``.
4. Blocks of one thread that overlap or touch are merged.
5. The blocks enter the thread's relevance buffer (first in, first out, ``buffer_size``
   entries, persisted), so a recalled block stays in the prompt for later turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from membot.config import BotSettings
from membot.store.base import BufferEntry


@dataclass(frozen=True)
class Hit:
    """A matching line, located in its thread; ``duplicates``: how many near-duplicates of
    it recall collapsed into it (:mod:`membot.recall.duplicates`)."""

    line_id: int
    thread_id: int
    seq: int
    score: float
    duplicates: int = 0


def expand_neighbors(hit: Hit, before: int, after: int) -> BufferEntry:
    """The seq range around a hit; seqs below 1 or past the thread's end simply find no line."""
    return BufferEntry(
        source_thread_id=hit.thread_id,
        first_seq=max(1, hit.seq - before),
        last_seq=hit.seq + after,
        score=hit.score,
        matched_seqs=(hit.seq,),
    )


def _touches(a: BufferEntry, b: BufferEntry) -> bool:
    return (
        a.source_thread_id == b.source_thread_id
        and a.first_seq <= b.last_seq + 1
        and b.first_seq <= a.last_seq + 1
    )


def _union(a: BufferEntry, b: BufferEntry) -> BufferEntry:
    return BufferEntry(
        source_thread_id=a.source_thread_id,
        first_seq=min(a.first_seq, b.first_seq),
        last_seq=max(a.last_seq, b.last_seq),
        score=max(a.score, b.score),
        matched_seqs=tuple(sorted(set(a.matched_seqs) | set(b.matched_seqs))),
    )


def merge_blocks(blocks: Sequence[BufferEntry]) -> list[BufferEntry]:
    """Merge blocks of one thread that overlap or touch; best score first."""
    merged: list[BufferEntry] = []
    for block in sorted(blocks, key=lambda b: (b.source_thread_id, b.first_seq)):
        if merged and _touches(merged[-1], block):
            merged[-1] = _union(merged[-1], block)
        else:
            merged.append(block)
    return sorted(merged, key=lambda b: -b.score)


def push_to_buffer(
    buffer: Sequence[BufferEntry], fresh: Sequence[BufferEntry], size: int
) -> list[BufferEntry]:
    """Add fresh blocks as the newest entries; the oldest fall out past ``size``.

    A fresh block that overlaps an entry already held absorbs it, and the merged block
    moves to the newest end: it was just confirmed relevant again.
    """
    entries = list(buffer)
    for block in reversed(list(fresh)):  # the best block ends up newest
        absorbed = block
        kept: list[BufferEntry] = []
        for entry in entries:
            if _touches(entry, absorbed):
                absorbed = _union(entry, absorbed)
            else:
                kept.append(entry)
        entries = [*kept, absorbed]
    return entries[-size:] if size > 0 else []


def blocks_for_hits(hits: Sequence[Hit], settings: BotSettings) -> list[BufferEntry]:
    """Steps 3 and 4: expansion of every hit, then merging."""
    expanded = [expand_neighbors(h, settings.expand_before, settings.expand_after) for h in hits]
    return merge_blocks(expanded)

"""What forgetting a person's threads must reach beyond the store's rows: the texts whose
vectors the embedding cache holds, and what this process keeps in memory.

A vector can be turned back into text, so the cache's vectors of a forgotten line go with it:
the line as it was embedded, each summary and its key points, and the units the ``pairs``
and ``windows`` strategies embed (a line joined with its neighbours). Units never cross
threads, and forgetting removes whole threads, so they are cut again here from the forgotten
lines alone, for every window size the store's bots use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from membot.embed import CachedEmbedder
from membot.index.vectors import VectorIndex
from membot.model import Line, Role, Summary
from membot.recall.chat import forget_cached_units, unit_kinds
from membot.recall.layout import Layout, StoredLine

if TYPE_CHECKING:
    from membot.memory.facade import Memory


def derived_texts(memory: Memory, lines: Sequence[Line], summaries: Sequence[Summary]) -> list[str]:
    """Every text the embedder may have been given for these lines and summaries."""
    from membot.memory.facade import embedding_text
    from membot.memory.knowledge import summary_parts, summary_points

    # A line is embedded as "Speaker: text"; a turn may embed its text alone as the query.
    texts = [embedding_text(line.text, line.speaker) for line in lines]
    texts += [line.text for line in lines]
    for summary in summaries:
        texts += summary_parts(summary.text)
        texts += summary_points(summary.text)  # embedded as written, dated, before 2026-11-26
    threads: dict[tuple[str, str, str], int] = {}
    stored = []
    for line in lines:
        thread_id = threads.setdefault((line.bot, line.person, line.thread), len(threads) + 1)
        role = Role(line.role)
        stored.append(StoredLine(line.id, thread_id, line.seq, role, line.text, line.speaker))
    layout = Layout(stored)
    windows = {(s.window_size, s.window_overlap) for s in map(memory.bot_settings, memory.bots())}
    for kind in unit_kinds(windows | {(8, 2)}):
        texts += [kind.text(unit) for unit in kind.units(layout)]
    return list(dict.fromkeys(texts))


def drop_cached_text(memory: Memory) -> None:
    """Drop what this process holds of the store in memory (vectors by scope, the lines and
    units of the strategies by scope): it is read again, without what was forgotten, when
    next needed. Other processes drop theirs when they next search (the store's generation).
    An approximate graph of a bot whose lines went takes them out, here now and in other
    processes at their next search, and is replaced by a fresh one built beside. The
    approximate indexes saved beside a SQLite store go last, by
    :func:`membot.index.approximate.drop_saved_indexes`: a file that cannot be removed is an error
    to
    report once everything else is dropped."""
    held = memory.index
    memory.index = VectorIndex(memory.store, held.budget_bytes)
    memory.index.approximate = held.approximate
    held.approximate.take_out_removed()
    forget_cached_units(memory)


def drop_removed(memory: Memory, texts: Sequence[str]) -> None:
    """After lines were removed from the store: drop what this process holds of the store
    (:func:`drop_cached_text`) and the cached embeddings of ``texts``; the approximate indexes
    saved beside a SQLite store go last, whatever failed before (a file that cannot be
    removed is reported)."""
    from membot.index.approximate import drop_saved_indexes

    try:
        with memory._recall_lock:
            drop_cached_text(memory)
        if isinstance(memory.embedder, CachedEmbedder):
            memory.embedder.discard(texts)
    finally:
        drop_saved_indexes(memory.store)

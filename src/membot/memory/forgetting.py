"""What forgetting a person's threads (or one line) must reach beyond the store's rows: the
texts whose vectors the embedding cache holds, and what this process keeps in memory.

A vector can be turned back into text, so the cache's vectors of a forgotten line go with it:
the line as it was embedded and its parts, each summary and its key points, and the units
the ``pairs`` and ``windows`` strategies embed (a line joined with its neighbours). Units
never cross threads, and forgetting removes whole threads, so they are cut again here from
the forgotten lines alone, for every window size the store's bots use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from membot.embed import CachedEmbedder, Embedder
from membot.index.source import IndexedLines
from membot.memory.knowledge import summary_parts, summary_points
from membot.memory.line_parts import part_spans, part_texts
from membot.model import Line, Role, Summary, embedding_text
from membot.recall.layout import Layout, StoredLine
from membot.recall.units import unit_kinds
from membot.store.approximate import drop_saved_indexes

# The window a bot that never set one cuts (BotSettings' window_size, window_overlap).
DEFAULT_WINDOW = (8, 2)


def derived_texts(
    lines: Sequence[Line], summaries: Sequence[Summary], windows: Iterable[tuple[int, int]]
) -> list[str]:
    """Every text the embedder may have been given for these lines and summaries; their
    ``windows`` units are cut for each (size, overlap), those of the store's bots."""
    # A line is embedded as "Speaker: text"; a turn may embed its text alone as the query.
    texts = [embedding_text(line.text, line.speaker) for line in lines]
    texts += [line.text for line in lines]
    for line in lines:  # its parts, each embedded as "Speaker: part"
        texts += part_texts(line.text, line.speaker, part_spans(line.text))
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
    for kind in unit_kinds({*windows, DEFAULT_WINDOW}):
        texts += [kind.text(unit) for unit in kind.units(layout)]
    return list(dict.fromkeys(texts))


def line_texts(line: Line, thread: Sequence[Line], windows: Iterable[tuple[int, int]]) -> list[str]:
    """Every text the embedder may have been given for one ``line`` of ``thread`` (that
    thread's lines): its own and its parts', and the ``pairs`` and ``windows`` units of the
    thread that hold it (with its neighbours)."""
    units = [text for text in derived_texts(thread, [], windows) if line.text in text]
    return list(dict.fromkeys(derived_texts([line], [], windows) + units))


def drop_removed(source: IndexedLines, embedder: Embedder, texts: Sequence[str]) -> None:
    """After lines were removed from the store: drop what this process holds of the store in
    memory (vectors by scope, the lines and units of the strategies by scope: read again,
    without what was forgotten, when next needed; other processes drop theirs when they next
    search, by the store's generation; an approximate graph of a bot whose lines went takes
    them out, here now and in other processes at their next search), and the cached
    embeddings of ``texts``. The approximate indexes saved beside a SQLite store go last,
    whatever failed before: a file that cannot be removed is an error to report
    (:func:`membot.store.approximate.drop_saved_indexes`)."""
    try:
        source.reset()
        if isinstance(embedder, CachedEmbedder):
            embedder.discard(texts)
    finally:
        drop_saved_indexes(source.store)

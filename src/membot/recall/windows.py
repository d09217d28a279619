"""Window embeddings (after AllegroGraph's chatState history database): overlapping windows of
dialog lines, each embedded as one transcript.

chatState embeds windows of ``windowSize`` dialog lines (default 8) that overlap their
neighbours by ``windowOverlap`` lines (default 2). Here each thread's lines, in seq order, are
cut into windows of ``size`` lines starting every ``size - overlap`` lines (the last window may
be shorter; a thread shorter than ``size`` is one window). A window's text is its lines'
``Speaker: text`` (the text alone without a speaker), one per line. The window vectors
are built from the stored lines, like ``pairs`` (see :mod:`membot.recall.pairs`).

Parameters: ``size`` (default 8) and ``overlap`` (default 2, less than ``size``).
"""

from __future__ import annotations

from membot.recall.layout import Layout
from membot.recall.pairs import Unit, Units


def windows_of(layout: Layout, size: int, overlap: int) -> list[Unit]:
    """Each thread's windows of ``size`` lines, ``overlap`` lines shared by neighbours."""
    step = size - overlap
    units: list[Unit] = []
    for lines in layout.threads().values():
        start = 0
        while True:
            units.append(tuple(lines[start : start + size]))
            if start + size >= len(lines):
                break
            start += step
    return units


class WindowUnits(Units):
    """Overlapping windows of ``size`` lines (``overlap`` shared), matched as transcripts."""

    name = "windows"
    separator = "\n"

    def __init__(self, size: int = 8, overlap: int = 2) -> None:
        if size < 1 or not 0 <= overlap < size:
            raise ValueError(f"need 0 <= overlap < size, not size {size}, overlap {overlap}")
        super().__init__()
        self.size = size
        self.overlap = overlap

    def units(self, layout: Layout) -> list[Unit]:
        return windows_of(layout, self.size, self.overlap)

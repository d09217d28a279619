"""Pair embeddings (after JetChat's "infinite chat"): a line is searched by the vector of its
whole exchange, the human line and the bot's reply to it.

JetChat concatenates each user query with the model's response and embeds the two together, so
a later question meets the exchange where either half matches. Here a human line is paired
with the bot line right after it (seq + 1, same thread), a bot line with the human line right
before it; a line without such a partner stands alone. Each unit's text is its lines'
``Speaker: text`` (the text alone without a speaker) joined by a space, as JetChat joins them.
A matched pair places both its lines, in seq order; units are placed by score.

The pair vectors are built from the stored lines, once per state of the store, through
``Memory.embed`` (the embedder's cache included) and kept with the Memory; the per-line
vectors still decide which lines are in scope. A turn's recall (:mod:`membot.recall.chat`)
matches the query against them.

Parameters: none.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from membot.recall.layout import Layout, StoredLine, layout_of, store_key

if TYPE_CHECKING:
    from membot.memory import Memory

Unit = tuple[StoredLine, ...]


class Units:
    """Lines grouped into units, each unit searched by the vector of its joined text.

    Subclasses say how a store's lines form units (``units``) and how a unit reads (``text``).
    """

    name = "units"
    separator = " "

    def __init__(self) -> None:
        self._cache: weakref.WeakKeyDictionary[Memory, _EmbeddedUnits] = weakref.WeakKeyDictionary()

    def units(self, layout: Layout) -> list[Unit]:
        raise NotImplementedError

    def forget(self, memory: Memory) -> None:
        """Drop the units and vectors kept for ``memory``."""
        self._cache.pop(memory, None)

    def text(self, unit: Unit) -> str:
        return self.separator.join(line.labelled for line in unit)

    def embedded_units(
        self, memory: Memory, defer: tuple[int, int] | None = None
    ) -> tuple[list[Unit], np.ndarray]:
        """The store's units and their vectors, built once per state of the store. A unit
        whose text was embedded for the state before keeps its vector: a new line embeds
        only the units it changed, not every unit again.

        ``defer`` = (thread id, seq): the units holding a line of that thread from that seq on
        are not embedded yet, their rows zeros until a call that does not defer them. A chat
        turn defers the units of its feed, which it skips anyway, so the thread's growing last
        unit is embedded once it leaves the feed, not at every turn."""
        key = store_key(memory)
        cached = self._cache.get(memory)
        if cached is None or cached.key != key:
            # Vectors of an earlier state hold only while no line was re-embedded or removed.
            known = cached.known if cached is not None and cached.key[0] == key[0] else {}
            cached = _EmbeddedUnits(key, self.units(layout_of(memory)), self.text, known)
            self._cache[memory] = cached
        cached.embed_missing(memory, defer)
        return cached.units, cached.vectors


class _EmbeddedUnits:
    """One store state's units, their texts and vectors (zero rows: not embedded yet), and
    the vectors of those texts embedded so far."""

    def __init__(
        self,
        key: tuple[int, int],
        units: list[Unit],
        text_of: Callable[[Unit], str],
        known: dict[str, np.ndarray],
    ) -> None:
        self.key = key
        self.units = units
        self.texts = [text_of(unit) for unit in units]
        self.known = {text: known[text] for text in self.texts if text in known}
        self.threads: dict[int, range] = {}  # each thread's units (they come thread by thread)
        start = 0
        for index in range(1, len(units) + 1):
            if index == len(units) or units[index][0].thread_id != units[start][0].thread_id:
                self.threads[units[start][0].thread_id] = range(start, index)
                start = index
        self.vectors = np.zeros((0, 0), np.float32)
        self.missing: set[int] = set(range(len(units)))

    def embed_missing(self, memory: Memory, defer: tuple[int, int] | None) -> None:
        """Embed the units not embedded yet, but those ``defer`` names."""
        wanted = self.missing
        if defer is not None:
            thread_id, first_seq = defer
            wanted = wanted - {
                index
                for index in self.threads.get(thread_id, ())
                if self.units[index][-1].seq >= first_seq
            }
        if not wanted:
            return
        rows = sorted(wanted)
        texts = list(dict.fromkeys(self.texts[index] for index in rows))
        new = [text for text in texts if text not in self.known]
        if new:
            vectors = np.asarray(memory.embed(new), np.float32)
            self.known = self.known | dict(zip(new, vectors, strict=True))
        if len(self.vectors) != len(self.units):
            width = len(self.known[texts[0]])
            self.vectors = np.zeros((len(self.units), width), np.float32)
        self.vectors[rows] = np.stack([self.known[self.texts[index]] for index in rows])
        self.missing -= wanted


def turn_pairs(layout: Layout) -> list[Unit]:
    """Each human line with the bot line right after it; every other line alone."""
    units: list[Unit] = []
    for lines in layout.threads().values():
        paired: set[int] = set()
        for line in lines:
            if line.id in paired:
                continue
            partner = layout.partner(line)
            if partner is not None and partner.seq > line.seq:
                units.append((line, partner))
                paired.add(partner.id)
            else:
                units.append((line,))
    return units


class PairUnits(Units):
    """Each line searched by the vector of its human/bot exchange; a match places both."""

    name = "pairs"

    def units(self, layout: Layout) -> list[Unit]:
        return turn_pairs(layout)

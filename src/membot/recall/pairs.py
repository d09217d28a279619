"""Pair embeddings (after JetChat's "infinite chat"): a line is searched by the vector of its
whole exchange, the human line and the bot's reply to it.

JetChat concatenates each user query with the model's response and embeds the two together, so
a later question meets the exchange where either half matches. Here a human line is paired
with the bot line right after it (seq + 1, same thread), a bot line with the human line right
before it; a line without such a partner stands alone. Each unit's text is its lines'
``Speaker: text`` (the text alone without a speaker) joined by a space, as JetChat joins them.
A matched pair places both its lines, in seq order; units are placed by score.

The pair vectors are built from the lines of the turn's scope (a person's lines with the
bot, or a shared bot's lines), once per state of the scope, through the recall source's
``embed`` (the embedder's cache included) and kept by the source (:class:`UnitCache`); the
per-line vectors still decide which lines are in scope. A turn's recall
(:mod:`membot.recall.units`) matches the query against them.

Parameters: none.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from membot.index.vectors import drop_least_recent
from membot.recall.layout import Layout, ScopeLines, StoredLine
from membot.store.base import VectorSearch

Unit = tuple[StoredLine, ...]
# (bot id, the person ids of a person and those linked with them, or None for a bot that
# shares memory)
ScopeKey = tuple[int, tuple[int, ...] | None]

# Units of the scopes asked last, kept per kind up to this many bytes of vectors (least
# recently used scopes dropped first): about 85,000 MiniLM units, each vector held twice (in
# the matrix, and by its text for the scope's next state).
UNITS_BUDGET_BYTES = 256 * 1024 * 1024
# Every kind of unit this process has cut (by key), whichever source cut it: forgetting
# drops the cached embeddings of the forgotten lines' units of each.
KINDS_CUT: dict[tuple[str, int, int], Units] = {}


class Units:
    """Lines grouped into units, each unit searched by the vector of its joined text.

    Subclasses say how a scope's lines form units (``units``) and how a unit reads
    (``text``); a :class:`UnitCache` keeps one kind's units and vectors by scope.
    """

    name = "units"
    separator = " "

    @property
    def key(self) -> tuple[str, int, int]:
        """What tells kinds apart: the name, and a window's size and overlap."""
        return (self.name, getattr(self, "size", 0), getattr(self, "overlap", 0))

    def units(self, layout: Layout) -> list[Unit]:
        raise NotImplementedError

    def text(self, unit: Unit) -> str:
        return self.separator.join(line.labelled for line in unit)


class UnitCache:
    """One kind's units of the scopes asked last and their vectors, cut again when lines
    came and kept while none did (least recently used scopes dropped past
    ``budget_bytes``)."""

    def __init__(self, kind: Units, budget_bytes: int = UNITS_BUDGET_BYTES) -> None:
        self.kind = kind
        KINDS_CUT.setdefault(kind.key, kind)
        self.budget_bytes = budget_bytes
        self._scopes: OrderedDict[ScopeKey, _ScopeUnits] = OrderedDict()
        self._lock = threading.Lock()  # the cache's dictionary, not the embedding

    def held_texts(self) -> list[str]:
        """Every text kept: the scopes' lines and their units' texts."""
        with self._lock:
            held = list(self._scopes.values())
        texts: list[str] = []
        for scope in held:
            texts += [line.text for line in scope.lines.by_id.values()]
            if scope.embedded is not None:
                texts += [*scope.embedded.texts, *scope.embedded.known]
        return texts

    def embedded_units(
        self,
        store: VectorSearch,
        embed: Callable[[list[str]], np.ndarray],
        bot_id: int,
        person_ids: tuple[int, ...] | None,
        defer: tuple[int, int] | None = None,
    ) -> tuple[list[Unit], np.ndarray]:
        """The units of one scope's lines (a person's with the bot, and those linked with
        them; ``person_ids`` None: all the bot's) and their vectors, cut again when lines
        came and kept while none did. A unit whose text was embedded before keeps its vector:
        a new line embeds only the units it changed, not every unit again.

        ``defer`` = (thread id, seq): the units holding a line of that thread from that seq on
        are not embedded yet, their rows zeros until a call that does not defer them. A chat
        turn defers the units of its feed, which it skips anyway, so the thread's growing last
        unit is embedded once it leaves the feed, not at every turn."""
        scope = self._scope((bot_id, person_ids))
        moved, grew = scope.lines.update(store)
        if moved or grew or scope.embedded is None:
            # Vectors of an earlier state hold only while no line was re-embedded or removed.
            known = scope.embedded.known if scope.embedded is not None and not moved else {}
            units = self.kind.units(scope.lines.layout())
            scope.embedded = _EmbeddedUnits(units, self.kind.text, known)
        scope.embedded.embed_missing(embed, defer)
        with self._lock:
            drop_least_recent(self._scopes, self.budget_bytes)
        return scope.embedded.units, scope.embedded.vectors

    def _scope(self, key: ScopeKey) -> _ScopeUnits:
        """The scope's kept units (new if none), now the most recently used."""
        with self._lock:
            scope = self._scopes.pop(key, None) or _ScopeUnits(ScopeLines(*key))
            self._scopes[key] = scope
            return scope


class _ScopeUnits:
    """One scope's lines, and the units cut from them with their vectors."""

    def __init__(self, lines: ScopeLines) -> None:
        self.lines = lines
        self.embedded: _EmbeddedUnits | None = None

    @property
    def nbytes(self) -> int:
        return self.embedded.nbytes if self.embedded is not None else 0


class _EmbeddedUnits:
    """One state's units, their texts and vectors (zero rows: not embedded yet), and the
    vectors of those texts embedded so far."""

    def __init__(
        self, units: list[Unit], text_of: Callable[[Unit], str], known: dict[str, np.ndarray]
    ) -> None:
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

    @property
    def nbytes(self) -> int:
        row = next(iter(self.known.values())).nbytes if self.known else 0
        return self.vectors.nbytes + len(self.known) * row

    def embed_missing(
        self, embed: Callable[[list[str]], np.ndarray], defer: tuple[int, int] | None
    ) -> None:
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
            vectors = np.asarray(embed(new), np.float32)
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

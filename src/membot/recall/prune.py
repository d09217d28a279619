"""Context pruning (after "context pruning pipeline for long-running agents"): the lines most
similar to the query, each brought in with its turn partner.

The article embeds every past message on its own, keeps the ``top_k`` most similar to the
current prompt and notes that these are single messages, not turns. Here each matched line is
followed by its turn partner: for a human line the bot line right after it (seq + 1, same
thread), for a bot line the human line right before it (seq - 1). Lines are placed by their
match score, a partner right after its match; a line whose partner is not a line of the other
role (or is out of scope) comes alone.

Parameters: ``top_k`` (default None: every match) is how many matches bring their partner in;
the matches past it follow alone in match order. The benchmark harness cuts the ranking at k.
Lines are searched by their own text.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from membot.model import Role
from membot.recall.ranking import dense_hits
from membot.search import Scope

if TYPE_CHECKING:
    from membot.memory import LineInput, Memory

_CHUNK = 500  # line ids per store query


@dataclass(frozen=True)
class StoredLine:
    """What the strategies here need of a stored line."""

    id: int
    thread_id: int
    seq: int
    role: Role
    text: str
    speaker: str | None

    @property
    def labelled(self) -> str:
        """``Speaker: text`` when a speaker is known, else the text."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


class Layout:
    """Every stored line by id and by (thread id, seq)."""

    def __init__(self, lines: list[StoredLine]) -> None:
        self.by_id = {line.id: line for line in lines}
        self.at = {(line.thread_id, line.seq): line for line in lines}

    def partner(self, line: StoredLine) -> StoredLine | None:
        """The bot line right after a human line, or the human line right before a bot line."""
        if line.role == Role.HUMAN:
            other = self.at.get((line.thread_id, line.seq + 1))
            return other if other is not None and other.role == Role.BOT else None
        if line.role == Role.BOT:
            other = self.at.get((line.thread_id, line.seq - 1))
            return other if other is not None and other.role == Role.HUMAN else None
        return None

    def threads(self) -> dict[int, list[StoredLine]]:
        """Each thread's lines in seq order."""
        threads: dict[int, list[StoredLine]] = {}
        for line in sorted(self.by_id.values(), key=lambda line: (line.thread_id, line.seq)):
            threads.setdefault(line.thread_id, []).append(line)
        return threads


_layouts: weakref.WeakKeyDictionary[Memory, tuple[tuple[int, int], Layout]] = (
    weakref.WeakKeyDictionary()
)


def store_key(memory: Memory) -> tuple[int, int]:
    """Changes whenever lines are added, removed or re-embedded."""
    return memory.store.generation(), memory.store.count_lines()


def layout_of(memory: Memory) -> Layout:
    """The store's lines, read once per state of the store and kept with the Memory. While no
    line was removed or re-embedded, a new state reads only the lines added since."""
    key = store_key(memory)
    cached = _layouts.get(memory)
    if cached is not None and cached[0] == key:
        return cached[1]
    memory.index.refresh()
    known = cached[1].by_id if cached is not None and cached[0][0] == key[0] else {}
    after = max(known, default=0)
    ids = [line_id for line_id, _ in memory.store.all_line_texts() if line_id > after]
    lines = list(known.values())
    for start in range(0, len(ids), _CHUNK):
        for line in memory.store.lines(ids[start : start + _CHUNK]):
            position = memory.index.position_of(line.id)
            if position is not None:
                role = Role(line.role)
                lines.append(StoredLine(line.id, *position, role, line.text, line.speaker))
    layout = Layout(lines)
    _layouts[memory] = (key, layout)
    return layout


class PruneRanking:
    """Dense match over single lines; each of the first ``top_k`` matches (None: all) is
    followed by its turn partner."""

    name = "prune"

    def __init__(self, top_k: int | None = None) -> None:
        self.top_k = top_k

    def index_text(self, item: LineInput) -> str:
        return item.text

    def rank(
        self,
        memory: Memory,
        query: str,
        scope: Scope,
        depth: int | None = None,
        now: datetime | None = None,
    ) -> list[int]:
        hits = dense_hits(memory, query, scope)
        in_scope = {hit.line_id for hit in hits}
        layout = layout_of(memory)
        placed: dict[int, None] = {}
        for number, hit in enumerate(hits):
            placed.setdefault(hit.line_id)
            line = layout.by_id.get(hit.line_id)
            if line is None or (self.top_k is not None and number >= self.top_k):
                continue
            partner = layout.partner(line)
            if partner is not None and partner.id in in_scope:
                placed.setdefault(partner.id)
        return list(placed)

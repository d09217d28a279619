"""Every stored line's thread, seq, role and speaker, read once per state of the store: the
units of the ``pairs`` and ``windows`` strategies are cut from it (``prune``'s turn partner
follows the same rule, :meth:`Layout.partner`, read from the store around each match)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from membot.model import Role
from membot.store.base import StoredLine

if TYPE_CHECKING:
    from membot.memory import Memory

_CHUNK = 500  # line ids per store query


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


def forget_layout(memory: Memory) -> None:
    """Drop the lines kept for ``memory`` (after some were forgotten)."""
    _layouts.pop(memory, None)


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

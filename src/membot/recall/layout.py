"""A scope's lines with their thread, seq, role and speaker: the units of the ``pairs`` and
``windows`` strategies are cut from them (``prune``'s turn partner follows the same rule,
:meth:`Layout.partner`, read from the store around each match)."""

from __future__ import annotations

from membot.model import Role
from membot.store.base import StoredLine, VectorSearch

__all__ = ["Layout", "ScopeLines", "StoredLine"]


class Layout:
    """Lines by id and by (thread id, seq)."""

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


class ScopeLines:
    """One scope's lines -- a person's with a bot (with those linked with them: ``person_ids``),
    or (``person_ids`` None) every line of a bot
    that shares memory -- read from the store when first asked for, then brought up to date
    with the lines written since (one indexed query from the store's cursor); read again
    whole when lines were removed or re-embedded (the store's generation moved). A turn
    reads what its scope holds, not what the store holds."""

    def __init__(self, bot_id: int, person_ids: tuple[int, ...] | None) -> None:
        self.bot_id = bot_id
        self.person_ids = person_ids
        self.generation: int | None = None
        self.cursor = 0
        self.by_id: dict[int, StoredLine] = {}

    def update(self, store: VectorSearch) -> tuple[bool, bool]:
        """Read the lines written since the last look: (whether the generation moved, so
        that everything derived from the lines before is stale; whether any line is new)."""
        snapshot = store.scope_line_snapshot(
            self.bot_id, self.person_ids, self.generation, self.cursor
        )
        moved = snapshot.generation != self.generation
        held = {} if moved else self.by_id
        new = {line.id: line for line in snapshot.lines if line.id not in held}
        if moved or new:
            # A new dictionary, not the held one changed: a turn of the same scope on another
            # thread may be reading it.
            self.by_id = held | new
        self.generation, self.cursor = snapshot.generation, snapshot.cursor
        return moved, bool(new)

    def layout(self) -> Layout:
        return Layout(list(self.by_id.values()))

"""The MCP tools of a person's own view of their memory (:mod:`membot.memory.person_view`):
``my_memory`` lists (or searches) what is kept about the person, with the ids the other two
take; ``forget_line`` deletes one line; ``correct_memory`` corrects or deletes one kept key
point. A change is made only by a call with ``confirm: true``: without it the call answers
what would change (``done: false``), for the person to agree to.

Whom a call acts as is decided as for every tool (:func:`membot.server.mcp.person_for`); a
line or point of anyone else is "not found", as for an id that never was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from membot import KeyPoint, Line, iso
from membot.server.mcp_arguments import BotArgument, UserArgument
from membot.server.service import MAX_LINE_CHARS, Service

Confirm = Annotated[
    bool,
    Field(description="true: the person agreed to this change; false (the default): only "
                      "say what would change."),
]  # fmt: skip
Id = Annotated[int, Field(ge=1, le=2**63 - 1)]


class Acting(Protocol):
    """The person a call acts as (:class:`membot.server.mcp.Person`)."""

    @property
    def bot(self) -> str: ...
    @property
    def user(self) -> str: ...


class MemoryLine(BaseModel):
    id: int
    thread: str
    seq: int
    role: str
    text: str
    created_at: str

    @classmethod
    def of(cls, line: Line) -> MemoryLine:
        return cls(id=line.id, thread=line.thread, seq=line.seq, role=str(line.role),
                   text=line.text, created_at=iso(line.created_at))  # fmt: skip


class MemoryPoint(BaseModel):
    summary_id: int
    number: int
    text: str
    thread: str
    kept_at: str
    corrections: list[dict[str, Any]]

    @classmethod
    def of(cls, point: KeyPoint) -> MemoryPoint:
        return cls(summary_id=point.summary_id, number=point.number, text=point.text,
                   thread=point.thread, kept_at=iso(point.kept_at),
                   corrections=[c.to_json() for c in point.corrections])  # fmt: skip


class PersonMemoryView(BaseModel):
    bot: str
    user: str
    query: str | None
    lines: list[MemoryLine]
    key_points: list[MemoryPoint]


class LineChange(BaseModel):
    bot: str
    user: str
    done: bool = Field(description="false: nothing changed yet; call again with confirm: true")
    forgets: MemoryLine


class PointChange(BaseModel):
    bot: str
    user: str
    done: bool = Field(description="false: nothing changed yet; call again with confirm: true")
    before: MemoryPoint
    after: str | None = Field(description="the point as it will read; null: deleted")


class PersonMemoryTools:
    """The three tools over one :class:`Service`; ``person`` decides whom a call acts as."""

    def __init__(self, service: Service, person: Callable[[str | None, str | None], Acting]):
        self.service = service
        self.person = person

    def my_memory(
        self,
        query: Annotated[str | None, Field(max_length=MAX_LINE_CHARS)] = None,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> PersonMemoryView:
        """Everything kept about the person: their lines (by thread, in order) and the key
        points kept when threads ended, with dates and corrections; with ``query``, only what
        holds it. The ids are those ``forget_line`` and ``correct_memory`` take."""
        person = self.person(bot, user)
        seen = self.service.memory.person_memory(user=person.user, bot=person.bot, query=query)
        lines = [MemoryLine.of(line) for thread in seen.threads for line in thread.lines]
        points = [MemoryPoint.of(point) for point in seen.key_points]
        return PersonMemoryView(bot=person.bot, user=person.user, query=seen.query,
                                lines=lines, key_points=points)  # fmt: skip

    def forget_line(
        self, line_id: Id, confirm: Confirm = False, user: UserArgument = None,
        bot: BotArgument = None,
    ) -> LineChange:  # fmt: skip
        """Delete one line of the person for good (from search, recall and every index).
        Without confirm: true, only says which line it would delete."""
        person = self.person(bot, user)
        memory = self.service.memory
        if confirm is not True:
            line = memory.person_line(line_id, user=person.user, bot=person.bot)
        else:
            line = memory.forget_line(line_id, user=person.user, bot=person.bot)
        return LineChange(bot=person.bot, user=person.user, done=confirm is True,
                          forgets=MemoryLine.of(line))  # fmt: skip

    def correct_memory(
        self,
        summary_id: Id,
        number: Annotated[int, Field(ge=0, le=10_000)],
        text: Annotated[str | None, Field(max_length=2000)] = None,
        forget: bool = False,
        confirm: Confirm = False,
        user: UserArgument = None,
        bot: BotArgument = None,
    ) -> PointChange:
        """Correct a kept key point to ``text`` (the old text is kept as its history; the
        next turn recalls the new one), or with ``forget: true`` delete it. Without
        confirm: true, only says what would change."""
        person = self.person(bot, user)
        if forget == bool(text and text.strip()):
            raise ToolError("give either `text` (the point as it should read) or forget: true")
        memory = self.service.memory
        point = memory.key_point(summary_id, number, user=person.user, bot=person.bot)
        after = None if forget else " ".join((text or "").split())
        if confirm is True and forget:
            memory.forget_key_point(summary_id, number, user=person.user, bot=person.bot)
        elif confirm is True and after is not None:
            memory.correct_key_point(summary_id, number, after, user=person.user, bot=person.bot)
        return PointChange(bot=person.bot, user=person.user, done=confirm is True,
                           before=MemoryPoint.of(point), after=after)  # fmt: skip

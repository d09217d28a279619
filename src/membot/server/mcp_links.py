"""The MCP tools that link a person's identities on other channels into one person of a bot
(:mod:`membot.memory.person_links`): ``link_code`` makes a code for the person the call acts
as, ``link_with_code`` enters one made elsewhere, ``linked`` lists the person's identities and
``unlink`` takes the person out of their links.

Whom a call acts as is decided as for every tool (:func:`membot.server.mcp.person_for`). The
code travels in the call's arguments and answer, which the server does not log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import BaseModel, Field

from membot import iso
from membot.server.mcp_arguments import BotArgument, UserArgument
from membot.server.mcp_memory import Acting
from membot.server.service import Service

Code = Annotated[
    str, Field(min_length=1, max_length=64, description="The code as shown: K7QF-3M9P.")
]


class NewLinkCode(BaseModel):
    bot: str
    user: str
    code: str = Field(description="Enter it on the other channel within 10 minutes; once.")
    expires_at: str


class LinkedIdentities(BaseModel):
    bot: str
    user: str
    linked: list[str] = Field(description="Every identity of the person, this one included.")


class LinkTools:
    """The link tools over one :class:`Service`; ``person`` decides whom a call acts as."""

    def __init__(self, service: Service, person: Callable[[str | None, str | None], Acting]):
        self.service = service
        self.person = person

    def link_code(self, user: UserArgument = None, bot: BotArgument = None) -> NewLinkCode:
        """A code that links another channel (the web app, the API, SMS, another MCP
        identity) with this person: enter it there within 10 minutes (`link_with_code`, the
        web app's Memory page, or a text `LINK <code>`). Show it to the person only."""
        person = self.person(bot, user)
        made = self.service.memory.link_code(user=person.user, bot=person.bot)
        return NewLinkCode(bot=person.bot, user=person.user, code=made.code,
                           expires_at=iso(made.expires_at))  # fmt: skip

    def link_with_code(
        self, code: Code, user: UserArgument = None, bot: BotArgument = None
    ) -> LinkedIdentities:
        """Enter a link code the person got on another channel: from now on both identities
        are one person, with one memory. A wrong, used or expired code is refused."""
        person = self.person(bot, user)
        linked = self.service.memory.link_with_code(code, user=person.user, bot=person.bot)
        return LinkedIdentities(bot=person.bot, user=person.user, linked=list(linked.linked))

    def linked(self, user: UserArgument = None, bot: BotArgument = None) -> LinkedIdentities:
        """Every identity linked with this person, the person included."""
        person = self.person(bot, user)
        linked = self.service.memory.linked(user=person.user, bot=person.bot)
        return LinkedIdentities(bot=person.bot, user=person.user, linked=list(linked.linked))

    def unlink(self, user: UserArgument = None, bot: BotArgument = None) -> LinkedIdentities:
        """Take this identity out of its links: from now on the other identities are
        another person (what was said before stays with whoever said it)."""
        person = self.person(bot, user)
        linked = self.service.memory.unlink(user=person.user, bot=person.bot)
        return LinkedIdentities(bot=person.bot, user=person.user, linked=list(linked.linked))

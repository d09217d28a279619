"""REST under ``/v1`` for linking a person's identities on other channels (the web app, the
API, MCP, SMS) into one person of a bot (:mod:`membot.memory.person_links`).

From a channel where they are known, the person asks for a link code; within 10 minutes they
enter it as their identity on the other channel. The code travels only in JSON bodies, never
in an address: an address is what access logs keep. A wrong, used or expired code is 400,
too many codes or wrong entries 429 with ``Retry-After``.

Scope as everywhere: a person key acts only as its own person, a bot key for any person of its
bot, an admin key for anyone.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from membot.server.auth import caller, person_of, service_of
from membot.server.errors import ApiError
from membot.service import ApiKey

router = APIRouter(prefix="/v1", tags=["links"])
Key = Annotated[ApiKey, Depends(caller)]
LINKS = "/bots/{bot}/users/{user}/links"


class CodeEntry(BaseModel):
    # Long enough for a code written with spaces or hyphens; the library reads what is left.
    code: str = Field(
        min_length=1, max_length=64, description="The link code, as shown: K7QF-3M9P."
    )


@router.post("/bots/{bot}/users/{user}/link-codes")
def new_link_code(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    """A fresh link code for this person: enter it within 10 minutes as the person's identity
    on another channel (`POST .../links`, the web app, MCP's `link_with_code`, or a text
    `LINK <code>`). Works once; at most 5 codes a person an hour."""
    user = person_of(key, bot, user)
    return service_of(request).memory.link_code(user=user, bot=bot).to_json()


@router.post(LINKS)
def link_with_code(
    bot: str, user: str, body: CodeEntry, key: Key, request: Request
) -> dict[str, Any]:
    """Link this person with the identity that asked for the code: from now on they are one
    person to the bot. Answers every identity of the person."""
    user = person_of(key, bot, user)
    return service_of(request).memory.link_with_code(body.code, user=user, bot=bot).to_json()


@router.get(LINKS)
def linked(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    """Every identity linked with this person, the person included."""
    user = person_of(key, bot, user)
    return service_of(request).memory.linked(user=user, bot=bot).to_json()


@router.delete(LINKS)
def unlink(bot: str, user: str, key: Key, request: Request) -> dict[str, Any]:
    """Take this person out of their links: from now on their other identities are other
    people again (what was said before stays with whoever said it)."""
    user = person_of(key, bot, user)
    return service_of(request).memory.unlink(user=user, bot=bot).to_json()


@router.delete(LINKS + "/{identity}")
def unlink_identity(
    bot: str, user: str, identity: str, key: Key, request: Request
) -> dict[str, Any]:
    """Take one of the person's linked identities out of their links (the person's own
    name works as ``DELETE .../links``). Answers the person's identities afterwards; an
    identity not linked with the person is 404."""
    user = person_of(key, bot, user)
    memory = service_of(request).memory
    if identity not in memory.linked(user=user, bot=bot).linked:
        raise ApiError(404, f"{identity!r} is not linked with {user!r}")
    memory.unlink(user=identity, bot=bot)
    return memory.linked(user=user, bot=bot).to_json()

"""REST under ``/v1`` for a person's own view of their memory: everything kept about them
(lines by thread, key points with their dates and corrections), searched; one line or one key
point deleted; a key point corrected (:mod:`membot.memory.person_view`).

A person key reaches only its own person; a bot key any person of its bot, an admin key any
person. A line or key point of someone else is 404, worded as for one that never existed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from membot.server.auth import caller, person_of, service_of
from membot.server.service import MAX_LINE_CHARS
from membot.service import ApiKey

router = APIRouter(prefix="/v1")
Key = Annotated[ApiKey, Depends(caller)]
PERSON = "/bots/{bot}/users/{user}"


class PointCorrection(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="The key point as it should read.")


@router.get(PERSON + "/memory", tags=["memory"])
def person_memory(
    bot: str,
    user: str,
    key: Key,
    request: Request,
    q: Annotated[str | None, Query(max_length=MAX_LINE_CHARS)] = None,
) -> dict[str, Any]:
    """Everything kept about the person with this bot: lines by thread, key points with
    their dates and corrections; with ``q``, only what holds it (any case)."""
    user = person_of(key, bot, user)
    return service_of(request).memory.person_memory(user=user, bot=bot, query=q).to_json()


@router.delete(PERSON + "/lines/{line_id}", tags=["memory"])
def forget_line(bot: str, user: str, line_id: int, key: Key, request: Request) -> dict[str, Any]:
    """Delete one line of the person: from the store, the full-text index, every vector index
    and the embedding cache at once. Answers the line as it was."""
    user = person_of(key, bot, user)
    line = service_of(request).memory.forget_line(line_id, user=user, bot=bot)
    return {"forgotten": line.to_json(), "thread": line.thread}


@router.delete(PERSON + "/key-points/{summary_id}/{number}", tags=["memory"])
def forget_key_point(
    bot: str, user: str, summary_id: int, number: int, key: Key, request: Request
) -> dict[str, Any]:
    """Delete one key point kept about the person, with its history."""
    user = person_of(key, bot, user)
    point = service_of(request).memory.forget_key_point(summary_id, number, user=user, bot=bot)
    return {"forgotten": point.to_json()}


@router.put(PERSON + "/key-points/{summary_id}/{number}", tags=["memory"])
def correct_key_point(
    bot: str,
    user: str,
    summary_id: int,
    number: int,
    body: PointCorrection,
    key: Key,
    request: Request,
) -> dict[str, Any]:
    """Correct one key point: the new text is used from the next turn, the old one kept as
    the point's history."""
    user = person_of(key, bot, user)
    memory = service_of(request).memory
    point = memory.correct_key_point(summary_id, number, body.text, user=user, bot=bot)
    return {"corrected": point.to_json()}

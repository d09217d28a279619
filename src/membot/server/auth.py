"""Who is asking: the request's ``Authorization: Bearer KEY``, and what that key may do.

An admin key does everything; a bot key acts for any person of its bot; a person key only as
its own person of its bot. A key outside its scope learns nothing: another bot is "not found",
another person "forbidden", and no answer holds another person's text.
"""

from __future__ import annotations

from fastapi import Request

from membot.server.errors import ApiError
from membot.server.service import Service
from membot.service import ApiKey, authenticate


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service  # set by create_app
    return service


def bearer_token(request: Request) -> str | None:
    """The key of ``Authorization: Bearer KEY``; None when the header is missing or of
    another kind (``authenticate`` then says how to send one)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def caller(request: Request) -> ApiKey:
    """The request's key, checked and counted against its rate limit (a FastAPI dependency)."""
    service = service_of(request)
    key = authenticate(service.memory, bearer_token(request))
    request.state.key_id = key.id
    wait = service.limiter.allow(str(key.id))
    if wait:
        raise ApiError(
            429,
            f"rate limit of {service.limiter.per_minute} requests a minute "
            f"reached; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    return key


def need_admin(key: ApiKey) -> None:
    if not key.can_admin:
        raise ApiError(403, "this needs an admin key (`membot keys create --admin`)")


def need_bot(key: ApiKey, bot: str) -> None:
    """404 for a bot outside the key's scope, as for one that does not exist."""
    if not key.can_admin and key.bot != bot:
        raise ApiError(404, f"no bot named {bot!r}")


def person_of(key: ApiKey, bot: str, user: str | None) -> str:
    """The person a request acts as: a person key's own (``user`` may be left out, and if
    given must be it); for admin and bot keys, ``user`` is required."""
    need_bot(key, bot)
    if key.user is not None:
        if user is not None and user != key.user:
            raise ApiError(403, "this key acts only as its own person", param="user")
        return key.user
    if not user or not user.strip():
        raise ApiError(422, "name the person: `user`", param="user")
    return user

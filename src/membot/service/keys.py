"""API keys for ``membot serve``: who may act for which bot and person.

A key is ``mb_<id>_<secret>``. The id is public (``membot keys list`` shows it, ``membot keys
revoke`` takes it), so a key found in the wrong place says which one to revoke. The store keeps
only a SHA-256 of the whole key; the key itself is shown once, when it is made.

Three scopes: an admin key does everything; a bot key acts for any person of its bot (an app's
backend); a person key acts only as that one person of that bot (safe in a browser or a phone).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from membot.errors import AuthError, ConfigError
from membot.line_checks import check_name
from membot.model import aware, iso, utc_now
from membot.store.base import KeyStore, StoredKey

if TYPE_CHECKING:
    from membot.memory.facade import Memory

Scope = Literal["admin", "bot", "person"]
KeyState = Literal["active", "revoked", "expired"]

KEY_PATTERN = re.compile(r"mb_(?P<id>[0-9a-f]{12})_[A-Za-z0-9_-]{43}")
# Writing on every request would put a write lock in each one; a minute is precise enough to
# tell a key in use from a forgotten one.
LAST_USED_EVERY = timedelta(minutes=1)
SIGNIN_LABEL = "one-time sign-in link (membot serve)"
SESSION_LABEL = "browser session (from the sign-in link)"
# Labels only membot gives: a key made with the sign-in link's label would pass for one.
MEMBOTS_OWN_LABELS = frozenset({SIGNIN_LABEL, SESSION_LABEL})


@dataclass(frozen=True)
class ApiKey:
    """One API key as ``membot keys list`` shows it: never its secret."""

    id: str
    label: str | None
    bot: str | None
    user: str | None
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @classmethod
    def from_stored(cls, stored: StoredKey) -> ApiKey:
        return cls(
            id=stored.id,
            label=stored.label,
            bot=stored.bot,
            user=stored.person,
            created_at=stored.created_at,
            expires_at=stored.expires_at,
            revoked_at=stored.revoked_at,
            last_used_at=stored.last_used_at,
        )

    @property
    def signin_only(self) -> bool:
        """A sign-in link's key: taken only where it is traded for a browser's own."""
        return self.label == SIGNIN_LABEL

    @property
    def scope(self) -> Scope:
        if self.bot is None:
            return "admin"
        return "bot" if self.user is None else "person"

    @property
    def can_admin(self) -> bool:
        return self.scope == "admin"

    def allows(self, bot: str | None, user: str | None) -> bool:
        """Whether this key may act for ``user`` of ``bot`` (``user`` None: the bot as a whole,
        ``bot`` None: no one bot, such as listing bots, which only an admin key may)."""
        if self.can_admin:
            return True
        if bot != self.bot:
            return False
        return self.user is None or user == self.user

    def state(self, now: datetime | None = None) -> KeyState:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= aware(now or utc_now()):
            return "expired"
        return "active"

    def to_json(self) -> dict[str, Any]:
        def moment(value: datetime | None) -> str | None:
            return iso(value) if value else None

        return {
            "id": self.id,
            "scope": self.scope,
            "bot": self.bot,
            "user": self.user,
            "label": self.label,
            "created_at": iso(self.created_at),
            "expires_at": moment(self.expires_at),
            "revoked_at": moment(self.revoked_at),
            "last_used_at": moment(self.last_used_at),
        }


@dataclass(frozen=True)
class NewKey:
    """A key just made: ``secret`` is the only copy there will ever be."""

    key: ApiKey
    secret: str = field(repr=False)  # kept out of reprs, so out of logs and tracebacks

    def to_json(self) -> dict[str, Any]:
        return {**self.key.to_json(), "key": self.secret}


def create_key(
    memory: Memory,
    *,
    admin: bool = False,
    bot: str | None = None,
    user: str | None = None,
    label: str | None = None,
    expires_days: int | None = None,
) -> NewKey:
    """Make a key for everything (``admin``), for a bot's every person (``bot``) or for one
    person of a bot (``bot`` and ``user``); store its hash and return it with its secret."""
    if label in MEMBOTS_OWN_LABELS:
        raise ConfigError(f"the label {label!r} names membot's own sign-in keys; choose another")
    return _new_key(memory, admin=admin, bot=bot, user=user, label=label, expires_days=expires_days)


def _new_key(
    memory: Memory,
    *,
    admin: bool,
    bot: str | None,
    user: str | None,
    label: str | None,
    expires_days: int | None,
) -> NewKey:
    _check_scope(admin, bot, user)
    now = utc_now()
    stored = StoredKey(
        id=secrets.token_hex(6),
        bot=bot,
        person=user,
        label=label or None,
        created_at=now,
        expires_at=_expiry(now, expires_days),
        revoked_at=None,
        last_used_at=None,
    )
    # 32 random bytes: 256 bits no one can guess, the same strength as the hash that keeps it.
    secret = f"mb_{stored.id}_{secrets.token_urlsafe(32)}"
    _key_store(memory).add_key(stored, _digest(secret))
    return NewKey(ApiKey.from_stored(stored), secret)


def create_signin_key(memory: Memory) -> NewKey:
    """A one-time admin key for the sign-in link ``membot serve`` prints on a loopback-only
    server; earlier links not yet used stop working. It expires in a day, and
    :func:`redeem_signin_key` trades it, once, for the browser's own key."""
    for key in list_keys(memory):
        if key.label == SIGNIN_LABEL and key.state() == "active":
            revoke_key(memory, key.id)
    return _new_key(memory, admin=True, bot=None, user=None, label=SIGNIN_LABEL, expires_days=1)


# Why an old sign-in link no longer works, and what to do: the browser shows this.
_AGAIN = "restart `membot serve` for a new link, or sign in with an admin key"
_SPENT_LINK = {
    "revoked": f"that sign-in link was used already, or a newer one replaced it (each works "
    f"once): {_AGAIN}",
    "expired": f"that sign-in link expired (a link lasts a day): {_AGAIN}",
}


def redeem_signin_key(memory: Memory, token: str | None) -> NewKey:
    """Trade a sign-in link's key for a new admin key of a browser session (valid a day);
    the link's key is revoked, so a link copied from a terminal or a history works once."""
    try:
        key = authenticate(memory, token, signin=True)
    except AuthError as error:
        if error.reason not in ("revoked", "expired") or token is None:
            raise  # a key that was found: its token is well formed
        stored = _key_store(memory).key_by_hash(_digest(token.strip()))
        if stored is None or stored.label != SIGNIN_LABEL:
            raise
        raise AuthError(error.reason, _SPENT_LINK[error.reason]) from None
    if key.label != SIGNIN_LABEL or not key.can_admin:
        raise AuthError("not_signin", "that key is not a sign-in link's; sign in with it instead")
    when = utc_now()
    # A second revoke keeps the first time: of two tabs opening one link at once, one wins.
    stored = _key_store(memory).revoke_key(key.id, when)
    if stored is None or stored.revoked_at != when:
        raise AuthError("revoked", _SPENT_LINK["revoked"])
    return _new_key(memory, admin=True, bot=None, user=None, label=SESSION_LABEL, expires_days=1)


def list_keys(memory: Memory) -> list[ApiKey]:
    """Every key, revoked and expired ones too, oldest first."""
    return [ApiKey.from_stored(stored) for stored in _key_store(memory).api_keys()]


def revoke_key(memory: Memory, key_id: str) -> ApiKey:
    """Revoke a key by its id; revoking it again changes nothing."""
    stored = _key_store(memory).revoke_key(key_id, utc_now())
    if stored is None:
        raise ConfigError(f"no API key has the id {key_id!r}; `membot keys list` shows them")
    return ApiKey.from_stored(stored)


def authenticate(
    memory: Memory, token: str | None, *, now: datetime | None = None, signin: bool = False
) -> ApiKey:
    """The key a request's bearer ``token`` is, if it is active; :class:`AuthError` if not.
    A sign-in link's key is taken only where it is traded for a browser's (``signin``): used
    as an admin key it would work any number of times until that trade."""
    if not token or not token.strip():
        raise AuthError("missing", "no API key: send `Authorization: Bearer KEY`")
    token = token.strip()
    shape = KEY_PATTERN.fullmatch(token)
    if shape is None:
        raise AuthError("malformed", "that is not a membot API key (`membot keys create`)")
    store = _key_store(memory)
    # Found by its digest in SQL, not compared in constant time: timing could tell at most how
    # a digest begins, and that does not help anyone find a key with that digest.
    stored = store.key_by_hash(_digest(token))
    if stored is None:
        raise AuthError("unknown", f"API key {shape['id']} is not known to this server")
    key = ApiKey.from_stored(stored)
    now = aware(now or utc_now())
    state = key.state(now)
    if state == "revoked":
        raise AuthError("revoked", f"API key {key.id} was revoked; ask for a new one")
    if state == "expired":
        raise AuthError("expired", f"API key {key.id} expired; ask for a new one")
    if key.signin_only and not signin:
        raise AuthError(
            "signin_only",
            f"API key {key.id} is a sign-in link's: open the link in a browser (it works once)",
        )
    if key.last_used_at is None or now - key.last_used_at >= LAST_USED_EVERY:
        store.mark_key_used(key.id, now)
    return key


def _digest(token: str) -> str:
    # A plain SHA-256 is enough: the secret is 256 random bits, so no one can search for it from
    # its hash. A slow KDF (bcrypt, argon2) protects guessable passwords, and is slow on
    # purpose (tens of milliseconds), a price every request would pay here.
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _check_scope(admin: bool, bot: str | None, user: str | None) -> None:
    for what, name in (("bot", bot), ("user", user)):
        if name is not None and not name.strip():
            raise ConfigError(f"the {what} name is empty")
        if name is not None:  # a key for a name no line can have would act for nobody
            check_name(name, what)
    if admin and (bot is not None or user is not None):
        raise ConfigError(
            "an admin key acts for every bot and person: give --admin alone, "
            "or --bot NAME [--user NAME] without it"
        )
    if not admin and user is not None and bot is None:
        raise ConfigError(f"a key for the person {user!r} needs their bot: add --bot NAME")
    if not admin and bot is None:
        raise ConfigError(
            "say whom the key acts for: --admin (everything), --bot NAME (every person of a "
            "bot) or --bot NAME --user NAME (one person)"
        )


def _expiry(now: datetime, expires_days: int | None) -> datetime | None:
    if expires_days is None:
        return None
    if expires_days <= 0:
        raise ConfigError(
            f"--expires-days must be 1 or more, not {expires_days}; "
            "leave it out for a key that does not expire"
        )
    try:
        return now + timedelta(days=expires_days)
    except OverflowError as error:
        raise ConfigError(f"--expires-days {expires_days} is past the year 9999") from error


def _key_store(memory: Memory) -> KeyStore:
    if not isinstance(memory.store, KeyStore):
        raise ConfigError(f"this store ({type(memory.store).__name__}) keeps no API keys")
    return memory.store

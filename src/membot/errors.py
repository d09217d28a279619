"""One exception hierarchy for everything membot raises on purpose.

Front ends catch :class:`MembotError` and show its message; anything else is a bug.
"""

from typing import Literal

AuthReason = Literal[
    "missing", "malformed", "unknown", "revoked", "expired", "not_signin", "signin_only"
]


class MembotError(Exception):
    """Base class: the message is written for the person using membot."""


class ConfigError(MembotError):
    """A setting, spec string or argument is invalid."""


class StoreError(MembotError):
    """The store cannot do what was asked (missing thread, bad file, ...)."""


class StoreFullError(StoreError):
    """The disk holding the store, or the store's size limit, is full: the write that met it
    stored nothing, and what was stored before is intact."""


class EmbedderMismatchError(StoreError):
    """The store's vectors were made by another embedding model or dimension."""


class ProviderError(MembotError):
    """An embedding or LLM provider failed (down, timeout, bad key, missing package)."""


class ImportFormatError(MembotError):
    """A file given to ``membot import`` is not in the announced format."""


class NotFoundError(ConfigError):
    """What was named (a bot, a person's thread, a document) is not in the store."""


class ConflictError(ConfigError):
    """What was asked would clash with what the store holds (a bot of that name exists)."""


class LinkCodeError(ConfigError):
    """A link code entered is not one that links: mistyped, used, expired, another bot's or
    the person's own. One message for all of them, so a guess learns nothing."""

    def __init__(self) -> None:
        super().__init__("that link code is not valid: it may be mistyped, already used or expired")


class TooManyAttemptsError(MembotError):
    """Too many link codes asked for, or too many wrong ones entered, in a short time:
    ``retry_after`` is how many seconds until the next try is allowed."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AuthError(MembotError):
    """A request's API key is missing, malformed, unknown, revoked or expired.

    ``reason`` is that one word, for a server's log and status; the message says what to do.
    """

    def __init__(self, reason: AuthReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class TurnFailedError(MembotError):
    """A turn failed after the person's line was stored: the line is kept (``thread``,
    ``seq``), so a front end must not send it again. ``failure`` is what went wrong (a
    MembotError, or a bug); the message says both."""

    def __init__(self, thread: str, seq: int, failure: BaseException) -> None:
        said = str(failure) if isinstance(failure, MembotError) else "membot failed unexpectedly"
        said = said.removesuffix("; try again")  # a busy store's advice, wrong for this line
        super().__init__(
            f"{said}. Your line was stored (thread {thread!r}, seq {seq}): send the next line "
            "rather than this one again"
        )
        self.thread = thread
        self.seq = seq
        self.failure = failure

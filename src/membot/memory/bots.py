"""``Memory``'s bots: profiles read, checked and stored, bots made and removed. A mixin of
:class:`~membot.memory.facade.Memory`, which holds the store, the embedder and the caches."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, TypeGuard

from membot.config import DEFAULT_BOT, BotSettings
from membot.errors import ConfigError, ConflictError, NotFoundError, StoreError
from membot.line_checks import check_bot_name
from membot.recall.chat import check_strategy
from membot.store.base import bot_taken, number_taken

if TYPE_CHECKING:
    from membot.embed import Embedder
    from membot.index.source import IndexedLines
    from membot.store import Store
    from membot.turn.tokens import TokenCounter

log = logging.getLogger(__name__)
# The stored values this process has warned about, (bot, name): a profile is read every turn.
_WARNED: set[tuple[str, str]] = set()
SETTING_NAMES = frozenset(item.name for item in fields(BotSettings))


class BotProfiles:
    """A bot's profile over the defaults, and the bots of the store."""

    # Provided by Memory.
    store: Store
    embedder: Embedder
    tokens: TokenCounter
    recall_source: IndexedLines

    def bot_settings(
        self, bot: str = DEFAULT_BOT, overrides: Mapping[str, object] | None = None
    ) -> BotSettings:
        """The bot's profile: ``overrides`` (values passed with a call) over the stored
        profile over the defaults."""
        settings = self._stored_profile(bot)
        if overrides:
            settings = settings.with_values(dict(overrides))
            check_strategy(settings)
        return settings

    def _stored_profile(self, bot: str) -> BotSettings:
        """The bot's stored profile over the defaults. A value an earlier membot stored that
        this one refuses (a timeout of inf minutes) is left at its default, with a warning,
        rather than failing every turn of the bot and every change that would mend it."""
        # A name this membot does not know (a newer one's) is kept as stored (configure_bot).
        values = renamed_settings(self._stored_values(bot))
        stored = {k: v for k, v in values.items() if k in SETTING_NAMES}
        try:
            return BotSettings().with_values(stored)
        except ConfigError:
            pass
        settings = BotSettings()
        for name, value in stored.items():
            try:
                settings = settings.with_values({name: value})
            except ConfigError as error:
                if (bot, name) not in _WARNED:
                    _WARNED.add((bot, name))
                    log.warning("bot %r: its stored %s is left at its default: %s; "
                                "`membot bot set %s %s VALUE` replaces it", bot, name, error,
                                bot, name)  # fmt: skip
        return settings

    def _stored_values(self, bot: str) -> dict[str, object]:
        """The bot's stored profile as saved (names to values); StoreError naming the bot
        when it cannot be read."""
        try:
            return self.store.bot_settings(bot) or {}
        except ValueError as error:  # not JSON: written by hand, or damaged
            raise StoreError(
                f"bot {bot!r}: its stored profile cannot be read ({error}); "
                f"`membot bot import {bot} PROFILE.toml` replaces it"
            ) from error

    def configure_bot(self, bot: str = DEFAULT_BOT, /, **values: object) -> BotSettings:
        """Change a bot's stored settings (unknown names and bad values are refused, and
        nothing is saved). Stored names this membot does not know (a newer membot's, on a
        store both use) are kept as they were."""
        before = self.bot_settings(bot)
        settings = before.with_values(values)
        self._check_profile(bot, settings, before)
        # The first profiles' names are read as today's (renamed_settings), so they are saved
        # under today's names: kept as they were, they would undo a value set back to its
        # default (only what differs from the defaults is saved).
        others = {
            k: v
            for k, v in self._stored_values(bot).items()
            if k not in SETTING_NAMES and k not in FIRST_NAMES
        }
        self.store.save_bot(bot, {**others, **self._changed_from_defaults(settings)})
        return settings

    def bots(self) -> list[str]:
        """The bots in the store, by name."""
        return self.store.bots()

    def window_shapes(self) -> set[tuple[int, int]]:
        """The (window_size, window_overlap) of the store's bots: the windows their lines
        may have been cut into."""
        shapes = (self.bot_settings(bot) for bot in self.bots())
        return {(settings.window_size, settings.window_overlap) for settings in shapes}

    def has_bot(self, bot: str) -> bool:
        return self.store.bot_id(bot) is not None

    def bot_id(self, bot: str) -> int | None:
        """The bot's id in the store, None if there is no such bot: a bot deleted and made
        again under its name has another."""
        return self.store.bot_id(bot)

    def require_bot(self, bot: str) -> None:
        """``NotFoundError`` unless ``bot`` is in the store."""
        if not self.has_bot(bot):
            raise NotFoundError(f"no bot named {bot!r}")

    def delete_bot(self, bot: str) -> dict[str, int]:
        """Remove a bot and everything it holds (profile, every person's threads, lines,
        summaries, documents), and the cached embeddings of its lines. Its keys are revoked:
        a bot made later under the same name is not theirs."""

        self.require_bot(bot)
        from membot.memory.forgetting import derived_texts, drop_removed

        # Every text its lines and summaries were embedded as, as forgetting a person finds
        # them ("Speaker: text", pairs, summaries and their points), not the raw texts alone.
        people = self.store.people(bot)
        lines = [line for person in people for line in self.store.history(person, bot, None)]
        summaries = [kept for person in people for kept in self.store.summaries(person, bot)]
        texts = derived_texts(lines, summaries, self.window_shapes())
        removed = self.store.delete_bot(bot)  # its keys revoked in the same transaction
        try:
            drop_removed(self.recall_source, self.embedder, texts)
        finally:
            self.store.finish_removal()
        return removed

    def create_bot(self, bot: str, /, **values: object) -> BotSettings:
        """A new bot with ``values`` over the defaults; ConfigError if the name is taken."""
        check_bot_name(bot)  # before the store is asked: it cannot take every string
        if self.has_bot(bot):
            raise bot_taken(bot)
        return self.replace_profile(bot, dict(values), new=True)

    def replace_profile(
        self, bot: str, values: dict[str, object], *, new: bool = False
    ) -> BotSettings:
        """Make ``values`` the bot's whole stored profile (the rest reverts to defaults);
        with ``new``, only if no bot has the name, checked as it is saved."""
        settings = BotSettings().with_values(values)
        self._check_profile(bot, settings, None if new else self.bot_settings(bot))
        self.store.save_bot(bot, self._changed_from_defaults(settings), new=new)
        return settings

    def _check_profile(
        self, bot: str, settings: BotSettings, before: BotSettings | None = None
    ) -> None:
        """The bot's name (every way a profile is saved: create, set, import, PUT), and what
        a single value cannot show: a strategy's numbers, a number another bot has, room in
        the prompt for the person's line (only where what sizes the prompt changes from
        ``before``: a profile an earlier membot kept may still change its other settings)."""
        check_bot_name(bot)
        from membot.turn.context import check_room, prompt_shape

        check_strategy(settings)
        if before is None or prompt_shape(settings) != prompt_shape(before):
            check_room(settings, self.tokens)
        if settings.sms_number:
            owner = self.sms_number_owner(settings.sms_number)
            if owner is not None and owner != bot:
                raise number_taken(owner, settings.sms_number)

    def sms_number_owner(self, number: str) -> str | None:
        """The bot people reach at ``number`` (its profile's ``sms_number``), or None."""
        found = [bot for bot in self.bots() if self.bot_settings(bot).sms_number == number]
        if len(found) > 1:  # two writers racing past the check as the profiles were saved
            raise ConflictError(f"bots {', '.join(found)} share one SMS number: give each its own")
        return found[0] if found else None

    @staticmethod
    def _changed_from_defaults(settings: BotSettings) -> dict[str, object]:
        """Only what differs from the defaults is stored, so a later membot's better
        default reaches every bot that did not choose otherwise."""
        defaults = BotSettings().to_json()
        return {k: v for k, v in settings.to_json().items() if defaults[k] != v}


FIRST_NAMES = ("recent_window", "prompt_budget")  # settings of schema 1, since renamed


def renamed_settings(stored: dict[str, object]) -> dict[str, object]:
    """``stored`` with the settings of the first membots (schema 1) under today's names,
    where the profile holds no value of the new name: ``recent_window`` is ``window_size``;
    ``prompt_budget`` was what ``context_size - reply_tokens`` is now."""
    values = dict(stored)
    if "recent_window" in values and "window_size" not in values:
        values["window_size"] = values["recent_window"]
    budget = values.get("prompt_budget")
    reply = values.get("reply_tokens", BotSettings().reply_tokens)
    if "context_size" not in values and _whole(budget) and _whole(reply):
        values["context_size"] = budget + reply
    return values


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)

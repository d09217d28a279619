"""The store's surface, split by concern: SqliteStore and PostgresStore offer every method of
every protocol, with the same parameters."""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from membot.store import SqliteStore
from membot.store.base import SmsStore, Store
from membot.store.postgres import PostgresStore

# Every concern Store is made of (SMS state aside: its own module, checked by its tests).
CONCERNS = tuple(base for base in Store.__bases__ if base not in (SmsStore, Protocol))


def _methods(protocol: type) -> dict[str, inspect.Signature]:
    own = {
        name: value
        for name, value in vars(protocol).items()
        if callable(value) and not name.startswith("_")
    }
    return {name: inspect.signature(value) for name, value in own.items()}


@pytest.mark.parametrize("store", [SqliteStore, PostgresStore], ids=lambda store: store.__name__)
@pytest.mark.parametrize("protocol", CONCERNS, ids=lambda protocol: protocol.__name__)
def test_each_store_implements_each_concern(store: type, protocol: type) -> None:
    for name, signature in _methods(protocol).items():
        implemented = getattr(store, name, None)
        assert implemented is not None, f"{store.__name__} lacks {protocol.__name__}.{name}"
        wanted = list(signature.parameters)
        assert list(inspect.signature(implemented).parameters) == wanted, name


def test_the_concerns_are_small_and_store_is_their_union() -> None:
    for protocol in CONCERNS:
        assert protocol in Store.__mro__
    assert max(len(_methods(protocol)) for protocol in CONCERNS) <= 20
    # every public method SqliteStore has for Memory belongs to exactly one concern
    owners: dict[str, list[str]] = {}
    for protocol in CONCERNS:
        for name in _methods(protocol):
            owners.setdefault(name, []).append(protocol.__name__)
    assert all(len(names) == 1 for names in owners.values()), owners

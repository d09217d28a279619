"""A store is named by a path or a URL."""

from __future__ import annotations

import pytest

from membot import ConfigError, Memory
from membot.store import SqliteStore, open_store


def test_a_path_and_a_sqlite_url_open_the_same_file(tmp_path, embedder):
    path = tmp_path / "chat.db"
    Memory(path, embedder=embedder).add("hello", user="ann", thread="t")
    through_url = Memory(f"sqlite:///{path}", embedder=embedder)
    assert [line.text for line in through_url.history(user="ann")] == ["hello"]
    assert isinstance(open_store(str(path)), SqliteStore)


def test_other_urls_are_refused_with_what_is_known(tmp_path):
    with pytest.raises(ConfigError, match="sqlite:///PATH"):
        open_store("postgresql://localhost/membot")
    with pytest.raises(ConfigError, match="sqlite:///PATH"):
        open_store("sqlite://host/x.db")

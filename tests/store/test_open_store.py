"""A store is named by a path or a URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from membot import ConfigError, Memory, StoreError
from membot.store import SqliteStore, open_store


def test_a_path_and_a_sqlite_url_open_the_same_file(tmp_path, embedder):
    path = tmp_path / "chat.db"
    Memory(path, embedder=embedder).add("hello", user="ann", thread="t")
    through_url = Memory(f"sqlite:///{path}", embedder=embedder)
    assert [line.text for line in through_url.history(user="ann")] == ["hello"]
    assert isinstance(open_store(str(path)), SqliteStore)
    short = Memory(f"sqlite:{path}", embedder=embedder)  # the short form, no slashes
    assert [line.text for line in short.history(user="ann")] == ["hello"]
    assert not (Path.cwd() / f"sqlite:{path}").exists()


def test_a_postgresql_url_opens_the_postgres_store(postgres_url, embedder, monkeypatch):
    from membot.store.postgres import PostgresStore

    first = Memory(postgres_url, embedder=embedder)
    first.add("hello", user="ann", thread="t")
    first.close()
    monkeypatch.setenv("MEMBOT_DB", postgres_url)  # a URL in MEMBOT_DB is kept whole
    again = Memory(embedder=embedder)
    assert isinstance(again.store, PostgresStore)
    assert [line.text for line in again.history(user="ann")] == ["hello"]
    assert "@" not in again.store.location and "postgresql://" in again.store.location
    again.close()


def test_a_postgresql_store_that_cannot_be_reached_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot open the store at postgresql://"):
        open_store(f"postgresql://membot:secret@/membot?host={tmp_path}&connect_timeout=2")


def test_other_urls_are_refused_with_what_is_known(tmp_path):
    with pytest.raises(ConfigError, match="postgresql://"):
        open_store("mysql://localhost/membot")
    with pytest.raises(ConfigError, match="sqlite:///PATH"):
        open_store("sqlite://host/x.db")
    with pytest.raises(ConfigError, match="sqlite:PATH"):
        open_store("sqlite:")


def test_a_temporary_store_is_removed_after_on_both_stores(postgres_url, embedder):
    import psycopg

    from membot.store import temporary_store

    for near in (None, postgres_url):
        with temporary_store(near) as store:
            memory = Memory(store, embedder=embedder)
            memory.add("scratch line", user="ann", thread="t")
            assert memory.count_lines() == 1
            location = store.location
        if near is None:
            assert not Path(location).exists()
    with psycopg.connect(postgres_url) as connection:
        schemas = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'membot_scratch_%'"
        ).fetchall()
    assert schemas == []  # dropped, with its tables


def test_a_store_object_is_not_a_location(tmp_path) -> None:
    """Given a store where a path belongs, nothing is made at the store's printed name."""
    store = open_store(tmp_path / "s.db")
    with pytest.raises(TypeError, match="path or URL, got SqliteStore"):
        open_store(store)  # type: ignore[arg-type]
    assert not list(Path.cwd().glob("<membot.store*"))

"""A store is named by a path or a URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from membot import ConfigError, Memory, NotFoundError, StoreError
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
    shown = again.store.location  # the user and the database, never a password
    assert shown.startswith("postgresql://") and "/membot_test" in shown
    assert ":" not in shown.removeprefix("postgresql://").partition("@")[0]
    again.close()


def test_a_postgresql_store_that_cannot_be_reached_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot open the store at postgresql://"):
        open_store(f"postgresql://membot:secret@/membot?host={tmp_path}&connect_timeout=2")


@pytest.mark.parametrize(
    "written",
    [
        " postgresql://membot:s3cr3t-pw@/membot?host={folder}&connect_timeout=2",
        "Postgresql://membot:s3cr3t-pw@/membot?host={folder}&connect_timeout=2",
        "POSTGRES://membot:s3cr3t-pw@/membot?host={folder}&connect_timeout=2",
    ],
)
def test_a_postgresql_url_written_loosely_is_read_and_its_password_never_shown(tmp_path, written):
    """A leading space or a capital in the scheme reached libpq as it was, whose error
    echoed the whole string, password and all (an operator's probe)."""
    with pytest.raises(StoreError) as error:
        open_store(written.format(folder=tmp_path))
    shown = str(error.value)
    assert "s3cr3t-pw" not in shown
    assert f"postgresql://membot@/membot?host={tmp_path}" in shown  # the URL, its password out


def test_a_key_value_connection_string_is_refused_not_made_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="key=value connection string") as error:
        open_store(f"host={tmp_path} dbname=membot user=membot password=s3cr3t-pw")
    assert "s3cr3t-pw" not in str(error.value)
    assert list(tmp_path.iterdir()) == []  # no folder "host=…", no store named by a password


def test_a_drivers_error_loses_the_password_wherever_it_shows() -> None:
    from membot.store.postgres import without_secrets

    url = "postgresql://membot:p%40ss@db/membot"
    said = 'bad "postgresql://membot:p%40ss@db" and p@ss and password=p@ss'
    assert without_secrets(said, url) == 'bad "postgresql://membot:***@db" and *** and password=***'


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


def test_another_programs_sqlite_database_is_left_as_it_is(tmp_path) -> None:
    """A SQLite file of something else got membot's tables written into it, and its log
    turned to WAL, by any membot command naming it (a newcomer's walkthrough)."""
    import hashlib
    import sqlite3

    path = tmp_path / "inventory.db"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE parts (name TEXT)")
        other.execute("INSERT INTO parts VALUES ('bolt')")
    other.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match=r"a SQLite database but not a membot store .*parts"):
        open_store(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    versioned = tmp_path / "versioned.db"  # other programs set user_version too (a review)
    with sqlite3.connect(versioned) as other:
        other.execute("CREATE TABLE parts (name TEXT)")
        other.execute("PRAGMA user_version = 3")
    other.close()
    with pytest.raises(StoreError, match="not a membot store"):
        open_store(versioned)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # an empty database is as good as a new file
    open_store(empty).close()


def test_a_read_only_store_says_so(embedder) -> None:
    """A read-only store was called "not a membot store: attempt to write a readonly
    database" (a newcomer's walkthrough, as user nobody). Root writes to any file, so as
    root the store is opened by a child process that is nobody."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="membot-ro-"))  # outside pytest's private folder
    try:
        path = folder / "ro.db"
        Memory(path, embedder=embedder).close()
        path.chmod(0o444)
        folder.chmod(0o755)
        if os.geteuid() != 0:
            with pytest.raises(StoreError, match="the file or its folder is read-only"):
                open_store(path)
            return
        if not shutil.which("setpriv"):
            pytest.skip("setpriv is needed to open the store as another user")
        opened = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-c", f"from membot.store import open_store; open_store({str(path)!r})"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert opened.returncode != 0
        assert "the file or its folder is read-only" in opened.stderr, opened.stderr
    finally:
        shutil.rmtree(folder)


def test_a_store_to_copy_from_must_be_there(tmp_path) -> None:
    """``membot migrate`` from a mistyped path made an empty store there and said every
    count matched."""
    from membot.store.transfer import migrate_store

    with pytest.raises(NotFoundError, match="no store at"):
        migrate_store(str(tmp_path / "typo.db"), str(tmp_path / "b.db"))
    assert not (tmp_path / "typo.db").exists()

"""The store's disk fills up, or another connection holds the write lock: the error says
so, the write that met it stored nothing, and the store stays intact (SQLite's
integrity_check, every earlier line there, the next write works once there is room)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from membot import LineInput, Memory, ScriptedLLM, StoreError, StoreFullError
from membot.server import create_app
from membot.service.keys import create_key
from membot.store import sqlite as sqlite_store
from membot.store.sqlite_driver import sqlite3


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        result = connection.execute("PRAGMA integrity_check").fetchone()[0]
    connection.close()
    return result


def texts(memory: Memory, user: str = "alice") -> list[str]:
    return [line.text for line in memory.history(user=user)]


def limit_size(memory: Memory, extra_pages: int) -> None:
    """Let the store's file grow by ``extra_pages`` pages at most (the rest of the disk is
    "full"): SQLite's max_page_count on the store's own connection."""
    db = memory.store._db
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages + extra_pages}")


def lines(count: int, size: int = 2000) -> list[LineInput]:
    # Random text: nothing for SQLite to share between rows, so pages fill fast.
    return [
        LineInput(f"{n} " + uuid.uuid4().hex * (size // 32), "alice", "import")
        for n in range(count)
    ]


def test_a_full_store_refuses_the_write_and_keeps_what_it_had(memory: Memory, tmp_path) -> None:
    memory.add("I run on Sundays", user="alice", thread="t1")
    before = texts(memory)
    limit_size(memory, extra_pages=8)

    with pytest.raises(StoreFullError, match=r"is full .*nothing of this change was stored"):
        memory.add_many(lines(200), batch_size=40)
    stored = memory.count_lines()
    assert (stored - 1) % 40 == 0  # whole batches, none of the one that met the limit
    limit_size(memory, extra_pages=0)
    with pytest.raises(StoreFullError):  # one line of 28,800 characters needs new pages
        memory.add("one more " + uuid.uuid4().hex * 900, user="alice", thread="t1")

    assert memory.count_lines() == stored
    assert texts(memory)[: len(before)] == before
    assert integrity(tmp_path / "memory.db") == "ok"
    limit_size(memory, extra_pages=10_000)  # room again: the store takes writes
    memory.add("Still here", user="alice", thread="t1")
    assert texts(memory)[-1] == "Still here"
    assert integrity(tmp_path / "memory.db") == "ok"


def test_a_full_store_over_http_answers_507_and_reads_still_work(memory: Memory) -> None:
    memory.create_bot("coach")
    memory.add("I run on Sundays", user="alice", thread="t1", bot="coach")
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    limit_size(memory, extra_pages=0)
    turn = {"user": "alice", "thread": "t1", "text": "Where do I run? " + "x" * 20_000}
    with TestClient(create_app(memory, llm=ScriptedLLM()), raise_server_exceptions=False) as client:
        full = client.post("/v1/bots/coach/turns", json=turn, headers=headers)
        lines = client.get("/v1/bots/coach/users/alice/threads/t1/lines", headers=headers)

    assert full.status_code == 507, full.text
    assert full.json()["error"]["type"] == "insufficient_storage"
    assert "is full" in full.json()["error"]["message"]
    assert [line["text"] for line in lines.json()["lines"]] == ["I run on Sundays"]


def test_a_full_store_on_the_command_line_says_so(
    tmp_path: Path, monkeypatch, openai_server
) -> None:
    from membot.cli import app

    db = tmp_path / "cli.db"
    opened: list[sqlite_store.SqliteStore] = []
    real_init = sqlite_store.SqliteStore.__init__

    def size_limited(self, path) -> None:  # every store the command opens is limited
        real_init(self, path)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages}")
        opened.append(self)

    monkeypatch.setattr(sqlite_store.SqliteStore, "__init__", size_limited)
    source = tmp_path / "lines.jsonl"
    source.write_text(
        "".join(f'{{"text": "{uuid.uuid4().hex * 60}", "user": "a"}}\n' for _ in range(50))
    )
    embedder = f"openai:e@{openai_server.base_url}"
    result = CliRunner().invoke(
        app, ["--db", str(db), "--embedder", embedder, "import", str(source)]
    )
    assert isinstance(result.exception, StoreFullError), result.output
    assert str(db) in str(result.exception)  # `membot` prints it as "error: ..." (exit 1)
    assert integrity(db) == "ok"


def can_mount_tmpfs(folder: Path) -> bool:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True
    )
    return mounted.returncode == 0


def test_a_real_small_filesystem_fills_up(tmp_path: Path, openai_server) -> None:
    """`membot import` onto a 2 MB tmpfs made for the test (where the machine lets root
    mount one): a clear error, exit 1, and an intact store with whole batches. (1 MB held
    less than the first batch of 256 lines with its log once the schema had 13 migrations.)"""
    disk = tmp_path / "small"
    if not can_mount_tmpfs(disk):
        pytest.skip("cannot mount a tmpfs here (needs root in a privileged container)")
    try:
        db = disk / "m.db"
        source = tmp_path / "lines.jsonl"
        records = (f'{{"text": "{uuid.uuid4().hex * 16}", "user": "a"}}\n' for _ in range(3000))
        source.write_text("".join(records))
        embedder = f"openai:e@{openai_server.base_url}"
        command = [sys.executable, "-m", "membot", "--db", str(db), "--embedder", embedder]
        result = subprocess.run([*command, "import", str(source)], capture_output=True, text=True)
        assert result.returncode == 1, result
        said = " ".join(result.stderr.split())  # as rich wrapped it
        assert "is full (its disk, or its size limit)" in said and "Traceback" not in said
        assert integrity(db) == "ok"
        with sqlite3.connect(db) as connection:
            count = connection.execute("SELECT COUNT(*) FROM lines").fetchone()[0]
        connection.close()
        assert 0 < count < 3000 and count % 256 == 0
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@contextlib.contextmanager
def write_lock_held(db: Path, seconds: float) -> Iterator[threading.Thread]:
    """Another connection takes the write lock and keeps it ``seconds``, writing meanwhile."""
    taken = threading.Event()

    def hold() -> None:
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO meta (key, value) VALUES ('holder', 'x')")
        taken.set()
        time.sleep(seconds)
        connection.execute("COMMIT")
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    yield holder
    holder.join()


def test_a_busy_store_waits_for_the_lock(memory: Memory, tmp_path: Path) -> None:
    memory.add("I run on Sundays", user="alice", thread="t1")
    with write_lock_held(tmp_path / "memory.db", seconds=1.0):
        started = time.monotonic()
        memory.add("Then I rest", user="alice", thread="t1")  # waits, then writes
        assert time.monotonic() - started >= 0.8
    assert texts(memory) == ["I run on Sundays", "Then I rest"]
    assert integrity(tmp_path / "memory.db") == "ok"


def test_a_store_busy_past_the_timeout_is_a_clear_error(
    make_memory, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECONDS", 1)
    memory = make_memory(path=tmp_path / "busy.db")
    memory.add("I run on Sundays", user="alice", thread="t1")
    with write_lock_held(tmp_path / "busy.db", seconds=2.5):
        started = time.monotonic()
        with pytest.raises(StoreError, match="another process held it for over 1 s; try again"):
            memory.add("Then I rest", user="alice", thread="t1")
        assert 0.9 < time.monotonic() - started < 2.4
    assert texts(memory) == ["I run on Sundays"]
    assert integrity(tmp_path / "busy.db") == "ok"
    memory.add("Then I rest", user="alice", thread="t1")  # the lock is free again
    assert texts(memory) == ["I run on Sundays", "Then I rest"]


def test_a_busy_store_over_http_answers_503(make_memory, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECONDS", 1)
    memory = make_memory(path=tmp_path / "busy.db")
    memory.create_bot("coach")
    headers = {"Authorization": f"Bearer {create_key(memory, admin=True).secret}"}
    turn = {"user": "alice", "thread": "t1", "text": "Where do I run?"}
    with (
        TestClient(create_app(memory, llm=ScriptedLLM()), raise_server_exceptions=False) as client,
        write_lock_held(tmp_path / "busy.db", seconds=2.5),
    ):
        busy = client.post("/v1/bots/coach/turns", json=turn, headers=headers)
    assert busy.status_code == 503, busy.text
    assert "held it for over 1 s; try again" in busy.json()["error"]["message"]
    assert integrity(tmp_path / "busy.db") == "ok"
    assert client.post("/v1/bots/coach/turns", json=turn, headers=headers).status_code == 200


def incompressible_lines(count: int) -> list[LineInput]:
    # PostgreSQL compresses long texts: random ones fill its pages as they are.
    return [LineInput(secrets.token_hex(1000), "alice", "import") for _ in range(count)]


@contextlib.contextmanager
def small_disk(megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` that the test PostgreSQL (user ``pgserver`` when run as root)
    may write: skipped where no filesystem can be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    base = Path(tempfile.mkdtemp(prefix="membot-small-disk-"))
    base.chmod(0o755)  # the server's own user goes through it
    disk = base / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        shutil.rmtree(base)
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        (disk / "space").mkdir()
        shutil.chown(disk / "space", "pgserver", "pgserver")
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_a_full_postgresql_disk_refuses_the_write_and_keeps_what_it_had(
    postgres_server: str, make_memory
) -> None:
    """The database's files on a 24 MB filesystem of their own (a tablespace): filling it
    gives PostgreSQL's disk_full, reported as StoreFullError (HTTP 507); what was stored
    stays, and writes work again once the filesystem grows."""
    import psycopg

    name = f"membot_full_{uuid.uuid4().hex[:8]}"
    with small_disk(24) as disk, psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f"CREATE TABLESPACE {name} LOCATION '{disk / 'space'}'")
        admin.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
        url = postgres_server.replace("/postgres?", f"/{name}?")
        try:
            memory = make_memory(path=url)
            memory.add("I run on Sundays", user="alice", thread="t1")
            with pytest.raises(StoreFullError, match=r"is full .*nothing of this change"):
                for _ in range(400):  # 40 lines of 2 kB a batch, until the disk is full
                    memory.add_many(incompressible_lines(40), batch_size=40)
            stored = memory.count_lines()
            assert (stored - 1) % 40 == 0  # whole batches, none of the one that met the limit
            with memory.store._pool.connection() as db:  # seqs gapless, totals counted
                gaps = db.execute(
                    "SELECT thread_id FROM lines GROUP BY thread_id HAVING max(seq) <> count(*)"
                ).fetchall()
                counted = db.execute("SELECT sum(lines) FROM lexical_totals").fetchone()[0]
            assert gaps == [] and counted == stored
            subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)
            memory.add("Still here", user="alice", thread="t1")
            t1 = [line.text for line in memory.history(user="alice", thread="t1")]
            assert t1 == ["I run on Sundays", "Still here"]
            assert memory.count_lines() == stored + 1
            memory.close()
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP TABLESPACE IF EXISTS {name}")

"""``membot backup`` and ``membot restore``: a backup taken while others write is a whole,
checked store of one moment; a restore replaces the store in one transaction."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from crash_checks import Acked, AckedLine, check_store
from test_crash import KEY, Runner, free_port, wait_until_up

from membot import (
    ConfigError,
    LineInput,
    Memory,
    StoreError,
    backup_store,
    restore_store,
)
from membot.store.sqlite_driver import sqlite3


def fill(memory: Memory, count: int, thread: str = "t", start: int = 0) -> list[str]:
    texts = [f"I like the colour fill{n}" for n in range(start, start + count)]
    memory.add_many([LineInput(text, "al", thread) for text in texts])
    return texts


def test_a_backup_restored_into_a_new_store_holds_everything(make_memory, tmp_path: Path):
    memory = make_memory(path=tmp_path / "live.db")
    texts = fill(memory, 300)
    summary = memory.add_summary(bot="membot", user="al", thread="t", text="- likes fill1")
    report = backup_store(tmp_path / "live.db", tmp_path / "b.db")
    assert (report.lines, report.summaries) == (300, 1)
    assert not (tmp_path / "b.db-wal").exists()  # one self-contained file
    assert not list(tmp_path.glob(".b.db.partial-*"))

    restored = restore_store(tmp_path / "b.db", tmp_path / "new.db")
    assert (restored.lines, restored.summaries) == (300, 1)
    acked = Acked(
        lines_by_text={t: AckedLine("al", "t", t) for t in texts},
        summaries={summary.id: summary.text},
    )
    check_store(tmp_path / "new.db", acked)
    again = make_memory(path=tmp_path / "new.db")
    found = again.search("I like the colour fill7", user="al", k=3)  # hashed words may collide
    assert "I like the colour fill7" in [match.line.text for match in found]


def test_a_restore_replaces_what_the_store_holds_and_open_memories_see_it(
    make_memory, tmp_path: Path
):
    """A server's Memory holding the store open reads the restored store, caches included."""
    live = make_memory(path=tmp_path / "live.db")
    fill(live, 50)
    backup_store(tmp_path / "live.db", tmp_path / "b.db")
    fill(live, 50, start=50)
    wanted = "I like the colour fill77"
    assert wanted in [m.line.text for m in live.search(wanted, user="al", k=3)]  # now cached

    restore_store(tmp_path / "b.db", tmp_path / "live.db")
    assert live.count_lines() == 50
    assert wanted not in [m.line.text for m in live.search(wanted, user="al", k=3)]
    assert live.add("I like the colour after", user="al", thread="t").seq == 51


def test_bad_backups_and_destinations_are_refused_and_nothing_changes(make_memory, tmp_path: Path):
    memory = make_memory(path=tmp_path / "live.db")
    fill(memory, 10)
    backup_store(tmp_path / "live.db", tmp_path / "b.db")
    with pytest.raises(ConfigError, match="exists: choose another name, or pass --replace"):
        backup_store(tmp_path / "live.db", tmp_path / "b.db")
    assert backup_store(tmp_path / "live.db", tmp_path / "b.db", replace=True).lines == 10
    with pytest.raises(ConfigError, match="pg_dump"):
        backup_store("postgresql://membot@db/membot", tmp_path / "pg.db")

    not_a_store = tmp_path / "notes.db"
    sqlite3.connect(not_a_store).execute("CREATE TABLE notes (text TEXT)").connection.close()
    (tmp_path / "text.db").write_text("not a database at all, " * 200)
    for bad, message in (
        (not_a_store, "not a membot store"),
        (tmp_path / "text.db", "not a"),
        (tmp_path / "missing.db", "no backup at"),
    ):
        with pytest.raises((ConfigError, StoreError), match=message):
            restore_store(bad, tmp_path / "live.db")
    assert memory.count_lines() == 10


def test_backups_taken_while_a_writer_writes_are_each_a_whole_moment(make_memory, tmp_path: Path):
    """A writer adds lines one at a time on its own connection; every backup taken meanwhile
    holds a prefix of them, each with its vector and lexical row, and the writer is never
    held up for long."""
    writer = make_memory(path=tmp_path / "live.db")
    stop, written, slowest = threading.Event(), [], [0.0]

    def write() -> None:
        n = 0
        while not stop.is_set():
            started = time.perf_counter()
            writer.add(f"I like the colour w{n}", user="al", thread="t")
            slowest[0] = max(slowest[0], time.perf_counter() - started)
            written.append(f"I like the colour w{n}")
            n += 1

    thread = threading.Thread(target=write)
    thread.start()
    held = []
    try:
        for number in range(8):
            time.sleep(0.1)
            backup_store(tmp_path / "live.db", tmp_path / f"b{number}.db")
            state = check_store(tmp_path / f"b{number}.db")
            texts = state.threads.get(("al", "t"), [])
            assert texts == [f"I like the colour w{n}" for n in range(len(texts))]
            held.append(len(texts))
    finally:
        stop.set()
        thread.join()
    assert held == sorted(held) and held[-1] > held[0] > 0, held
    assert slowest[0] < 2.0, f"a write waited {slowest[0]:.2f} s for a backup"


@pytest.mark.slow
def test_membot_backup_beside_a_serving_membot_holds_every_line_answered_before_it(
    tmp_path: Path,
) -> None:
    """`membot serve` answers turns while `membot backup` runs again and again (two
    processes); each backup holds every line answered before it started."""
    runner = Runner(tmp_path, 31)
    port = free_port()
    server = runner.start(runner.argv("serve", "--port", str(port)))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(runner, server, url)
        key = KEY.findall(runner.log.read_text())[0]
        answered: dict[int, AckedLine] = {}
        stop = threading.Event()

        def talk() -> None:
            with httpx.Client(
                base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}
            ) as http:
                n = 0
                while not stop.is_set():
                    n += 1
                    body = {"user": "al", "thread": "t", "text": f"I like the colour b{n}"}
                    turn = http.post("/v1/bots/membot/turns", json=body).raise_for_status()
                    for line in (turn.json()["line"], turn.json()["reply_line"]):
                        answered[line["id"]] = AckedLine("al", "t", line["text"], line["seq"])

        client = threading.Thread(target=talk)
        client.start()
        held = []
        try:
            deadline = time.monotonic() + 30
            while not answered and client.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            for number in range(5):
                time.sleep(0.2)
                before = Acked(lines_by_id=dict(answered))
                runner.run(["--db", str(runner.db), "backup", str(tmp_path / f"b{number}.db")])
                held.append(check_store(tmp_path / f"b{number}.db", before).lines)
            assert client.is_alive(), "the turns failed"
        finally:
            stop.set()
            client.join()
    finally:
        os.kill(server.pid, 9)
        server.join()
    assert 0 < held[0] < held[-1], held


def test_the_cli_backs_up_and_restores(cli, make_memory, tmp_path: Path) -> None:
    memory = make_memory(path=cli.db)
    memory.add("I like the colour cli1", user="al", thread="t")
    done = cli.ok("backup", str(tmp_path / "b.db"))
    assert "backed up 1 lines, 0 summaries" in done.output
    memory.add("I like the colour cli2", user="al", thread="t")
    refused = cli.run("backup", str(tmp_path / "b.db"))  # main() prints it as "error: ..."
    assert isinstance(refused.exception, ConfigError) and "exists" in str(refused.exception)
    assert cli.run("restore", str(tmp_path / "b.db"), input="n\n").exit_code == 1
    assert memory.count_lines() == 2
    assert "restored 1 lines" in cli.ok("restore", str(tmp_path / "b.db"), "--yes").output
    assert [line.text for line in memory.history(user="al")] == ["I like the colour cli1"]
    # A PostgreSQL store: refused before the question, which showed its URL, password too.
    on_postgres = cli.run(
        "--db", "postgresql://membot:sekrit@db.invalid/mb", "restore", str(tmp_path / "b.db"),
        input="n\n",
    )  # fmt: skip
    assert isinstance(on_postgres.exception, ConfigError)
    assert "pg_dump" in str(on_postgres.exception)
    assert "sekrit" not in on_postgres.output and "Replace everything" not in on_postgres.output

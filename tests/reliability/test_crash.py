"""Crash safety: membot processes killed with SIGKILL at random points (a fixed seed) while
they import, take turns and end threads over HTTP (``membot serve``), re-embed (``membot
reindex``) and copy a store (``membot migrate``); 105 kills in all.

After every kill the store passes SQLite's integrity check, its foreign-key check and FTS5's
check of the lexical index; every line has its vector and lexical row and seqs have no gaps;
every line and summary whose storing was acknowledged (answered 200 over HTTP, or a command
that finished) is there once; the store opens and the next turn works.

The processes are real (``crash_children``: ``membot``'s own ``main()`` in a forked process,
``membot serve`` on 127.0.0.1); the embedder is the tests' hashing one and the model a
scripted one.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import crash_children
import httpx
import pytest
from crash_checks import Acked, AckedLine, check_cache, check_store

from membot import Bot, Memory, restore_store

SEED = 13
KEY = re.compile(r"\bmb_[0-9a-f]{12}_[A-Za-z0-9_-]{43}\b")
DIMENSIONS = crash_children.EMBEDDERS


class Runner:
    """Starts ``membot`` commands on one store and kills them."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.folder = folder
        self.db = folder / "crash.db"
        self.cache = folder / "cache"
        self.rng = random.Random(seed)
        self.env = {
            **os.environ,
            "MEMBOT_CACHE_DIR": str(self.cache),
            "HF_HUB_OFFLINE": "1",
            "OPENBLAS_NUM_THREADS": "1",
        }
        self.log = folder / "child.log"
        self.kills = 0  # of processes still running when the signal came
        self.acked = Acked()
        self.checked_turns = 0
        self.run(["--help"])  # the fork server starts (imports membot once) before any timing

    def argv(self, *args: str, embedder: str = "hash-bow", db: Path | None = None) -> list[str]:
        return ["--db", str(db or self.db), "--embedder", embedder, "--llm", "echo", *args]

    def start(self, argv: list[str]):
        return crash_children.start(argv, self.env, self.log)

    def run(self, argv: list[str], timeout: float = 120) -> float:
        """Run to the end; the seconds it took."""
        started = time.monotonic()
        process = self.start(argv)
        process.join(timeout)
        assert process.exitcode == 0, self.log.read_text()
        return time.monotonic() - started

    def run_killed(self, argv: list[str], within: float) -> bool:
        """Start ``argv`` and kill it after a random time up to ``within`` seconds; False if
        it finished first (then it must have succeeded)."""
        process = self.start(argv)
        process.join(self.rng.uniform(0.0, within))
        if process.exitcode is None:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended between the look and the kill: not killed
                process.join()
            else:
                process.join()
                self.kills += 1
                return True
        assert process.exitcode == 0, self.log.read_text()
        return False

    def check(self, db: Path | None = None, acked: Acked | None = None):
        """The store's checks, the embedding cache's, and a turn taken on the store."""
        db = db or self.db
        state = check_store(db, self.acked if acked is None else acked)
        check_cache(self.cache / "embeddings.db")
        self.next_turn_works(db, state.embedder or "hash-bow")
        return state

    def next_turn_works(self, db: Path, embedder: str) -> None:
        """Open the store as a program would and take a turn; the line is acknowledged."""
        memory = Memory(db, embedder=crash_children.HashingEmbedder(embedder, DIMENSIONS[embedder]))
        try:
            self.checked_turns += 1
            text = f"I like the colour checked{self.checked_turns}"
            turn = Bot(memory, crash_children.EchoLLM()).turn(text, user="checker", thread="t")
            assert turn.error is None and turn.bot_line is not None
            for line in (turn.human_line, turn.bot_line):
                self.acked.lines_by_id[line.id] = AckedLine("checker", "t", line.text, line.seq)
        finally:
            memory.close()


def write_import(folder: Path, index: int, count: int = 1500, threads: int = 10) -> Path:
    """A JSONL file of ``count`` lines over ``threads`` threads, every text its own."""
    path = folder / f"import-{index}.jsonl"
    records = [
        {
            "text": f"I like the colour imp{index}x{n}",
            "thread": f"f{index}-t{n % threads}",
            "role": "human" if n % 2 == 0 else "bot",
        }
        for n in range(count)
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def file_lines(path: Path) -> dict[str, list[str]]:
    threads: dict[str, list[str]] = {}
    for record in map(json.loads, path.read_text().splitlines()):
        threads.setdefault(record["thread"], []).append(record["text"])
    return threads


@pytest.mark.slow
def test_imports_killed_at_random_points_store_whole_batches_once(tmp_path: Path) -> None:
    runner = Runner(tmp_path, SEED)
    scratch = tmp_path / "scratch.db"
    duration = runner.run(
        runner.argv("import", str(write_import(tmp_path, 0)), "--user", "im", db=scratch)
    )
    print(f"an import of 1,500 lines takes {duration:.2f} s")
    index, partial = 1, 0
    path = write_import(tmp_path, index)
    while runner.kills < 25:
        killed = runner.run_killed(runner.argv("import", str(path), "--user", "im"), duration)
        state = runner.check()
        expected = file_lines(path)
        held = {thread: state.threads.get(("im", thread), []) for thread in expected}
        for thread, texts in expected.items():  # each thread: a prefix of the file, once
            assert held[thread] == texts[: len(held[thread])], thread
        done = sum(map(len, held.values())) == sum(map(len, expected.values()))
        partial += killed and sum(map(len, held.values())) > 0 and not done
        assert done or killed, "an import that finished stored everything"
        if done:  # acknowledged: the import finished (or a rerun finished it)
            for thread, texts in expected.items():
                runner.acked.lines_by_text.update({t: AckedLine("im", thread, t) for t in texts})
            index += 1
            path = write_import(tmp_path, index)
    runner.check()
    print(f"import: {runner.kills} kills, {partial} left an import halfway")
    assert partial >= 5, f"only {partial} kills caught an import halfway"


@dataclass
class Traffic:
    """Clients of one server run: each takes turns in a thread and ends it, remembered,
    after every third turn."""

    runner: Runner
    url: str
    key: str
    counter: list[int]  # texts are numbered across runs: each is said once
    errors: list[str] = field(default_factory=list)
    answered: int = 0  # requests answered in this run
    cut_off: int = 0  # requests the kill cut off mid-way
    lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, number: int) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            try:
                thread = ""
                for turn in itertools.count():
                    thread = self.exchange(http, f"p{number}", turn, thread)
            except httpx.TransportError:
                with self.lock:
                    self.cut_off += 1
            except Exception as error:  # a thread's failure fails the test, not just the thread
                self.errors.append(repr(error))

    def exchange(self, http: httpx.Client, person: str, turn: int, thread: str) -> str:
        """One turn in ``thread`` (a new one every third turn), ending it after the third."""
        with self.lock:
            self.counter[0] += 1
            n = self.counter[0]
        thread = f"{person}-{n}" if turn % 3 == 0 else thread
        body = {"user": person, "thread": thread, "text": f"I like the colour srv{n}"}
        answer = http.post("/v1/bots/membot/turns", json=body)
        self.answered += 1
        assert answer.status_code == 200, answer.text[:300]
        acked = self.runner.acked.lines_by_id
        for line in (answer.json()["line"], answer.json()["reply_line"]):
            acked[line["id"]] = AckedLine(person, thread, line["text"], line["seq"])
        if turn % 3 == 2:
            ending = http.post(
                f"/v1/bots/membot/users/{person}/threads/{thread}/end", json={"remember": True}
            )
            self.answered += 1
            assert ending.status_code == 200, ending.text[:300]
            kept = ending.json()["remembered"]
            assert kept is not None, ending.json()
            self.runner.acked.summaries[kept["id"]] = kept["text"]
        return thread


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(runner: Runner, process, url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.exitcode is None, runner.log.read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.02)
    pytest.fail(f"membot serve did not answer:\n{runner.log.read_text()}")


@pytest.mark.slow
def test_a_server_killed_during_turns_and_endings_loses_nothing_it_answered(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path, SEED + 1)
    counter, key, cut_off = [0], "", 0
    while runner.kills < 40:
        port = free_port()
        process = runner.start(runner.argv("serve", "--port", str(port)))
        url = f"http://127.0.0.1:{port}"
        wait_until_up(runner, process, url)
        key = key or KEY.findall(runner.log.read_text())[0]  # the first start's admin key
        traffic = Traffic(runner, url, key, counter)
        clients = [threading.Thread(target=traffic.client, args=(n,)) for n in range(3)]
        for client in clients:
            client.start()
        # Killed after a random number of answers and a random moment more: at any point
        # of a turn or an ending, however fast this machine is.
        wanted, deadline = runner.rng.randint(0, 9), time.monotonic() + 60
        while traffic.answered < wanted and not traffic.errors and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(runner.rng.uniform(0.0, 0.2))
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        runner.kills += 1
        for client in clients:
            client.join()
        assert traffic.errors == []
        cut_off += traffic.cut_off
        runner.check()
    lines, summaries = len(runner.acked.lines_by_id), len(runner.acked.summaries)
    print(
        f"serve: {runner.kills} kills, {cut_off} requests cut off, {lines} lines and "
        f"{summaries} summaries answered"
    )
    assert summaries >= 5 and lines >= 200
    assert cut_off == 3 * runner.kills  # every client was talking when the server died


def populate(db: Path, lines: int = 6000, word: str = "pop") -> Acked:
    """``lines`` lines in 20 threads of a person named ``word``, with two summaries, written
    in-process."""
    from membot import LineInput

    memory = Memory(db, embedder=crash_children.HashingEmbedder())
    acked = Acked()
    try:
        items = [
            LineInput(f"I like the colour {word}{n}", word, f"t{n % 20}") for n in range(lines)
        ]
        memory.add_many(items)
        for item in items:
            acked.lines_by_text[item.text] = AckedLine(item.user, item.thread, item.text)
        for thread in ("t0", "t1"):
            summary = memory.add_summary(
                bot="membot", user=word, thread=thread, text=f"- likes the colour {word}{thread}"
            )
            acked.summaries[summary.id] = summary.text
    finally:
        memory.close()
    return acked


@pytest.mark.slow
def test_a_reindex_killed_at_random_points_leaves_one_embedders_vectors(tmp_path: Path) -> None:
    runner = Runner(tmp_path, SEED + 2)
    runner.acked = populate(runner.db)
    embedders = ["hash-bow-128", "hash-bow"]  # each run re-embeds with the other one
    duration = runner.run(runner.argv("reindex", embedder=embedders[0]))
    finished, halfway = 1, 0
    while runner.kills < 20:
        target = embedders[finished % 2]
        killed = runner.run_killed(runner.argv("reindex", embedder=target), duration)
        state = runner.check()  # every vector of one embedder, the one the store names
        finished += state.embedder == target
        halfway += killed and state.embedder != target
        assert state.embedder == target or killed
    print(f"reindex: {runner.kills} kills, {halfway} during the re-embedding")
    assert halfway >= 10, f"only {halfway} kills caught a reindex halfway"


@pytest.mark.slow
def test_a_migrate_killed_at_random_points_leaves_the_destination_empty_or_whole(
    tmp_path: Path,
) -> None:
    runner = Runner(tmp_path, SEED + 3)
    source_acked = populate(runner.db)
    duration = runner.run(runner.argv("migrate", str(runner.db), str(tmp_path / "first.db")))
    copies, empty = 0, 0
    destination = tmp_path / "copy-0.db"
    while runner.kills < 20:
        killed = runner.run_killed(
            runner.argv("migrate", str(runner.db), str(destination)), duration
        )
        source = check_store(runner.db, source_acked)
        if destination.exists():
            copied = check_store(destination)
            assert copied.lines in (0, source.lines), "a half copy"
            assert copied.summaries in (0, source.summaries)
            if copied.lines:  # whole: the next copy goes to a new file
                check_store(destination, source_acked)
                runner.next_turn_works(destination, "hash-bow")
                copies += 1
                destination = tmp_path / f"copy-{copies}.db"
                continue
        empty += killed
    print(f"migrate: {runner.kills} kills, {empty} left the copy empty, {copies} copies whole")
    assert empty >= 10, f"only {empty} kills caught a copy halfway"


@pytest.mark.slow
def test_a_backup_or_restore_killed_leaves_no_half_backup_and_the_store_whole(
    tmp_path: Path,
) -> None:
    """`membot backup` killed: PATH is absent or a whole backup. `membot restore` killed:
    the store holds what it held or the whole backup, nothing between."""
    runner = Runner(tmp_path, SEED + 4)
    before = populate(runner.db, lines=1000)
    backup = tmp_path / "whole.db"
    runner.run(["--db", str(runner.db), "backup", str(backup)])
    more = populate(runner.db, lines=3000, word="more")  # the store holds more than the backup
    everything = Acked(
        lines_by_text={**before.lines_by_text, **more.lines_by_text},
        summaries={**before.summaries, **more.summaries},
    )
    bigger = tmp_path / "bigger.db"
    duration = runner.run(["--db", str(runner.db), "backup", str(bigger)])
    for number in range(8):
        target = tmp_path / f"killed-{number}.db"
        runner.run_killed(["--db", str(runner.db), "backup", str(target)], duration)
        assert not target.exists() or check_store(target, everything).lines == 4000
    backups_killed = runner.kills
    shutil.copy(bigger, tmp_path / "timed.db")
    duration = runner.run(["--db", str(tmp_path / "timed.db"), "restore", str(backup), "--yes"])
    restored = 0
    while runner.kills < backups_killed + 10:
        runner.run_killed(["--db", str(runner.db), "restore", str(backup), "--yes"], duration)
        lines = check_store(runner.db).lines
        assert lines in (1000, 4000), lines
        check_store(runner.db, before if lines == 1000 else everything)
        if lines == 1000:  # restored: the next restore starts from the bigger store again
            restored += 1
            restore_store(bigger, runner.db)
    print(
        f"backup and restore: {backups_killed} backups and {runner.kills - backups_killed} "
        f"restores killed, {restored} restores whole"
    )

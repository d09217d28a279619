"""Imports are idempotent: a run stopped at any point and run again, or a file imported twice,
stores each of the file's lines once, in order, with gapless seqs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from membot import ImportFormatError, Memory, ProviderError
from membot.eval import shared_data_dir
from membot.memory.importers import read_file
from membot.store.migrations import MIGRATIONS
from membot.store.sqlite_driver import sqlite3

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"
SOURCE_KEY_MIGRATION = 5  # the migration that made lines.source_key


class StopsAfter:
    """Embeds with ``inner`` for ``batches`` calls, then stops as a Ctrl-C would (or fails
    with ``error``: an embedder that went down)."""

    def __init__(self, inner, batches: int, error: BaseException | None = None) -> None:
        self.inner, self.name, self.batches, self.calls = inner, inner.name, batches, 0
        self.error = error or KeyboardInterrupt("stopped")

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls == self.batches:
            raise self.error
        self.calls += 1
        return self.inner.embed(texts)


def stored(memory: Memory, lines) -> dict[tuple[str, str], list[tuple[int, str | None, str]]]:
    """(user, thread) -> [(seq, ref, text)] of everything the users of ``lines`` have."""
    threads: dict[tuple[str, str], list[tuple[int, str | None, str]]] = defaultdict(list)
    for user in {line.user for line in lines}:
        for line in memory.history(user=user):
            threads[(user, line.thread)].append((line.seq, line.ref, line.text))
    return dict(threads)


def expected(lines) -> dict[tuple[str, str], list[tuple[int, str | None, str]]]:
    threads: dict[tuple[str, str], list[tuple[int, str | None, str]]] = defaultdict(list)
    for line in lines:
        rows = threads[(line.user, line.thread)]
        rows.append((len(rows) + 1, line.ref, line.text))
    return dict(threads)


# The first 1,000 lines of the LoCoMo dev file: 49 threads of three people.
LINES = read_file(LOCOMO, "locomo", "membot", None).lines[:1000]


def test_the_same_file_imported_twice_adds_nothing_the_second_time(make_memory, embedder) -> None:
    memory = make_memory(embedder)
    assert memory.add_many(LINES, batch_size=128) == 1000
    embedded = len(embedder.embedded)
    assert memory.add_many(LINES, batch_size=128) == 0
    assert len(embedder.embedded) == embedded  # nothing embedded again either
    assert memory.count_lines() == 1000
    assert stored(memory, LINES) == expected(LINES)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), ProviderError("the embedder is down")])
@pytest.mark.parametrize("batches", [0, 1, 3, 7])
def test_an_import_stopped_after_some_batches_and_run_again_adds_what_is_missing(
    make_memory, make_embedder, tmp_path: Path, batches: int, error: BaseException
) -> None:
    first = make_memory(StopsAfter(make_embedder(), batches, error), tmp_path / "m.db")
    with pytest.raises(type(error)):
        first.add_many(LINES, batch_size=128)
    assert first.count_lines() == 128 * batches  # whole batches, none of the one in flight
    first.close()

    again = make_memory(make_embedder(), tmp_path / "m.db")
    assert again.add_many(LINES, batch_size=128) == 1000 - 128 * batches
    assert stored(again, LINES) == expected(LINES)  # each line once, in order, seqs 1..n


def test_a_store_failure_mid_batch_stores_none_of_the_batch(make_memory, tmp_path: Path) -> None:
    """A line the store refuses rolls its whole batch back; the rerun stores them all."""
    memory = make_memory(path=tmp_path / "m.db")
    with sqlite3.connect(tmp_path / "m.db") as db:  # the 200th line's insert fails
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON lines WHEN (SELECT COUNT(*) FROM lines) = 199 "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    db.close()
    with pytest.raises(Exception, match="refused"):
        memory.add_many(LINES, batch_size=128)
    assert memory.count_lines() == 128
    with sqlite3.connect(tmp_path / "m.db") as db:
        db.execute("DROP TRIGGER refuse")
    db.close()
    assert memory.add_many(LINES, batch_size=128) == 1000 - 128
    assert stored(memory, LINES) == expected(LINES)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_lines_without_a_ref_are_keyed_by_their_place_and_text(tmp_path: Path) -> None:
    records = [
        {"text": "ok", "thread": "a"},
        {"text": "hello", "thread": "b"},
        {"text": "ok", "thread": "a"},  # the same text again is another line
        {"text": "hi", "thread": "a", "ref": 7},
    ]
    plan = read_file(write_jsonl(tmp_path / "chat.jsonl", records), "jsonl", "membot", "al")
    keys = [line.source_key for line in plan.lines]
    assert keys[0].startswith("line:1:") and keys[2].startswith("line:2:")
    assert keys[0][len("line:1:") :] == keys[2][len("line:2:") :]  # the hash of "ok"
    assert keys[1].startswith("line:1:")  # places count per thread
    assert keys[3] == "ref:7" and plan.lines[3].ref == "7"


def test_a_file_that_grew_adds_only_its_new_lines(make_memory, tmp_path: Path) -> None:
    records = [{"text": f"line {n}", "thread": "t"} for n in range(5)] + [
        {"text": "ok", "thread": "t"},
        {"text": "ok", "thread": "t"},
    ]
    path = tmp_path / "chat.jsonl"
    memory = make_memory()
    assert (
        memory.add_many(read_file(write_jsonl(path, records[:6]), "jsonl", "membot", "al").lines)
        == 6
    )
    grown = read_file(write_jsonl(path, records), "jsonl", "membot", "al").lines
    assert memory.add_many(grown) == 1
    assert [line.text for line in memory.history(user="al")] == [r["text"] for r in records]
    assert [line.seq for line in memory.history(user="al")] == list(range(1, 8))


def test_a_ref_names_one_line(make_memory, tmp_path: Path) -> None:
    same = [{"text": "hello", "thread": "t", "ref": "m1"}] * 2
    plan = read_file(write_jsonl(tmp_path / "same.jsonl", same), "jsonl", "membot", "al")
    assert make_memory().add_many(plan.lines) == 1  # the same line twice: stored once
    other = [
        {"text": "hello", "thread": "t", "ref": "m1"},
        {"text": "bye", "thread": "t", "ref": "m1"},
    ]
    with pytest.raises(ImportFormatError, match="ref 'm1' names two different lines"):
        read_file(write_jsonl(tmp_path / "other.jsonl", other), "jsonl", "membot", "al")


def test_a_store_imported_before_keys_keeps_its_refs_as_keys(make_memory, tmp_path: Path) -> None:
    """An older store where a LoCoMo file was imported twice: the first of each duplicate
    gets the ref's key, so importing again adds nothing more (the duplicates stay)."""
    path = tmp_path / "older.db"
    memory = make_memory(path=path)
    old_lines = LINES[:300]
    for _ in range(2):  # as the importer did before: no keys
        memory.add_many([replace(line, source_key=None) for line in old_lines])
    memory.close()
    with sqlite3.connect(path) as db:  # back to the schema before source_key
        db.execute("DROP INDEX lines_by_source")
        db.execute("ALTER TABLE lines DROP COLUMN source_key")
        db.execute(f"PRAGMA user_version = {SOURCE_KEY_MIGRATION - 1}")
    db.close()
    assert len(MIGRATIONS) >= SOURCE_KEY_MIGRATION

    memory = make_memory(path=path)
    assert memory.count_lines() == 600
    assert memory.add_many(LINES) == 700  # only the lines never imported
    assert memory.count_lines() == 1300


@pytest.mark.slow
def test_an_import_killed_mid_run_and_run_again_stores_each_line_once(
    tmp_path: Path, minilm
) -> None:
    """The real thing: `membot import` killed with SIGKILL while it writes, then run again."""
    sample = json.loads(LOCOMO.read_text())[0]  # conv-26: 419 lines, two batches
    source = tmp_path / "conv-26.json"
    source.write_text(json.dumps([sample]))
    db = tmp_path / "killed.db"
    cache = tmp_path / "cache"  # no embeddings yet; the model exported once for the session
    cache.mkdir()
    (cache / "models").symlink_to(minilm.onnx_path.parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMBOT_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "membot", "--db", str(db), "import", str(source)]
    process = subprocess.Popen([*command, "-f", "locomo"], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while count_lines(db) < 256 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert count_lines(db) in (256, 419)  # whole batches only

    subprocess.run([*command, "-f", "locomo"], env=env, check=True, capture_output=True)
    memory = Memory(db)
    plan = read_file(source, "locomo", "membot", None)
    assert stored(memory, plan.lines) == expected(plan.lines)
    memory.close()


def count_lines(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as connection:
            return connection.execute("SELECT COUNT(*) FROM lines").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def test_an_embedding_endpoint_failing_mid_import_then_back_stores_each_line_once(
    tmp_path: Path, endpoint
) -> None:
    """`membot import` with an embedding endpoint (a real one on 127.0.0.1) that answers
    one request, then 500: a clear error, whole batches stored; run again once it is back,
    the rest, each line once."""
    source = write_jsonl(
        tmp_path / "lines.jsonl",
        [{"text": f"line {n}", "user": "alice", "thread": f"t{n % 3}"} for n in range(600)],
    )
    db = tmp_path / "m.db"
    options = ["--db", str(db), "--embedder", f"openai:e@{endpoint.base_url}"]
    command = [sys.executable, "-m", "membot", *options, "import", str(source)]
    endpoint.embeddings_answered = 1  # the first batch of 256

    failed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1, failed
    assert "embedding endpoint openai:e@http://127.0.0.1:" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert count_lines(db) == 256

    endpoint.embeddings_answered = None
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again
    assert "imported 344 lines in 3 threads (256 were stored already)" in again.stderr
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT text FROM lines ORDER BY id").fetchall()
    connection.close()
    assert sorted(text for (text,) in rows) == sorted(f"line {n}" for n in range(600))

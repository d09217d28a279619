"""Both stores (SQLite, PostgreSQL; ``make_store``): one transaction per write, gap-free seq
under concurrent writers in threads and processes, forget. SQLite's own (WAL, a file that is
not a store) at the end."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from membot import Role, StoreError
from membot.model import Line
from membot.store import BufferEntry, NewLine, SourceKey, SqliteStore, Store, ThreadKey
from membot.store.base import lines_between, split_ranges
from membot.store.sqlite_driver import sqlite3

ALICE_T1 = ThreadKey("membot", "alice", "t1")
ALICE_T2 = ThreadKey("membot", "alice", "t2")
BOB_T1 = ThreadKey("membot", "bob", "t1")


def new_line(key: ThreadKey, text: str, role: Role = Role.HUMAN) -> NewLine:
    vector = np.full(4, 0.5, dtype=np.float32)
    return NewLine(key, role, text, vector, tokens=len(text.split()))


def count(path: Path, sql: str, params: tuple = ()) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(sql, params).fetchone()[0]


# Where each store keeps a line's parts: SQLite in three tables, PostgreSQL in one row.
_POSTGRES_COUNTS = {
    "lines": "SELECT COUNT(*) FROM lines",
    "line_vectors": "SELECT COUNT(embedding) FROM lines",
    "line_text": "SELECT COUNT(*) FROM lines WHERE lexical IS NOT NULL",
    "threads": "SELECT COUNT(*) FROM threads",
    "buffer_entries": "SELECT COUNT(*) FROM buffer_entries",
}


def table_counts(store: Store) -> dict[str, int]:
    """How many lines, vectors, lexical rows, threads and buffer entries the store holds."""
    if isinstance(store, SqliteStore):
        return {
            table: count(store.path, f"SELECT COUNT(*) FROM {table}") for table in _POSTGRES_COUNTS
        }
    return {table: store._query(sql)[0][0] for table, sql in _POSTGRES_COUNTS.items()}


def lexical_ids(store: Store, word: str) -> list[int]:
    """Ids of the lines holding ``word``, whichever the bot."""
    return sorted(
        line_id
        for bot in store.bots()
        for line_id, _ in store.lexical_search([word], store.bot_id(bot) or 0)
    )


@pytest.fixture
def store(make_store) -> Store:
    """A store of each kind: SQLite, then PostgreSQL."""
    return make_store()


def test_a_line_its_vector_and_its_text_row_are_stored_together(store: Store) -> None:
    moment = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    line = NewLine(
        ALICE_T1,
        Role.HUMAN,
        "I work in logistics",
        np.arange(4, dtype=np.float32),
        tokens=5,
        created_at=moment,
        speaker="Alice",
        ref="D1:1",
    )
    (stored,) = store.add_lines([line])

    assert (stored.seq, stored.person, stored.thread, stored.text) == (
        1,
        "alice",
        "t1",
        "I work in logistics",
    )
    assert store.lines([stored.id]) == [stored]
    assert store.lines([stored.id])[0].created_at == moment
    bot, person = store.bot_id("membot"), store.person_id("alice")
    rows = store.scope_vector_snapshot(bot or 0, (person or 0,), None, 0).rows
    assert rows.ids.tolist() == [stored.id]
    np.testing.assert_array_equal(rows.vectors[0], np.arange(4, dtype=np.float32))
    assert lexical_ids(store, "logistics") == [stored.id]


def test_a_failure_mid_batch_leaves_nothing_of_the_batch(store: Store) -> None:
    (kept,) = store.add_lines([new_line(ALICE_T1, "stored before")])

    def batch() -> Iterator[NewLine]:
        yield new_line(ALICE_T1, "first of the batch")
        yield new_line(ALICE_T2, "second of the batch, in a new thread")
        raise RuntimeError("the embedder died")

    with pytest.raises(RuntimeError):
        store.add_lines(batch())

    assert table_counts(store) == {
        "lines": 1,
        "line_vectors": 1,
        "line_text": 1,
        "threads": 1,
        "buffer_entries": 0,
    }
    assert store.history("alice", None, None) == [kept]
    # The next line takes the next seq: the failed batch used none.
    (after,) = store.add_lines([new_line(ALICE_T1, "after")])
    assert after.seq == 2


def test_a_line_the_database_refuses_rolls_back_its_whole_batch(store: Store) -> None:
    bad = NewLine(ALICE_T1, Role.HUMAN, None, np.ones(4, dtype=np.float32), 1)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match=r"(?i)not.null") as raised:
        store.add_lines([new_line(ALICE_T1, "one"), new_line(ALICE_T1, "two"), bad])
    assert raised.value.__cause__ is not None  # the database's own error, kept
    assert table_counts(store)["lines"] == 0
    assert table_counts(store)["line_text"] == 0
    assert table_counts(store)["line_vectors"] == 0


def test_the_sqlite_store_runs_in_wal_mode(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    assert store._query("PRAGMA journal_mode")[0][0] == "wal"
    with sqlite3.connect(store.path) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_seq_counts_human_and_bot_lines_of_a_thread_without_gaps(store: Store) -> None:
    for turn in range(4):
        store.add_lines([new_line(ALICE_T1, f"question {turn}", Role.HUMAN)])
        store.add_lines([new_line(ALICE_T2, f"other thread {turn}", Role.HUMAN)])
        store.add_lines([new_line(ALICE_T1, f"answer {turn}", Role.BOT)])

    t1 = store.history("alice", "membot", "t1")
    assert [line.seq for line in t1] == list(range(1, 9))
    assert [line.role for line in t1] == [Role.HUMAN, Role.BOT] * 4
    assert [line.seq for line in store.history("alice", "membot", "t2")] == [1, 2, 3, 4]


def test_threads_are_named_per_person_and_per_bot(store: Store) -> None:
    store.add_lines([new_line(ALICE_T1, "alice here"), new_line(BOB_T1, "bob here")])
    store.add_lines([new_line(ThreadKey("other-bot", "alice", "t1"), "alice to another bot")])
    assert [line.seq for line in store.history("alice", None, None)] == [1, 1]
    assert [line.text for line in store.history("bob", None, "t1")] == ["bob here"]
    assert [(t.bot, t.name, t.lines) for t in store.threads("membot", "alice")] == [
        ("membot", "t1", 1)
    ]


def writer_seqs(lines: list) -> dict[str, list[int]]:
    """The seqs each writer got, keyed by the writer's name (the text's first word)."""
    seqs: dict[str, list[int]] = {}
    for line in lines:
        seqs.setdefault(line.text.split()[0], []).append(line.seq)
    return seqs


def test_seq_has_no_gaps_or_repeats_with_concurrent_writer_threads(make_store) -> None:
    shared = make_store()  # also creates the schema before the writers start
    per_writer = 40
    start = threading.Barrier(6)
    failures: list[BaseException] = []

    def write(name: str, store: Store) -> None:
        try:
            start.wait()
            for index in range(per_writer):
                role = Role.HUMAN if index % 2 == 0 else Role.BOT
                store.add_lines([new_line(ALICE_T1, f"{name} {index}", role)])
        except BaseException as error:  # reported below, a thread cannot fail the test
            failures.append(error)

    # Four writers with their own connection, two sharing one connection.
    writers = [(f"own{n}", make_store()) for n in range(4)]
    writers += [("sharedA", shared), ("sharedB", shared)]
    threads = [threading.Thread(target=write, args=writer) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    lines = shared.history("alice", "membot", "t1")
    assert [line.seq for line in lines] == list(range(1, 6 * per_writer + 1))
    for name, seqs in writer_seqs(lines).items():
        assert len(seqs) == per_writer, name
        assert seqs == sorted(seqs), name
    assert table_counts(shared)["line_vectors"] == 6 * per_writer
    assert table_counts(shared)["line_text"] == 6 * per_writer


WRITER = """
import sys
import numpy as np
from membot.model import Role
from membot.store import NewLine, ThreadKey, open_store

location, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(location)
key = ThreadKey("membot", "alice", "t1")
for index in range(count):
    role = Role.HUMAN if index % 2 == 0 else Role.BOT
    vector = np.full(4, 0.5, dtype=np.float32)
    store.add_lines([NewLine(key, role, f"{name} {index}", vector, 2)])
"""


def test_seq_has_no_gaps_or_repeats_with_concurrent_writer_processes(
    make_store, store_url: str
) -> None:
    store = make_store()
    per_writer = 150
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store_url, f"process{n}", str(per_writer)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    written = 0
    while written < 20 or any(process.poll() is None for process in processes):
        store.add_lines([new_line(ALICE_T1, f"parent {written}")])  # meanwhile, here too
        written += 1
    errors = [process.communicate(timeout=120)[1] for process in processes]

    assert [process.returncode for process in processes] == [0, 0, 0], errors
    lines = store.history("alice", "membot", "t1")
    assert [line.seq for line in lines] == list(range(1, 3 * per_writer + written + 1))
    seqs = writer_seqs(lines)
    assert sorted(seqs) == ["parent", "process0", "process1", "process2"]
    for name, mine in seqs.items():
        assert mine == sorted(mine), name
        assert len(mine) == (written if name == "parent" else per_writer), name
    # The writers really ran at the same time: someone's lines are interleaved with another's.
    assert any(mine[-1] - mine[0] + 1 > len(mine) for mine in seqs.values())


def test_lines_between_and_last_lines_read_by_seq(store: Store) -> None:
    store.add_lines([new_line(ALICE_T1, f"line {n}") for n in range(1, 8)])
    thread_id = store.thread_id(ALICE_T1)
    assert thread_id is not None
    assert [line.seq for line in lines_between(store, thread_id, 3, 5)] == [3, 4, 5]
    assert [line.seq for line in lines_between(store, thread_id, 6, 99)] == [6, 7]
    assert [line.seq for line in store.last_lines(thread_id, 3)] == [5, 6, 7]
    assert store.last_lines(thread_id, 0) == []
    assert store.thread_id(ThreadKey("membot", "alice", "missing")) is None


def test_lines_in_ranges_reads_many_ranges_as_each_alone(store: Store) -> None:
    other = ThreadKey("membot", "bob", "t9")
    store.add_lines([new_line(ALICE_T1, f"line {n}") for n in range(1, 8)])
    store.add_lines([new_line(other, f"bob {n}") for n in range(1, 5)])
    alice, bob = store.thread_id(ALICE_T1), store.thread_id(other)
    assert alice is not None and bob is not None
    ranges = [(alice, 2, 4), (bob, 3, 9), (alice, 4, 6), (alice, 5, 4), (bob + alice + 7, 1, 3)]
    found = store.lines_in_ranges(ranges)
    assert [[line.seq for line in lines] for lines in found] == [[2, 3, 4], [3, 4], [4, 5, 6],
                                                                 [], []]  # fmt: skip
    assert [line.text for line in found[1]] == ["bob 3", "bob 4"]
    assert found == [lines_between(store, *bounds) for bounds in ranges]
    assert store.lines_in_ranges([]) == []


def test_speakers_are_read_by_line_id_without_the_lines(store: Store) -> None:
    said = store.add_lines([
        replace(new_line(ALICE_T1, "hi"), speaker="Caroline"),
        new_line(ALICE_T1, "hello", Role.BOT),
        replace(new_line(BOB_T1, "hey"), speaker="Melanie"),
    ])  # fmt: skip
    caroline, bot, melanie = (line.id for line in said)
    gone = melanie + 100
    assert store.speakers([melanie, gone, caroline, bot]) == {
        melanie: "Melanie",
        caroline: "Caroline",
        bot: None,
    }
    assert store.speakers([]) == {}


def test_split_ranges_gives_each_range_its_threads_lines_in_it() -> None:
    found = sorted(
        ((thread, _line(thread, seq)) for thread in (1, 2) for seq in (1, 2, 4, 5)),
        key=lambda each: each[1].seq,
    )  # seq order, threads mixed, as a query reads
    ranges = [(1, 2, 4), (2, 1, 9), (1, 4, 5), (1, 5, 4), (3, 1, 9), (2, 3, 3), (1, 2, 4)]
    split = split_ranges(ranges, found)
    assert [[(line.thread, line.seq) for line in each] for each in split] == [
        [("t1", 2), ("t1", 4)], [("t2", 1), ("t2", 2), ("t2", 4), ("t2", 5)],
        [("t1", 4), ("t1", 5)], [], [], [], [("t1", 2), ("t1", 4)],
    ]  # fmt: skip
    # As a pass over every line for each range would share them out.
    assert split == [
        [line for thread, line in found if thread == wanted and first <= line.seq <= last]
        for wanted, first, last in ranges
    ]


def _line(thread: int, seq: int) -> Line:
    return Line(thread * 100 + seq, "membot", "alice", f"t{thread}", seq, Role.HUMAN,
                f"line {seq}", datetime(2026, 1, 1, tzinfo=UTC), 2)  # fmt: skip


def test_the_relevance_buffer_is_stored_in_order(store: Store) -> None:
    store.add_lines([new_line(ALICE_T1, "x"), new_line(ALICE_T2, "y")])
    t1, t2 = store.thread_id(ALICE_T1), store.thread_id(ALICE_T2)
    assert t1 is not None and t2 is not None
    entries = [BufferEntry(t1, 1, 4, 0.9, (1,)), BufferEntry(t2, 2, 8, 0.5, (3, 5))]
    store.save_buffer(t2, entries)
    assert store.buffer(t2) == entries
    store.save_buffer(t2, entries[1:])
    assert store.buffer(t2) == entries[1:]
    assert store.buffer(t1) == []


def test_a_block_of_a_thread_forgotten_meanwhile_is_left_out_of_the_buffer(store: Store) -> None:
    """A turn recalls a block of another thread, which is forgotten before the turn writes its
    buffer (a person forgetting a thread while another's turn, on a bot that shares memory,
    recalls it: `benchmarks/soak.py` met it). The turn goes on; the block is left out."""
    store.add_lines([new_line(ALICE_T1, "alice talks about logistics")])
    store.add_lines([new_line(BOB_T1, "bob talks about logistics")])
    alice, bob = store.thread_id(ALICE_T1), store.thread_id(BOB_T1)
    assert alice is not None and bob is not None
    recalled = [BufferEntry(alice, 1, 1, 0.8, (1,)), BufferEntry(bob, 1, 1, 0.7, (1,))]
    store.forget("alice", None, "t1")

    kept = store.change_buffer(bob, lambda held: recalled)

    assert kept == recalled[1:]
    assert store.buffer(bob) == recalled[1:]


def test_forget_removes_lines_vectors_text_rows_and_buffer_entries(store: Store) -> None:
    store.add_lines([new_line(ALICE_T1, "alice talks about logistics")])
    store.add_lines([new_line(ALICE_T2, "alice talks about cooking")])
    store.add_lines([new_line(BOB_T1, "bob talks about logistics")])
    t1, t2, bob = (store.thread_id(key) for key in (ALICE_T1, ALICE_T2, BOB_T1))
    store.save_buffer(t2, [BufferEntry(t1, 1, 1, 0.8, (1,))])  # t2 recalled a block of t1
    store.save_buffer(bob, [BufferEntry(bob, 1, 1, 0.7, (1,))])
    generation = store.generation()

    assert store.forget("alice", None, "t1") == {"threads": 1, "lines": 1, "summaries": 0}

    assert [line.text for line in store.history("alice", None, None)] == [
        "alice talks about cooking"
    ]
    assert store.buffer(t2) == []  # it pointed at the forgotten thread
    assert len(store.buffer(bob)) == 1
    assert store.generation() == generation + 1
    assert len(lexical_ids(store, "logistics")) == 1  # bob's line only
    assert table_counts(store)["line_vectors"] == 2

    assert store.person_id("alice") is not None  # she still has a thread
    assert store.forget("alice", None, None) == {"threads": 1, "lines": 1, "summaries": 0}
    assert store.history("alice", None, None) == []
    assert store.person_id("alice") is None  # nothing left: her name goes too
    assert lexical_ids(store, "alice") == []
    assert [line.text for line in store.history("bob", None, None)] == ["bob talks about logistics"]
    assert store.forget("nobody", None, None) == {"threads": 0, "lines": 0, "summaries": 0}


def test_a_scope_line_snapshot_reads_one_scope_and_then_only_what_is_new(store: Store) -> None:
    store.add_lines([new_line(ALICE_T1, "hello"), new_line(ALICE_T1, "hi Alice", Role.BOT)])
    store.add_lines([new_line(BOB_T1, "bob's secret")])
    store.add_lines([new_line(ThreadKey("other", "alice", "t1"), "another bot")])
    bot, alice = store.bot_id("membot") or 0, (store.person_id("alice") or 0,)

    first = store.scope_line_snapshot(bot, alice, None, 0)

    assert [(line.seq, line.role, line.text) for line in first.lines] == [
        (1, Role.HUMAN, "hello"),
        (2, Role.BOT, "hi Alice"),
    ]
    assert {line.thread_id for line in first.lines} == {store.thread_id(ALICE_T1)}
    (said,) = store.add_lines([replace(new_line(ALICE_T2, "again"), speaker="Alice")])
    later = store.scope_line_snapshot(bot, alice, first.generation, first.cursor)
    new = [line for line in later.lines if line.id not in {seen.id for seen in first.lines}]
    assert [(line.id, line.text, line.labelled) for line in new] == [
        (said.id, "again", "Alice: again")
    ]
    shared = store.scope_line_snapshot(bot, None, None, 0)  # every person of the bot
    assert sorted(line.text for line in shared.lines) == ["again", "bob's secret", "hello",
                                                          "hi Alice"]  # fmt: skip
    store.forget("bob", None, None)
    moved = store.scope_line_snapshot(bot, None, shared.generation, shared.cursor)
    assert moved.generation != shared.generation  # read whole again, without bob's line
    assert sorted(line.text for line in moved.lines) == ["again", "hello", "hi Alice"]


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database " * 100)
    with pytest.raises(StoreError, match="not a membot store"):
        SqliteStore(path)


def test_a_store_that_cannot_be_created_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot open the store"):
        SqliteStore(blocker / "inside" / "membot.db")


def test_the_first_write_records_its_embedder_and_later_ones_must_match(
    store: Store,
) -> None:
    from membot.errors import EmbedderMismatchError

    store.add_lines([new_line(ALICE_T1, "one")], ("model-a", 4))
    assert (store.get_meta("embedder"), store.get_meta("dimension")) == ("model-a", "4")
    with pytest.raises(EmbedderMismatchError, match="membot --embedder SPEC reindex"):
        store.add_lines([new_line(ALICE_T1, "two")], ("model-b", 4))
    with pytest.raises(EmbedderMismatchError, match="dimension 8"):
        store.add_lines([new_line(ALICE_T1, "two")], ("model-a", 8))
    assert [line.text for line in store.history("alice", None, None)] == ["one"]


def test_re_embedding_is_refused_when_lines_came_in_meanwhile(store: Store) -> None:
    (first,) = store.add_lines([new_line(ALICE_T1, "one")], ("model-a", 4))
    generation = store.generation()
    store.add_lines([new_line(ALICE_T1, "two")], ("model-a", 4))  # arrives during the re-embed
    new_vectors = [(first.id, np.ones(8, dtype=np.float32))]
    with pytest.raises(StoreError, match="run `membot --embedder SPEC reindex` again"):
        store.replace_vectors(new_vectors, {"embedder": "model-b", "dimension": "8"},
                              last_id=first.id, generation=generation)  # fmt: skip
    assert store.get_meta("embedder") == "model-a"


def keyed(key: ThreadKey, text: str, source_key: str) -> NewLine:
    return replace(new_line(key, text), source_key=source_key)


def test_a_line_whose_source_key_its_thread_holds_is_skipped(store: Store) -> None:
    """Checked inside the write: a line another import stored meanwhile is not stored again."""
    first = store.add_lines(
        [keyed(ALICE_T1, "one", "ref:D1:1"), keyed(ALICE_T1, "two", "ref:D1:2")]
    )
    assert [line.seq for line in first] == [1, 2]
    again = store.add_lines(
        [
            keyed(ALICE_T1, "one", "ref:D1:1"),
            keyed(ALICE_T1, "three", "ref:D1:3"),
            keyed(ALICE_T2, "one", "ref:D1:1"),  # another thread: a key of its own
        ]
    )
    assert [(line.thread, line.seq, line.text) for line in again] == [
        ("t1", 3, "three"),
        ("t2", 1, "one"),
    ]
    wanted = [SourceKey(ALICE_T1, "ref:D1:1"), SourceKey(ALICE_T1, "ref:D9:9")]
    wanted += [SourceKey(BOB_T1, "ref:D1:1")]  # a thread that does not exist
    assert store.stored_source_keys(wanted) == {SourceKey(ALICE_T1, "ref:D1:1")}
    assert store.stored_source_keys([]) == set()


def test_the_sqlite_store_holds_a_source_key_once_per_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    store.add_lines([keyed(ALICE_T1, "one", "ref:x")])
    with sqlite3.connect(store.path) as db, pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO lines (thread_id, bot_id, person_id, seq, role, text, created_at, "
            "tokens, source_key) SELECT thread_id, bot_id, person_id, 2, role, text, "
            "created_at, tokens, source_key FROM lines"
        )


def test_sms_state_is_compare_and_set_and_a_text_is_claimed_once(store: Store) -> None:
    from membot.store.base import SmsRecord, SmsSender

    first = SmsSender("barista", "sms-ab12", "t1")
    assert store.sms_sender("barista", "sms-ab12") is None
    assert store.save_sms_sender(first, None)
    assert not store.save_sms_sender(replace(first, thread="t2"), None)  # another wrote first
    stopped = replace(first, stopped=True)
    assert store.save_sms_sender(stopped, first)
    assert not store.save_sms_sender(replace(first, thread="t3"), first)  # stale expectation
    assert store.sms_sender("barista", "sms-ab12") == stopped

    when = datetime(2026, 11, 23, tzinfo=UTC)
    record = SmsRecord("SM1", "barista", "sms-ab12", when)
    assert store.claim_sms_message(record, when) is None
    assert store.claim_sms_message(record, when) == record  # in flight: no replies yet
    store.answer_sms_message("SM1", ["Hi!", "Bye."], "twiml")
    held = store.claim_sms_message(record, when)
    assert held is not None and (held.replies, held.via) == (("Hi!", "Bye."), "twiml")
    assert not store.take_over_sms_message(held, "answering:h:2")  # answered: not to take

    # A text whose answerer died is taken over once: the first retry to ask has it.
    claimed = SmsRecord("SM2", "barista", "sms-ab12", when, answerer="answering:h:1")
    assert store.claim_sms_message(claimed, when) is None
    seen = store.claim_sms_message(replace(claimed, answerer="answering:h:2"), when)
    assert seen is not None and seen.answerer == "answering:h:1" and seen.in_flight
    assert store.take_over_sms_message(seen, "answering:h:2")
    assert not store.take_over_sms_message(seen, "answering:h:3")  # taken already
    assert store.claim_sms_message(claimed, when).answerer == "answering:h:2"
    # An earlier membot's record notes no answerer: taken over all the same, once.
    legacy = SmsRecord("SM3", "barista", "sms-ab12", when)
    assert store.claim_sms_message(legacy, when) is None
    assert store.take_over_sms_message(legacy, "answering:h:2")
    assert not store.take_over_sms_message(legacy, "answering:h:3")


def test_one_sms_number_is_saved_for_one_bot_only(store: Store) -> None:
    """Two bots given one number at once both passed the check made before saving (a probe
    got 200 twice, and every text to the number then failed): the store checks it again in
    the transaction that saves it."""
    from membot import ConflictError

    store.save_bot("ra", {"sms_number": "+15550100000"})
    with pytest.raises(ConflictError, match="bot 'ra' answers texts to \\+15550100000 already"):
        store.save_bot("rb", {"sms_number": "+15550100000"})
    store.save_bot("ra", {"sms_number": "+15550100000", "bot_name": "Ra"})  # its own number
    store.save_bot("rb", {"sms_number": "+15550100001"})
    assert store.bot_settings("rb") == {"sms_number": "+15550100001"}
    # A profile an earlier membot stored with Infinity in it: PostgreSQL's jsonb refused to
    # read it, and so every bot's number could no longer be saved.
    store.save_bot("old", {"idle_timeout_minutes": float("inf"), "sms_number": "+15550100009"})
    with pytest.raises(ConflictError, match="bot 'old'"):
        store.save_bot("rc", {"sms_number": "+15550100009"})
    store.save_bot("rc", {"sms_number": "+15550100008"})


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_a_bot_is_made_once_however_many_ask_at_once(memory) -> None:
    """Five POST /v1/bots of one name at once got five 201s, each saving its settings over
    the others' (a probe of PostgreSQL serving): a maker of a bot that shares nothing could
    be told yes for one that shares. Whether the name is free is asked again as it is
    saved."""
    import threading

    from membot import ConflictError

    store = memory.store
    store.save_bot("solo", {"bot_name": "First"}, new=True)
    with pytest.raises(ConflictError, match="a bot named 'solo' exists already"):
        store.save_bot("solo", {"bot_name": "Second"}, new=True)
    assert store.bot_settings("solo") == {"bot_name": "First"}

    start, made, refused = threading.Barrier(6), [], []

    def create(number: int) -> None:
        start.wait()
        try:
            memory.create_bot("crowd", bot_name=f"Maker {number}")
            made.append(number)
        except ConflictError:
            refused.append(number)

    workers = [threading.Thread(target=create, args=(n,)) for n in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert len(made) == 1 and len(refused) == 5
    assert memory.bot_settings("crowd").bot_name == f"Maker {made[0]}"


def test_a_bots_deletion_revokes_its_keys_in_the_same_transaction(memory) -> None:
    """Keys were revoked after the store's deletion returned, which now rewrites the file:
    for seconds a key of the deleted bot still worked, and made the bot again (a review)."""
    from membot import AuthError
    from membot.service.keys import authenticate, create_key

    kept = create_key(memory, bot="kept", user="sam")
    gone = create_key(memory, bot="gone", user="sam")
    memory.add("hello", user="sam", thread="t", bot="gone")
    memory.store.delete_bot("gone")  # the store alone, before anything else runs
    with pytest.raises(AuthError, match="revoked"):
        authenticate(memory, gone.secret)
    assert authenticate(memory, kept.secret).bot == "kept"

"""What only the PostgreSQL store has to get right: lines whose ids commit out of order are
still seen by every reader, migrations run once with servers starting together, its BM25
ranks like SQLite's FTS5, threads recalling each other do not deadlock, and the turn after a
restart of PostgreSQL is answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from membot import Role
from membot.index.vectors import Scope, VectorIndex
from membot.store import BufferEntry, NewLine, SqliteStore, ThreadKey
from membot.store.postgres import PostgresStore
from membot.store.postgres_schema import MIGRATIONS

ALICE_T1 = ThreadKey("membot", "alice", "t1")
ALICE_T2 = ThreadKey("membot", "alice", "t2")


def new_line(key: ThreadKey, text: str, value: float = 0.5) -> NewLine:
    vector = np.full(4, value, dtype=np.float32)
    return NewLine(key, Role.HUMAN, text, vector / np.linalg.norm(vector), tokens=2)


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(postgres_url)
    yield opened
    opened.close()


def open_transaction(url: str) -> psycopg.Connection:
    connection = psycopg.connect(url)  # not autocommit: the transaction stays open
    register_vector(connection)
    return connection


def test_a_line_whose_id_commits_after_a_larger_one_is_still_seen(
    store: PostgresStore, postgres_url: str
) -> None:
    store.add_lines([new_line(ALICE_T1, "first")])
    bot, person = store.bot_id("membot"), store.person_id("alice")
    assert bot is not None and person is not None
    index = VectorIndex(store)
    scope = Scope.of(bot, person)
    assert len(index.search(np.ones(4), scope, k=10)) == 1

    slow, fast = open_transaction(postgres_url), open_transaction(postgres_url)
    try:
        (early,) = store._add_lines(slow, [new_line(ALICE_T1, "slow")], None)  # takes an id
        (late,) = store._add_lines(fast, [new_line(ALICE_T2, "fast")], None)  # a larger one
        fast.commit()
        assert late.id > early.id
        seen = {line_id for line_id, _ in index.search(np.ones(4), scope, k=10)}
        assert late.id in seen and early.id not in seen  # not committed yet
        slow.commit()
    finally:
        slow.close()
        fast.close()

    hits = index.hits(np.ones(4), scope, k=10)
    positions = {hit.line_id: (hit.thread_id, hit.seq) for hit in hits}
    assert len(hits) == 3 and positions[early.id] == (store.thread_id(ALICE_T1), 2)
    # The scope's lines are held once each and back in id order (its lookups bisect them).
    assert index.scored_in_scope(np.ones(4), scope).ids.tolist() == sorted(positions)


def test_a_snapshot_cursor_is_a_transaction_horizon_and_rows_may_come_again(
    store: PostgresStore,
) -> None:
    (line,) = store.add_lines([new_line(ALICE_T1, "one")])
    bot, person = store.bot_id("membot"), store.person_id("alice")
    assert bot is not None and person is not None

    def snapshot(generation: int | None, cursor: int):
        return store.scope_vector_snapshot(bot, (person,), generation, cursor)

    first = snapshot(None, 0)
    assert first.rows.ids.tolist() == [line.id]
    # Nothing was running at the first read: the next read from its cursor is empty or
    # repeats only what was committed since the horizon.
    again = snapshot(first.generation, first.cursor)
    assert set(again.rows.ids.tolist()) <= {line.id}
    (later,) = store.add_lines([new_line(ALICE_T1, "two")])
    assert later.id in snapshot(first.generation, first.cursor).rows.ids.tolist()


def test_servers_starting_together_apply_each_migration_once(postgres_url: str) -> None:
    opened: list[PostgresStore] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresStore(postgres_url, pool_size=1))
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    versions = opened[0]._query("SELECT version FROM schema_version ORDER BY version")
    assert [row[0] for row in versions] == list(range(1, len(MIGRATIONS) + 1))
    for store in opened:
        store.close()


def test_a_store_in_its_own_schema_keeps_to_it(postgres_url: str) -> None:
    one = PostgresStore(postgres_url, schema="tenant_one")
    two = PostgresStore(postgres_url, schema="tenant_two")
    one.add_lines([new_line(ALICE_T1, "only in one")])
    assert one.count_lines() == 1 and two.count_lines() == 0
    one.close()
    two.close()


CORPUS = [
    "I went running by the river this morning",
    "My sister runs a bakery downtown",
    "The bakery sells sourdough and croissants",
    "We talked about the river cruise we want to take",
    "Running shoes are expensive these days",
    "Nothing about that at all",
    "The river the river the river",
]


def test_bm25_ranks_as_sqlite_fts5_does(store: PostgresStore, tmp_path) -> None:
    sqlite = SqliteStore(tmp_path / "same.db")
    for each in (store, sqlite):
        each.add_lines([new_line(ALICE_T1, text) for text in CORPUS])
    for terms in (["river"], ["running", "bakery"], ["sourdough", "river", "shoes"]):
        postgres_ranked = store.lexical_search(terms, store.bot_id("membot") or 0)
        sqlite_ranked = sqlite.lexical_search(terms, sqlite.bot_id("membot") or 0)
        assert [i for i, _ in postgres_ranked] == [i for i, _ in sqlite_ranked], terms
        np.testing.assert_allclose(
            [s for _, s in postgres_ranked], [s for _, s in sqlite_ranked], rtol=1e-3
        )
    # Words are values, never query syntax; a word with no lexeme finds nothing.
    assert store.lexical_search(["'", "\\", "|&!:*"], store.bot_id("membot") or 0) == []
    found = store.lexical_search(["river's", "a|b"], store.bot_id("membot") or 0)
    assert {i for i, _ in found} == {1, 2, 4, 7}  # the lines with "river", and with "a"
    sqlite.close()


def test_bm25_counts_a_word_repeated_up_to_hundreds_of_times_as_fts5_does(
    store: PostgresStore, tmp_path
) -> None:
    """The term frequency read back from ``ts_rank`` (postgres_lexical's doc) is exact."""
    sqlite = SqliteStore(tmp_path / "repeats.db")
    counts = [1, 2, 3, 4, 5, 7, 10, 16, 25, 40, 64, 100, 150, 200, 255]
    texts = [" ".join(["heron"] * count + ["pond"] * (count % 3)) for count in counts]
    for each in (store, sqlite):
        each.add_lines([new_line(ALICE_T1, text) for text in texts + CORPUS])
    for terms in (["heron"], ["heron", "pond"]):
        postgres_ranked = dict(store.lexical_search(terms, store.bot_id("membot") or 0, limit=50))
        sqlite_ranked = dict(sqlite.lexical_search(terms, sqlite.bot_id("membot") or 0, limit=50))
        assert postgres_ranked.keys() == sqlite_ranked.keys()
        ids = sorted(sqlite_ranked)
        np.testing.assert_allclose(
            [postgres_ranked[i] for i in ids], [sqlite_ranked[i] for i in ids], rtol=1e-4
        )
    sqlite.close()


def test_batches_locking_threads_in_opposite_orders_all_land(postgres_url: str) -> None:
    """Two writers each write to t1 and t2, one in each order: PostgreSQL aborts one of them
    when they deadlock, and the store writes that batch again."""
    writers = [PostgresStore(postgres_url, pool_size=1) for _ in range(2)]
    failures: list[BaseException] = []
    rounds = 15

    def write(store: PostgresStore, keys: tuple[ThreadKey, ThreadKey], name: str) -> None:
        try:
            for number in range(rounds):
                store.add_lines([new_line(key, f"{name} {number}") for key in keys])
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [
        threading.Thread(target=write, args=(writers[0], (ALICE_T1, ALICE_T2), "forward")),
        threading.Thread(target=write, args=(writers[1], (ALICE_T2, ALICE_T1), "backward")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for key in (ALICE_T1, ALICE_T2):
        lines = writers[0].history("alice", "membot", key.thread)
        assert [line.seq for line in lines] == list(range(1, 2 * rounds + 1))
    for store in writers:
        store.close()


def test_an_approximate_search_finds_what_the_exact_one_does(store: PostgresStore) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    people = [ThreadKey("membot", f"person{n % 3}", "t") for n in range(300)]
    lines = [
        NewLine(key, Role.HUMAN, f"line {n}", vector, 2)
        for n, (key, vector) in enumerate(zip(people, vectors, strict=True))
    ]
    stored = store.add_lines(lines, ("test-model", 8))
    indexes = store._query("SELECT indexname FROM pg_indexes WHERE tablename = 'lines'")
    assert ("lines_hnsw_8",) in indexes  # made with the store's first vectors
    bot = store.bot_id("membot") or 0
    query = vectors[5]
    exact = np.argsort(-(vectors @ query))[:10]
    found = store.approximate_search(query, bot, k=10, ef_search=200)
    assert [line_id for line_id, _ in found][:1] == [stored[5].id]
    assert {line_id for line_id, _ in found} == {stored[i].id for i in exact}
    assert found[0][1] == pytest.approx(1.0, abs=1e-5)
    person = store.person_id("person2")
    mine = store.approximate_search(query, bot, person, k=5, ef_search=200)
    assert {line.person for line in store.lines([i for i, _ in mine])} == {"person2"}

    # Re-embedding to another dimension swaps the index, and new lines still go in.
    generation = store.generation()
    store.replace_vectors(
        [(line.id, np.ones(4, dtype=np.float32)) for line in stored],
        {"embedder": "other", "dimension": "4"},
        last_id=stored[-1].id,
        generation=generation,
    )
    indexes = store._query("SELECT indexname FROM pg_indexes WHERE tablename = 'lines'")
    assert ("lines_hnsw_4",) in indexes and ("lines_hnsw_8",) not in indexes
    store.add_lines([NewLine(people[0], Role.HUMAN, "after", np.ones(4, np.float32), 1)])


def test_buffers_of_threads_recalling_each_other_change_at_once(store: PostgresStore) -> None:
    """Two turns at the same moment, each on a thread that recalls the other: each holds its
    own thread while it asks to hold the other's against a forget. Both buffers are written
    (its own thread was held ``FOR UPDATE``, which the other's ``FOR KEY SHARE`` waits for:
    PostgreSQL killed one turn as a deadlock)."""
    store.add_lines([new_line(ALICE_T1, "hiking"), new_line(ALICE_T2, "hiking again")])
    ids = [store.thread_id(key) for key in (ALICE_T1, ALICE_T2)]
    both_hold_their_own = threading.Barrier(2, timeout=10)
    failures: list[BaseException] = []
    runs: list[int] = []  # each change once: a deadlock met would run one again

    def recall(own: int, other: int) -> None:
        waited: list[bool] = []

        def push(held: list[BufferEntry]) -> list[BufferEntry]:
            runs.append(own)
            if not waited:  # a transaction run again does not wait for the other again
                waited.append(True)
                both_hold_their_own.wait()
            return [*held, BufferEntry(other, 1, 1, 0.9, (1,))]

        try:
            store.change_buffer(own, push)
        except BaseException as error:  # reported below
            failures.append(error)

    turns = [
        threading.Thread(target=recall, args=(ids[0], ids[1])),
        threading.Thread(target=recall, args=(ids[1], ids[0])),
    ]
    for turn in turns:
        turn.start()
    for turn in turns:
        turn.join()
    assert failures == []
    assert sorted(runs) == sorted(ids), "a deadlock was met, and the retry hid it"
    assert [entry.source_thread_id for entry in store.buffer(ids[0])] == [ids[1]]
    assert [entry.source_thread_id for entry in store.buffer(ids[1])] == [ids[0]]


def end_every_other_connection(url: str) -> None:
    """What a restart of PostgreSQL does to a pool: every connection it holds is ended."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database()"
        )
        for _ in range(100):  # the ended sessions leave within milliseconds
            (left,) = admin.execute(
                "SELECT COUNT(*) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            ).fetchone()
            if left == 0:
                return
            time.sleep(0.02)


def test_the_first_turn_after_a_restart_is_answered(
    store: PostgresStore, postgres_url: str
) -> None:
    """Connections pooled before PostgreSQL restarted are dead: the pools hand out live ones
    (a server refused its next turns, one per stale connection of its turn pool)."""
    for number in range(3):  # connections in both pools, each used and put back
        with store.turn_lock(ALICE_T1):
            store.add_lines([new_line(ALICE_T1, f"before {number}")])
    end_every_other_connection(postgres_url)

    with store.turn_lock(ALICE_T1):
        (line,) = store.add_lines([new_line(ALICE_T1, "after")])
    assert line.seq == 4
    assert [said.text for said in store.history("alice", "membot", "t1")][-1] == "after"


def test_a_bot_made_while_its_profile_is_saved_elsewhere_takes_the_same_locks(
    store: PostgresStore, postgres_url: str
) -> None:
    """Making a bot with a phone number took the bot's new row, then the number's lock; a
    save of that bot's profile took them the other way round, and PostgreSQL killed one of
    the two as a deadlock (a review: a 503 for PUT profile or the creation)."""
    from contextlib import contextmanager

    other = PostgresStore(postgres_url)
    made_row = threading.Event()
    writing = store._write

    class Pausing:  # the creation holds its locks a moment after its INSERT
        def __init__(self, db) -> None:
            self.db = db

        def execute(self, sql, *args, **kwargs):
            result = self.db.execute(sql, *args, **kwargs)
            if sql.startswith("INSERT INTO bots") and not made_row.is_set():
                row = result.fetchone()
                made_row.set()
                time.sleep(0.5)
                return type("Row", (), {"fetchone": lambda _self: row})()
            return result

    @contextmanager
    def pausing_write():
        with writing() as db:
            yield Pausing(db)

    store._write = pausing_write  # type: ignore[method-assign]
    failures: list[Exception] = []

    def create() -> None:
        try:
            store.save_bot("coach", {"sms_number": "+15550100000"}, new=True)
        except Exception as error:
            failures.append(error)

    creating = threading.Thread(target=create)
    creating.start()
    try:
        assert made_row.wait(10)
        other.save_bot("coach", {"sms_number": "+15550100000", "bot_name": "Cy"})
    finally:
        creating.join(30)
        other.close()
    assert failures == []
    assert store.bot_settings("coach") == {"sms_number": "+15550100000", "bot_name": "Cy"}


def test_a_readiness_check_gives_up_within_its_timeout(postgres_url: str) -> None:
    """/readyz waited the pool's 30 s for a connection while the database was down (a
    probe: a load balancer's check times out first). No connection to be had here: the
    pool's one is held."""
    from membot import StoreError

    store = PostgresStore(postgres_url, pool_size=1)
    try:
        store.check_reachable(2)  # answers while a connection is to be had
        with store._pool.connection():
            started = time.monotonic()
            with pytest.raises(StoreError):
                store.check_reachable(0.5)
            assert time.monotonic() - started < 5
    finally:
        store.close()

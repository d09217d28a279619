"""``membot migrate``: a whole store copied SQLite → PostgreSQL → SQLite, every table's rows
the same, counts checked, a non-empty destination refused."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from membot import ConfigError, Role, migrate_store
from membot.store import BufferEntry, NewLine, SqliteStore, Store, ThreadKey, open_store
from membot.store.base import LineParts, NewChunk, SmsRecord, SmsSender, StoredKey
from membot.store.transfer import TABLES, table_counts

ALICE = ThreadKey("membot", "alice", "monday")
BOB = ThreadKey("barista", "bob", "t1")
BY = ("hash-bow", 4)
WHEN = datetime(2024, 5, 8, 13, 56, 7, 123456, tzinfo=UTC)


def vector(seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).random(4).astype(np.float32)
    return values / np.linalg.norm(values)


def fill(store: Store) -> None:
    """One of everything a store keeps."""
    lines = [
        NewLine(
            ALICE,
            Role.HUMAN,
            "I moved to Lisbon for a logistics job",
            vector(1),
            9,
            WHEN,
            "Alice",
            "D1:1",
            "ref:D1:1",
            parts=LineParts(((0, 8), (9, 37)), np.vstack([vector(6), vector(7)])),
        ),
        NewLine(
            ALICE,
            Role.BOT,
            "How is Lisbon treating you?",
            vector(2),
            7,
            WHEN + timedelta(minutes=1),
        ),
        NewLine(BOB, Role.HUMAN, "Flat whites are my favourite", vector(3), 6),
    ]
    store.add_lines(lines, BY)
    store.save_bot("barista", {"bot_name": "Bea", "threshold": 0.4})
    thread = store.thread_id(ALICE) or 0
    store.save_buffer(thread, [BufferEntry(thread, 1, 2, 0.8, (1, 2))])
    store.save_thread_summary(thread, "Alice moved to Lisbon.", 2)
    store.end_thread(thread, WHEN + timedelta(hours=1))
    both = np.concatenate([vector(4), vector(5)])  # a summary of two vectors
    kept = store.add_summary(thread, "Alice works in retail", ["work"], (WHEN, WHEN), 5, both, BY)
    fix = ("Alice works in retail", "Alice works in logistics")  # corrected, with its history
    store.rewrite_summary(kept.id, fix[1], 5, both, correction=fix, vectors_by=BY)
    chunks = [NewChunk(i, "Grind", f"grind finer {i}", 3, vector(10 + i)) for i in range(3)]
    store.add_document("barista", "grind.md", "Grind", "markdown", "abc", chunks, BY)
    key = StoredKey("0123456789ab", "barista", "bob", "phone", WHEN, None, None, WHEN)
    store.add_key(key, "digest-of-bob")
    store.save_sms_sender(
        SmsSender("barista", "sms-bob", "t9", held_text="hi", held_sid="S1"), None
    )
    store.claim_sms_message(SmsRecord("S0", "barista", "sms-bob", WHEN), WHEN)
    store.answer_sms_message("S0", ["Hello!"], "twiml")
    # alice and bob linked as one person of membot (a code's hash, used by bob).
    store.add_link_code("membot", "alice", "hash-of-a-code", WHEN + timedelta(minutes=10),
                        now=WHEN, most=5, per=timedelta(hours=1))  # fmt: skip
    store.enter_link_code("membot", "bob", "hash-of-a-code", now=WHEN, most_failures=5,
                          per=timedelta(minutes=10))  # fmt: skip


def line_vectors(store: Store) -> list[list[list[float]]]:
    """Each bot's lines' vectors in id order, bot by bot."""
    bots = (store.bot_id(name) or 0 for name in store.bots())
    return [store.scope_vector_snapshot(bot, None, None, 0).rows.vectors.tolist() for bot in bots]


def contents(store: Store) -> dict:
    """What a person, a bot and an operator can read from a store, ids aside."""
    bot = store.bot_id("membot") or 0
    alice = store.history("alice", None, None)
    return {
        "lines": [replace(line, id=0) for line in alice + store.history("bob", None, None)],
        "threads": [replace(t, id=0) for t in store.open_threads("barista")],
        "ended": store.thread_state(ALICE),
        "settings": store.bot_settings("barista"),
        "summaries": [replace(s, id=0) for s in store.summaries("alice")],
        "corrections": [
            [(c.old_text, c.new_text, c.corrected_at) for c in history]
            for history in store.summary_corrections(
                [s.id for s in store.summaries("alice")]
            ).values()
        ],
        "summary_vectors": store.summary_vectors(bot, None)[1].tolist(),
        "documents": store.documents("barista"),
        "chunk_vectors": store.chunk_vectors(store.bot_id("barista") or 0)[1].tolist(),
        "keys": store.api_keys(),
        "key": store.key_by_hash("digest-of-bob"),
        "lexical": [
            alice.index(line)
            for line in store.lines(
                [i for i, _ in store.lexical_search(["lisbon", "logistics"], bot)]
            )
        ],
        "vectors": line_vectors(store),
        "parts": [
            (each.bounds, each.vectors.tolist())
            for each in store.line_parts([line.id for line in alice]).values()
        ],
        "embedder": (store.get_meta("embedder"), store.get_meta("dimension")),
        "sms_sender": store.sms_sender("barista", "sms-bob"),
        "linked": store.linked_people("membot", "alice"),
        "sms_message": store.claim_sms_message(SmsRecord("S0", "barista", "x", WHEN), WHEN),
    }


def test_a_store_goes_to_postgresql_and_back_whole(tmp_path: Path, postgres_url: str) -> None:
    first = tmp_path / "first.db"
    source = SqliteStore(first)
    fill(source)
    wanted = contents(source)
    assert wanted["linked"] == ("alice", "bob")
    counts = table_counts(source)
    source.close()
    assert all(counts[table] for table in TABLES)  # every table has something to copy

    there = migrate_store(str(first), postgres_url)
    assert there.source == there.copied == counts
    back = tmp_path / "back.db"
    again = migrate_store(postgres_url, f"sqlite:///{back}")
    assert again.copied == counts

    for location in (postgres_url, str(back)):
        store = open_store(location)
        assert contents(store) == wanted, location
        # The copy goes on where the source stopped: seq and ids continue.
        (next_line,) = store.add_lines([NewLine(ALICE, Role.HUMAN, "back", vector(9), 1)], BY)
        assert next_line.seq == 3
        assert next_line.id > max(line.id for line in store.history("bob", None, None))
        store.close()


def test_a_store_that_holds_something_is_not_copied_into(tmp_path: Path, postgres_url) -> None:
    source = SqliteStore(tmp_path / "source.db")
    fill(source)
    source.close()
    target = open_store(postgres_url)
    target.add_lines([NewLine(BOB, Role.HUMAN, "already here", vector(7), 2)], BY)
    target.close()

    with pytest.raises(ConfigError, match=r"not empty .*--replace"):
        migrate_store(str(tmp_path / "source.db"), postgres_url)
    replaced = migrate_store(str(tmp_path / "source.db"), postgres_url, replace=True)
    assert replaced.copied["lines"] == 3
    with pytest.raises(ConfigError, match="same store"):
        migrate_store(str(tmp_path / "source.db"), str(tmp_path / "source.db"))


def test_membot_migrate_prints_the_counts(tmp_path: Path) -> None:
    from membot.cli import app

    source = SqliteStore(tmp_path / "a.db")
    fill(source)
    source.close()
    result = CliRunner().invoke(app, ["migrate", str(tmp_path / "a.db"), str(tmp_path / "b.db")])
    assert result.exit_code == 0, result.output
    assert "lines:         3 →         3" in result.output
    assert "every count matches" in result.output


def forgot_the_newest(location: str) -> int:
    """A store with a line kept and the three newest forgotten; the highest id forgotten."""
    store = open_store(location)
    store.add_lines([NewLine(ALICE, Role.HUMAN, "kept", vector(1), 1)], BY)
    gone = store.add_lines([NewLine(BOB, Role.HUMAN, f"gone {n}", vector(n), 1)
                            for n in range(3)], BY)  # fmt: skip
    store.forget("bob", None, None)
    store.close()
    return max(line.id for line in gone)


def next_line_id(location: str) -> int:
    store = open_store(location)
    (line,) = store.add_lines([NewLine(ALICE, Role.HUMAN, "later", vector(5), 1)], BY)
    store.close()
    return line.id


def test_the_ids_of_lines_forgotten_before_a_move_stay_unused(
    tmp_path: Path, postgres_url: str
) -> None:
    gone = forgot_the_newest(str(tmp_path / "forgot.db"))
    migrate_store(str(tmp_path / "forgot.db"), postgres_url)
    assert next_line_id(postgres_url) > gone


def test_the_ids_of_lines_forgotten_on_postgresql_stay_unused_on_sqlite(
    tmp_path: Path, postgres_url: str
) -> None:
    gone = forgot_the_newest(postgres_url)
    migrate_store(postgres_url, str(tmp_path / "back.db"))
    assert next_line_id(str(tmp_path / "back.db")) > gone


def test_the_ids_of_lines_forgotten_on_postgresql_stay_unused_on_another(
    postgres_url: str, postgres_server: str
) -> None:
    import psycopg

    gone = forgot_the_newest(postgres_url)
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute("CREATE DATABASE membot_test_copy_target")
    target = postgres_server.replace("/postgres?", "/membot_test_copy_target?")
    try:
        migrate_store(postgres_url, target)
        assert next_line_id(target) > gone
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute("DROP DATABASE membot_test_copy_target WITH (FORCE)")

"""A store that forgets a thread every few seconds for hours keeps a whole full-text index.

The soak (docs/reliability.md) corrupted a SQLite store in its ninth minute: each forget ran
FTS5's 'optimize', and the FTS5 of SQLite 3.40.1 (Python's own on Debian 12) adds a level to
its index at every 'optimize' until, at 2,000, it calls the index corrupt. The store now opens
its files with a recent SQLite (``membot.store.sqlite_driver``) and has FTS5 drop a
forgotten line's words as the line goes (``secure-delete``), with no merge pass at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from membot.model import Role
from membot.store.base import NewLine, ThreadKey
from membot.store.sqlite import SqliteStore
from membot.store.sqlite_driver import sqlite3

CYCLES = 1200  # with 3.40.1 and an 'optimize' per forget, this index was corrupt by ~1,000


def fts_levels(path: Path) -> int:
    """How many levels FTS5's index has: the structure record (id 10 in ``line_text_data``)
    is a 4-byte cookie, an optional 4-byte version marker, then the level count as a
    SQLite varint."""
    with sqlite3.connect(path) as db:
        blob = db.execute("SELECT block FROM line_text_data WHERE id = 10").fetchone()[0]
    db.close()
    position = 8 if blob[4:8] == b"\xff\x00\x00\x01" else 4
    value = 0
    for byte in blob[position : position + 8]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def words(rng: np.random.Generator, count: int) -> str:
    """Words enough that the index spans many pages (a small one did not grow levels)."""
    return " ".join(f"w{number}" for number in rng.integers(0, 2000, count))


def test_a_thousand_forgets_leave_the_full_text_index_whole(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "churn.db")
    rng = np.random.default_rng(7)
    seed = [
        NewLine(ThreadKey("bench", f"p{n % 20}", "kept"), Role.HUMAN, f"tea {words(rng, 25)}",
                rng.random(8, dtype=np.float32), 4)
        for n in range(200)
    ]  # fmt: skip
    store.add_lines(seed, ("test", 8))
    bot = store.bot_id("bench")
    for cycle in range(CYCLES):
        key = ThreadKey("bench", "churner", f"round-{cycle}")
        for _ in range(2):
            line = NewLine(key, Role.HUMAN, f"coffee {words(rng, 20)}",
                           rng.random(8, dtype=np.float32), 4)  # fmt: skip
            store.add_lines([line], ("test", 8))
            # Reads of the index between writes, as turns and searches do.
            assert store.lexical_search(["coffee"], bot, limit=5)
        store.forget("churner", "bench", key.thread)
    store.close()

    with sqlite3.connect(tmp_path / "churn.db") as db:
        db.execute("INSERT INTO line_text (line_text, rank) VALUES ('integrity-check', 1)")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        found = db.execute("SELECT COUNT(*) FROM line_text WHERE line_text MATCH 'tea'")
        assert found.fetchone()[0] == 200
        gone = db.execute("SELECT COUNT(*) FROM line_text WHERE line_text MATCH 'coffee'")
        assert gone.fetchone()[0] == 0
    db.close()
    assert fts_levels(tmp_path / "churn.db") < 64

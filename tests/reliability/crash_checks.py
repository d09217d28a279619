"""What must hold of a SQLite store after a process writing it was killed: it passes SQLite's
own checks, every line has its vector and its lexical row, seqs have no gaps, and every line
and summary whose storing was acknowledged is there once."""

from __future__ import annotations

from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from membot.store.sqlite_driver import sqlite3


@dataclass(frozen=True)
class AckedLine:
    """A line a process said it stored: answered over HTTP, printed, or returned."""

    person: str
    thread: str
    text: str
    seq: int | None = None  # known when a turn's answer gave it


@dataclass
class Acked:
    """Everything acknowledged so far: lines by id (turns) or by text (imports), summaries."""

    lines_by_id: dict[int, AckedLine] = field(default_factory=dict)
    lines_by_text: dict[str, AckedLine] = field(default_factory=dict)
    summaries: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreState:
    embedder: str | None
    dimension: int | None
    lines: int
    summaries: int
    texts: Counter  # how many lines hold each text
    threads: dict[tuple[str, str], list[str]]  # (person, thread) -> texts in seq order


def sqlite_checks(db: sqlite3.Connection) -> bool:
    """SQLite's page-level check, the foreign keys, and FTS5's check of its index against
    its content (it raises when they differ); False for a file killed before its schema was
    made (the schema is made in one transaction: all of it or none)."""
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    if db.execute("PRAGMA user_version").fetchone()[0] == 0:
        assert db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        return False
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    db.execute("INSERT INTO line_text (line_text) VALUES ('integrity-check')")
    return True


def check_store(path: Path, acked: Acked | None = None) -> StoreState:
    """Check the store at ``path``; return what it holds."""
    with closing(sqlite3.connect(path, timeout=30)) as db:
        if not sqlite_checks(db):
            assert acked is None or not (acked.lines_by_id or acked.lines_by_text)
            return StoreState(None, None, 0, 0, Counter(), {})
        meta = dict(db.execute("SELECT key, value FROM meta"))
        dimension = int(meta["dimension"]) if "dimension" in meta else None
        rows = db.execute(
            "SELECT l.id, p.name, t.name, l.seq, l.text, length(v.vector) FROM lines l "
            "JOIN threads t ON t.id = l.thread_id JOIN people p ON p.id = l.person_id "
            "LEFT JOIN line_vectors v ON v.line_id = l.id ORDER BY l.thread_id, l.seq"
        ).fetchall()
        lexical = dict(db.execute("SELECT rowid, text FROM line_text"))
        summaries = db.execute("SELECT id, text, length(vector) FROM memories").fetchall()
        vectors = db.execute("SELECT COUNT(*) FROM line_vectors").fetchone()[0]
    by_id = {row[0]: row for row in rows}
    assert vectors == len(rows), "a vector without its line"
    assert lexical.keys() == by_id.keys(), "lines and lexical rows differ"
    threads: dict[tuple[str, str], list[str]] = {}
    for line_id, person, thread, seq, text, vector_bytes in rows:
        assert vector_bytes == 4 * dimension, f"line {line_id} has no whole vector"
        assert lexical[line_id] == text, f"line {line_id}'s lexical row holds other text"
        held = threads.setdefault((person, thread), [])
        held.append(text)
        assert seq == len(held), f"thread {thread!r} of {person!r}: seq {seq} after a gap"
    for summary_id, _, vector_bytes in summaries:
        assert vector_bytes and vector_bytes % (4 * dimension) == 0, f"summary {summary_id}"
    state = StoreState(
        meta.get("embedder"),
        dimension,
        len(rows),
        len(summaries),
        Counter(row[4] for row in rows),
        threads,
    )
    if acked is not None:
        check_acked(state, by_id, dict((s[0], s[1]) for s in summaries), acked)
    return state


def check_acked(
    state: StoreState, by_id: dict[int, tuple], summaries: dict[int, str], acked: Acked
) -> None:
    """Every acknowledged line is there once, as it was acknowledged; every summary too."""
    for line_id, line in acked.lines_by_id.items():
        assert line_id in by_id, f"acknowledged line {line_id} ({line.text!r}) is lost"
        _, person, thread, seq, text, _ = by_id[line_id]
        assert (person, thread, text) == (line.person, line.thread, line.text), line_id
        assert line.seq is None or seq == line.seq, line_id
    for text, line in acked.lines_by_text.items():
        assert state.texts[text] == 1, f"acknowledged {text!r} is stored {state.texts[text]} times"
        assert text in state.threads.get((line.person, line.thread), ()), text
    for summary_id, text in acked.summaries.items():
        assert summaries.get(summary_id) == text, f"acknowledged summary {summary_id} is lost"


def check_cache(path: Path) -> int:
    """The embedding cache (also written by the killed process) passes SQLite's check."""
    if not path.exists():
        return 0
    with closing(sqlite3.connect(path, timeout=30)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

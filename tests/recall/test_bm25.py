"""BM25 kept per scope: words cut as FTS5's ``porter unicode61`` cuts them, FTS5's scores when
the scope is the whole table, and a search that stays in its scope and in step with the store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from membot import Role
from membot.index.vectors import Scope, VectorIndex
from membot.recall.bm25 import ScopeTerms, index_words
from membot.store import NewLine, SqliteStore, ThreadKey
from membot.store.sqlite_driver import sqlite3

TEXTS = [
    "I went hiking in the mountains last weekend with my sister.",
    "Caroline's café serves crêpes; she opened it in 2021!",
    "We're adopting a dog — a grey one, named Miso.",
    "The mountains were cold, so we hiked back early.",
    "My sister is moving to Lisbon for her new job as a nurse.",
    "is us as a I",
]


def fts5(texts: list[str]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5 (text, tokenize = 'porter unicode61')")
    db.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts, start=1))
    db.execute("CREATE VIRTUAL TABLE words USING fts5vocab (t, 'instance')")
    return db


def test_words_are_cut_and_stemmed_as_fts5_cuts_them() -> None:
    db = fts5(TEXTS)
    for rowid, text in enumerate(TEXTS, start=1):
        rows = db.execute("SELECT term FROM words WHERE doc = ? ORDER BY offset", (rowid,))
        theirs = [word for (word,) in rows]
        assert index_words(text) == theirs, text


def test_scores_are_fts5s_bm25_when_the_scope_is_the_whole_table() -> None:
    db = fts5(TEXTS)
    terms = ScopeTerms()
    terms.add(range(1, len(TEXTS) + 1), TEXTS)
    for query in (["mountains", "sister"], ["miso"], ["hiking", "cold", "nurse"]):
        match = " OR ".join(f'"{word}"' for word in query)
        expected = dict(db.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ?", (match,)))
        ids, scores = terms.bm25(query)
        assert dict(zip(ids.tolist(), scores.tolist(), strict=True)) == pytest.approx(expected)


def test_words_nobody_said_match_nothing() -> None:
    terms = ScopeTerms()
    assert terms.bm25(["anything"])[0].size == 0
    terms.add([7], ["hello there"])
    assert terms.bm25(["goodbye", ""])[0].size == 0


def add(store: SqliteStore, person: str, thread: str, text: str, role: Role = Role.HUMAN) -> int:
    vector = np.ones(4, dtype=np.float32) / 2
    key = ThreadKey("membot", person, thread)
    (line,) = store.add_lines([NewLine(key, role, text, vector, 1)])
    return line.id


def test_lexical_search_stays_in_its_scope_and_in_step_with_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    hiking = add(store, "alice", "t1", "hiking in the alps with Miso")
    reply = add(store, "alice", "t1", "Miso must have loved the hiking", Role.BOT)
    add(store, "bob", "t1", "Miso is my hiking partner too")  # another person's line
    index = VectorIndex(store)
    bot = store.bot_id("membot") or 0
    alice = Scope.of(bot, store.person_id("alice"))
    hits = index.lexical(["miso", "hike"], alice, 10)
    assert {hit.line_id for hit in hits} == {hiking, reply}
    assert all(hit.score > 0 for hit in hits)
    humans_only = Scope.of(bot, store.person_id("alice"), roles=("human",))
    assert [hit.line_id for hit in index.lexical(["miso"], humans_only, 10)] == [hiking]
    thread_1 = store.thread_id(ThreadKey("membot", "alice", "t1"))
    recent = Scope.of(bot, store.person_id("alice"), feed=(thread_1, 2))
    assert [hit.line_id for hit in index.lexical(["miso"], recent, 10)] == [hiking]
    later = add(store, "alice", "t2", "Miso again")
    assert later in {hit.line_id for hit in index.lexical(["miso"], alice, 10)}
    store.forget("alice", "membot", "t1")
    assert [hit.line_id for hit in index.lexical(["miso", "hiking"], alice, 10)] == [later]
    everyone = Scope.of(bot, None)
    assert len(index.lexical(["miso"], everyone, 10)) == 2  # bob's and alice's t2
    store.close()


def test_an_empty_scope_has_no_lexical_matches(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    add(store, "alice", "t1", "hello")
    index = VectorIndex(store)
    nobody = Scope.of(store.bot_id("membot") or 0, 12345)  # a person with no lines
    assert index.lexical(["hello"], nobody, 10) == []
    assert index.lexical_scores(["hello"], nobody)[0].size == 0
    store.close()

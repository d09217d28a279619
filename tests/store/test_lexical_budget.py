"""A large shared scope's lexical search asks only its rarest words: a common word in a store
of a million lines costs FTS5 seconds to score (docs/performance.md)."""

from __future__ import annotations

import numpy as np
import pytest

from membot.model import Role
from membot.store import Store
from membot.store.base import NewLine, ThreadKey


def test_a_postings_budget_asks_the_rarest_words_that_fit(make_store) -> None:
    store: Store = make_store()  # SQLite, then PostgreSQL
    texts = [f"we walked the dog again, day {n}" for n in range(40)]
    texts += ["the dog met an otter", "an otter and a heron by the river", "a heron alone"]
    key = ThreadKey("bench", "sam", "t")
    vector = np.ones(4, dtype=np.float32)
    store.add_lines([NewLine(key, Role.HUMAN, text, vector, 5) for text in texts], ("test", 4))
    bot = store.bot_id("bench")
    assert bot is not None

    def found(terms: list[str], budget: int | None) -> set[str]:
        hits = store.lexical_search(terms, bot, limit=100, max_postings=budget)
        return {line.text for line in store.lines([line_id for line_id, _ in hits])}

    everything = found(["dog", "otter", "heron"], None)
    assert len(everything) == 43  # 41 lines hold "dog", the rest "otter" or "heron"
    # "otter" (2 lines) and "heron" (2) fit in 4; "dog" (41) does not.
    assert found(["dog", "otter", "heron"], 4) == set(texts[40:])
    assert found(["dog", "otter", "heron"], 3) == set(texts[41:])  # ties: "heron" first
    assert found(["dog"], 40) == set()  # even the rarest asked holds more: no lexical side
    assert found(["unheard"], 10) == set()


def test_among_scores_only_the_lines_named_with_the_stores_statistics(make_store) -> None:
    """A large scope's blend ranks only the lines its approximate index nominated: the store
    scores those, by id, and each keeps the BM25 it has among all the lines."""
    store: Store = make_store()  # SQLite, then PostgreSQL
    texts = ["an otter by the river", "the river again", "a heron", "an otter and a heron"]
    texts += [f"filler line {n}" for n in range(20)]
    key = ThreadKey("bench", "sam", "t")
    vector = np.ones(4, dtype=np.float32)
    added = store.add_lines([NewLine(key, Role.HUMAN, t, vector, 5) for t in texts], ("test", 4))
    ids = [line.id for line in added]
    bot = store.bot_id("bench")
    assert bot is not None
    terms = ["otter", "heron", "river"]
    everywhere = dict(store.lexical_search(terms, bot, limit=100))
    among = [ids[1], ids[3], ids[5]]  # "the river again", "an otter and a heron", a filler
    found = store.lexical_search(terms, bot, limit=100, among=among)
    assert [line_id for line_id, _ in found] == [ids[3], ids[1]]  # best first; no filler
    for line_id, score in found:
        assert score == pytest.approx(everywhere[line_id], rel=1e-9)
    assert store.lexical_search(terms, bot, limit=100, among=[]) == []
    assert store.lexical_search(terms, bot, limit=1, among=among) == found[:1]

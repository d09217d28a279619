"""A line's parts: cut from its text (sentences; windows of a long line), embedded in the
same call and stored in the same transaction as the line, on both stores; scored by recall,
forgotten with the line, cut again by ``reindex``. A line of any length up to the hard limit
is stored whole and found by a fact near its end; past the limit it is refused by name, and
an import keeps the rest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from membot import MAX_LINE_CHARS, ConfigError, Memory
from membot.index.scope import Scope
from membot.memory.importers import read_file
from membot.memory.line_parts import (
    PARTS_FROM_TOKENS,
    WINDOW_TOKENS,
    estimated_tokens,
    part_spans,
)

PARROT = "By the way, my sister's parrot is called Marmalade."
MOVES = (
    "We spent the whole weekend packing boxes and labelling them by room. The van came "
    "late on Sunday, and the driver could not find the street. " + PARROT + " The new flat "
    "has a balcony facing the river, and the kitchen is twice the size of the old one."
)


def texts_of(text: str, from_tokens: int = 0) -> list[str]:
    return [text[start:end] for start, end in part_spans(text, from_tokens=from_tokens)]


def long_document(chars: int = 60_000) -> str:
    """A pasted document of about ``chars`` characters with a personal fact near its end."""
    paragraph = (
        "Section {n}. The importer must declare the goods at the port of entry and pay the "
        "duty assessed on the customs value. Records are kept for six years.\n\n"
    )
    body = "".join(paragraph.format(n=n) for n in range(chars // 150 + 1))
    return body[: body.rindex("\n\n", 0, chars - 600) + 2] + PARROT + " Thanks!" * 60


# -- cutting -------------------------------------------------------------------------------


def test_a_line_of_several_sentences_is_cut_into_them_and_tiny_ones_join_the_next() -> None:
    assert texts_of("Yes. I moved to Denver last week! The new job is at a bakery downtown.") == [
        "Yes. I moved to Denver last week!",
        "The new job is at a bakery downtown.",
    ]
    assert texts_of("One sentence about the weather today.") == []
    short = "I moved. The new job is at a bakery downtown, near the river."
    assert texts_of(short, from_tokens=PARTS_FROM_TOKENS) == []  # its own vector reads it
    assert texts_of(MOVES, from_tokens=PARTS_FROM_TOKENS) == texts_of(MOVES)
    assert texts_of("Short. Also short.") == []  # one part, joined: the line's own vector
    assert texts_of("The first line of a list\nthe second line of the list") == [
        "The first line of a list",
        "the second line of the list",
    ]


def test_a_long_line_is_cut_into_sentences_that_cover_all_of_it() -> None:
    text = long_document()
    spans = part_spans(text)
    assert PARROT in texts_of(text)
    assert all(estimated_tokens(text[start:end]) <= WINDOW_TOKENS for start, end in spans)
    covered = "".join(text[start:end] for start, end in spans)
    assert "".join(covered.split()) == "".join(text.split())  # every word is in a part
    word = "x" * 5_000  # one "word" (a URL, a hash) longer than a window is cut too
    assert all(estimated_tokens(word[a:b]) <= WINDOW_TOKENS for a, b in part_spans(word))


# -- stored with the line, on both stores --------------------------------------------------


def parts_rows(memory: Memory) -> int:
    return len(memory.store.line_parts([line.id for line in memory.history(user="alice")]))


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_parts_are_stored_with_the_line_and_raise_its_score(memory: Memory) -> None:
    line = memory.add(MOVES, user="alice", thread="t1")
    memory.add("I like tea.", user="alice", thread="t1")  # one sentence: no parts
    (stored,) = memory.store.line_parts([line.id]).values()
    assert list(stored.bounds) == part_spans(MOVES)
    assert stored.vectors.shape == (len(stored.bounds), memory.embedder.dimension)
    assert parts_rows(memory) == 1

    query = memory.embed(["what is my sister's parrot called Marmalade"])[0]
    bot_id = memory.store.bot_id("membot") or 0
    lines = memory.recall_source.scored(query, Scope.of(bot_id, None))
    row = int(np.flatnonzero(lines.ids == line.id)[0])
    assert lines.best_parts is not None and lines.best_parts[row] > lines.scores[row]
    assert lines.with_parts(0.75).scores[row] > lines.scores[row]
    (hit,) = memory.search("parrot called Marmalade", user="alice", k=1)
    assert hit.line.id == line.id and hit.score > float(lines.scores[row])


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_forgetting_a_line_removes_its_parts(memory: Memory) -> None:
    memory.add(MOVES, user="alice", thread="t1")
    kept = memory.add(MOVES, user="alice", thread="t2")
    memory.forget(user="alice", thread="t1")
    assert list(memory.store.line_parts(range(1, kept.id + 1))) == [kept.id]
    memory.forget(user="alice")
    assert memory.store.line_parts(range(1, kept.id + 1)) == {}
    assert memory.search("parrot Marmalade", user="alice") == []


def test_forgetting_a_line_drops_its_parts_cached_embeddings(make_memory, embedder, tmp_path):
    from membot.embed import CachedEmbedder

    cached = CachedEmbedder(embedder, tmp_path / "cache.db")
    memory = make_memory(cached)
    memory.add(MOVES, user="alice", thread="t1")
    memory.forget(user="alice")
    embedder.calls.clear()
    cached.embed(texts_of(MOVES))
    assert embedder.embedded == texts_of(MOVES)  # none was left in the cache


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_reindex_cuts_and_embeds_the_parts_again(memory: Memory, make_embedder) -> None:
    line = memory.add(MOVES, user="alice", thread="t1")
    memory.add("A line of one sentence only.", user="alice", thread="t1")
    narrow = make_embedder(name="narrow", dimension=32)
    assert memory.reindex(narrow) == 2
    (stored,) = memory.store.line_parts([line.id]).values()
    assert list(stored.bounds) == part_spans(MOVES)
    assert np.allclose(stored.vectors, narrow.embed(texts_of(MOVES)), atol=1e-3)  # float16
    (hit,) = memory.search("parrot Marmalade", user="alice", k=1)
    assert hit.line.id == line.id


# -- long lines ----------------------------------------------------------------------------


def write_jsonl(path: Path, texts: list[str]) -> Path:
    with path.open("w") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text, "user": "alice", "thread": "t1"}) + "\n")
    return path


@pytest.mark.slow
def test_a_line_of_60000_characters_is_stored_whole_and_found_by_a_fact_near_its_end(
    tmp_path: Path, minilm
) -> None:
    document = long_document()
    assert len(document) > 59_000 and document.index(PARROT) > 59_000
    others = [
        "My brother keeps two cats and a dog.",
        "We talked about tariffs and customs declarations at work.",
        "The parrot at the zoo could say hello.",
    ]
    plan = read_file(write_jsonl(tmp_path / "lines.jsonl", [*others, document]), "jsonl",
                     "membot", None)  # fmt: skip
    with Memory(tmp_path / "store.db", embedder=minilm) as memory:
        assert memory.add_many(plan.lines) == 4
        (stored,) = [line for line in memory.history(user="alice") if len(line.text) > 1000]
        assert stored.text == document  # whole
        # by vectors only (no BM25): the fact is past what the line's own vector reads
        (hit,) = memory.search("What is my sister's parrot called?", user="alice", k=1)
        assert hit.line.id == stored.id


def test_a_line_over_the_limit_is_refused_by_name_and_an_import_keeps_the_rest(
    tmp_path: Path, memory: Memory
) -> None:
    huge = "A pasted log. " * (MAX_LINE_CHARS // 14 + 1)
    path = write_jsonl(tmp_path / "lines.jsonl", ["first line", huge, "third line"])
    plan = read_file(path, "jsonl", "membot", None)
    assert [line.text for line in plan.lines] == ["first line", "third line"]
    (refused,) = plan.refused
    assert refused.startswith(f"{path}:2: a line is limited to 1,000,000 characters")
    assert "'A pasted log. A pasted log." in refused and "nothing of it was stored" in refused
    assert memory.add_many(plan.lines) == 2
    with pytest.raises(ConfigError, match="in thread 't1' starting 'A pasted log"):
        memory.add(huge, user="alice", thread="t1")
    assert memory.count_lines() == 2


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_a_line_of_a_million_characters_of_words_said_once_is_stored_whole(memory) -> None:
    """PostgreSQL keeps at most 1 MB in a tsvector, which such a line needs more than: its
    full-text row is then its first 200,000 characters', and the line is stored whole."""
    text = " ".join(f"w{number:06d}x" for number in range(111_200))[:MAX_LINE_CHARS]
    line = memory.add(text, user="alice", thread="t1")
    assert memory.history(user="alice")[0].text == text and len(line.text) == MAX_LINE_CHARS
    bot_id = memory.store.bot_id("membot") or 0
    found = memory.store.lexical_search(["w000100x"], bot_id)
    assert [line_id for line_id, _ in found] == [line.id]

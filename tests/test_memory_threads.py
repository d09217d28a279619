"""What the front ends need of the library: bots, threads, names, previews, documents."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot import (
    Bot,
    ConfigError,
    LLMPool,
    MembotError,
    Memory,
    NotFoundError,
    ScriptedLLM,
    parse_settings,
)
from membot.service import create_key, list_keys


def test_bots_are_listed_found_and_required(memory: Memory):
    memory.create_bot("coach")
    assert memory.bots() == ["coach"]
    assert memory.has_bot("coach") and not memory.has_bot("nobody")
    with pytest.raises(NotFoundError, match="no bot named 'nobody'"):
        memory.require_bot("nobody")


def test_delete_bot_removes_everything_it_holds_and_nothing_else(memory: Memory, tmp_path):
    memory.create_bot("coach")
    memory.add("I run on Sundays", user="alice", thread="t1", bot="coach")
    memory.add("I swim on Mondays", user="alice", thread="t1", bot="other")
    memory.add("Bob likes tea", user="bob", thread="t9", bot="coach")
    memory.add_summary(bot="coach", user="alice", thread="t1", text="- Alice runs on Sundays")
    doc = tmp_path / "plan.md"
    doc.write_text("# Plan\nRun slowly.\n")
    memory.add_document(doc, bot="coach")

    coach_key = create_key(memory, bot="coach", user="alice")
    other_key = create_key(memory, bot="other")

    removed = memory.delete_bot("coach")

    assert removed == {"threads": 2, "lines": 2, "summaries": 1, "documents": 1}
    assert not memory.has_bot("coach")
    assert [line.text for line in memory.history(user="alice")] == ["I swim on Mondays"]
    assert memory.history(user="bob") == []
    assert memory.search("Sundays", user="alice", bot="coach") == []
    assert memory.count_lines() == 1
    with pytest.raises(NotFoundError):
        memory.delete_bot("coach")
    states = {key.id: key.state() for key in list_keys(memory)}
    assert states == {coach_key.key.id: "revoked", other_key.key.id: "active"}


def test_threads_list_a_persons_threads_with_counts(memory: Memory):
    memory.add("one", user="alice", thread="a", bot="coach")
    memory.add("two", user="alice", thread="a", bot="coach")
    memory.add("three", user="alice", thread="b", bot="coach")
    memory.add("not hers", user="bob", thread="c", bot="coach")
    threads = memory.threads(user="alice", bot="coach")
    assert [(t.name, t.lines) for t in threads] == [("a", 2), ("b", 1)]
    first = threads[0].to_json()
    assert first["user"] == "alice" and first["thread"] == "a" and first["ended_at"] is None
    assert memory.threads(user="nobody") == []


def test_thread_lines_page_by_seq(memory: Memory):
    for number in range(5):
        memory.add(f"line {number}", user="alice", thread="a")
    page = memory.thread_lines(user="alice", bot="membot", thread="a", after_seq=1, limit=2)
    assert [(line.seq, line.text) for line in page] == [(2, "line 1"), (3, "line 2")]
    with pytest.raises(NotFoundError, match="no thread 'zzz'"):
        memory.thread_lines(user="alice", bot="membot", thread="zzz")
    with pytest.raises(NotFoundError):  # another person's thread of the same name
        memory.thread_lines(user="bob", bot="membot", thread="a")


def test_new_thread_names_never_repeat_a_thread_the_person_has(memory: Memory):
    now = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    first = memory.new_thread_name(bot="membot", user="alice", now=now)
    assert first == "chat-2026-03-14-093000"  # as the web app names a new thread
    memory.add("hello", user="alice", thread=first)
    second = memory.new_thread_name(bot="membot", user="alice", now=now)
    assert first != second and second.startswith(first)
    assert memory.new_thread_name(bot="membot", user="bob", now=now) == first


def test_preview_recall_stores_nothing_and_keeps_to_the_person(memory: Memory):
    memory.add("My sister Alice lives in Lisbon", user="sam", thread="old")
    memory.add("My sister lives in Oslo", user="kim", thread="other")
    before = memory.count_lines()
    recall = memory.preview_recall("Where does my sister live", user="sam")
    assert memory.count_lines() == before
    texts = [line.text for block in recall.blocks for line in block.lines]
    assert "My sister Alice lives in Lisbon" in texts
    assert all(block.person == "sam" for block in recall.blocks)
    assert recall.blocks[0].score > 0
    assert memory.preview_recall("anything", user="nobody").blocks == ()


def test_preview_recall_leaves_the_thread_feed_out(memory: Memory):
    memory.add("My sister Alice lives in Lisbon", user="sam", thread="now")
    recall = memory.preview_recall("Where does my sister live", user="sam", thread="now")
    assert recall.blocks == ()  # the line is in the feed a turn in that thread would show


def test_add_documents_checks_every_file_before_storing_any(memory: Memory, tmp_path):
    good = tmp_path / "good.md"
    good.write_text("# Good\nSome text.\n")
    with pytest.raises(MembotError, match=r"missing\.md"):
        memory.add_documents([good, tmp_path / "missing.md"], bot="coach")
    assert memory.documents("coach") == []
    infos = memory.add_documents([good], bot="coach")
    assert [info.name for info in infos] == ["good.md"]


def test_parse_settings_is_one_parser_with_clear_errors():
    assert parse_settings(["a=1", " b =x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ConfigError, match="--set wants NAME=VALUE, got 'oops'"):
        parse_settings(["oops"])
    with pytest.raises(ConfigError, match="--set wants NAME=VALUE"):
        parse_settings(["=3"])


def test_a_bot_answers_with_the_model_its_profile_names(memory: Memory):
    pool = LLMPool()
    own, default = ScriptedLLM(["from its own model"]), ScriptedLLM(["from the default"])
    pool.put("script:own.json", own)
    memory.create_bot("poet", llm="script:own.json")
    memory.create_bot("plain")
    poet = Bot(memory, default, "poet", llms=pool)
    plain = Bot(memory, default, "plain", llms=pool)
    turn = poet.turn("hi", user="alice", thread="t1", settings={"citations": False})
    assert turn.response == "from its own model"
    assert plain.turn("hi", user="alice", thread="t1").response == "from the default"
    assert len(own.history) == 1 and len(default.history) == 1


def test_a_profile_refuses_an_unknown_model_spec(memory: Memory):
    with pytest.raises(ConfigError, match="llm must be smollm2, openai:MODEL"):
        memory.create_bot("odd", llm="gpt-4")


def test_delete_bot_drops_every_embedding_it_cached(tmp_path, embedder):
    """Only the raw texts of its lines were dropped: a line said by a named speaker is
    cached as "Speaker: text", and summaries (and their points) were never dropped."""
    import sqlite3

    from membot.embed import CachedEmbedder
    from membot.embed.cache import _digest

    cached = CachedEmbedder(embedder, tmp_path / "cache.db")
    memory = Memory(tmp_path / "m.db", embedder=cached)
    memory.create_bot("coach")
    memory.add("I run on Sundays", user="alice", thread="t1", bot="coach", speaker="Alice")
    memory.add("I swim on Mondays", user="alice", thread="t1", bot="other")
    points = "- 2026-11-23: Alice runs on Sundays\n- 2026-11-23: Alice runs fast"
    memory.add_summary(bot="coach", user="alice", thread="t1", text=points)

    memory.delete_bot("coach")

    with sqlite3.connect(tmp_path / "cache.db") as db:
        left = {row[0] for row in db.execute("SELECT digest FROM embeddings")}
    assert left == {_digest("I swim on Mondays")}
    memory.close()

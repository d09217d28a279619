"""Upgrading membot never loses a store: stores written by earlier membots' own code open with
today's, everything they held intact, and work.

Each fixture in tests/store/upgrades/ was made by the code of the last commit that wrote one
schema version (SQLite 1 to 8, PostgreSQL 1 and 2) running its own command line, by
upgrades/make_fixtures.py (run by hand; see its docstring). Beside each store, its manifest
lists what the old code stored, read back with plain SQL. Here each store is copied (a SQLite
file) or restored (a PostgreSQL dump, with pgserver's psql) and opened with today's
``Memory``, which migrates it; then every line, its vector and its full-text row, the
summaries, documents, bot settings, API keys and SMS state are looked for through today's
API, and a new turn is taken in an old thread.

The fixtures' vectors were made by the hashed bag of words of ``HashingEmbedder`` (conftest),
so the dense checks use it: a line's own text finds that line first, at a score of 1.
"""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from membot import Memory
from membot.config import BotSettings
from membot.llm.scripted import ScriptedLLM
from membot.memory.importers import read_file
from membot.memory.line_parts import part_spans
from membot.service.keys import authenticate
from membot.store.base import SmsRecord
from membot.store.migrations import MIGRATIONS
from membot.store.postgres_schema import MIGRATIONS as PG_MIGRATIONS
from membot.store.sqlite_driver import sqlite3
from membot.turn.bot import Bot

UPGRADES = Path(__file__).parent / "upgrades"
NAMES = sorted(path.stem for path in UPGRADES.glob("*_v*.json"))
ROLES = ("human", "bot", "tool", "system")


def test_there_is_a_fixture_for_every_earlier_schema_version() -> None:
    """A new migration makes the schema before it an earlier one: add its fixture to
    upgrades/make_fixtures.py (FIXTURES) and run that for it."""
    expected = [f"sqlite_v{k}" for k in range(1, len(MIGRATIONS))]
    expected += [f"postgres_v{k}" for k in range(1, len(PG_MIGRATIONS))]
    assert sorted(expected) == NAMES, "make the missing fixtures: see upgrades/make_fixtures.py"


@dataclass
class Upgraded:
    """An earlier membot's store, opened (and so migrated) by today's."""

    name: str
    manifest: dict[str, Any]
    memory: Memory
    location: str

    @property
    def level(self) -> int:
        """What the old code could store: the SQLite schema version with its tables."""
        return self.manifest["level"]

    def held(self, key: str, since: int, came: str) -> list[dict[str, Any]]:
        """The manifest's ``key``, which the fixture must hold; the test is skipped for a
        schema before ``since``, which had no such thing (``came``: when it came)."""
        if self.level < since:
            pytest.skip(came)
        assert self.manifest[key], f"the fixture should hold {key}"
        return self.manifest[key]

    def lines_of(self, bot: str, person: str) -> list[dict[str, Any]]:
        return [
            line
            for line in self.manifest["lines"]
            if (line["bot"], line["person"]) == (bot, person)
        ]

    def scopes(self) -> list[tuple[str, str]]:
        return sorted({(line["bot"], line["person"]) for line in self.manifest["lines"]})

    def stored(self, line: dict[str, Any]) -> Any:
        """Today's Line for a manifest line."""
        history = self.memory.history(user=line["person"], bot=line["bot"], thread=line["thread"])
        (found,) = [stored for stored in history if stored.seq == line["seq"]]
        return found


def restore(url: str, dump: bytes) -> None:
    """Load plain pg_dump output into the (empty) database at ``url`` with pgserver's psql."""
    from pgserver._commands import POSTGRES_BIN_PATH

    subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"],
        input=gzip.decompress(dump),
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def restored(postgres_server: str) -> Iterator[Callable[[str], str]]:
    """The URL of a new database holding a PostgreSQL fixture as its old code left it: each
    dump is restored once, into a database the test's is copied from (faster than psql)."""
    import psycopg

    templates: set[str] = set()
    copies = itertools.count()

    def database(name: str) -> str:
        template = f"upgrade_{name}"
        if template not in templates:
            with psycopg.connect(postgres_server, autocommit=True) as connection:
                connection.execute(f"CREATE DATABASE {template}")
            url = postgres_server.replace("/postgres?", f"/{template}?")
            restore(url, (UPGRADES / f"{name}.sql.gz").read_bytes())
            templates.add(template)
        copy = f"upgraded_{next(copies)}"
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {copy} TEMPLATE {template}")
        return postgres_server.replace("/postgres?", f"/{copy}?")

    yield database
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        for number in range(next(copies)):
            connection.execute(f"DROP DATABASE IF EXISTS upgraded_{number} WITH (FORCE)")
        for template in templates:
            connection.execute(f"DROP DATABASE {template} WITH (FORCE)")


@pytest.fixture(params=NAMES)
def upgraded(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Any, token_counter: Any
) -> Iterator[Upgraded]:
    name = request.param
    manifest = json.loads((UPGRADES / f"{name}.json").read_text())
    assert manifest["embedder"] == {"name": embedder.name, "dimension": embedder.dimension}
    if manifest["kind"] == "sqlite":
        path = tmp_path / "old.db"
        path.write_bytes(gzip.decompress((UPGRADES / f"{name}.db.gz").read_bytes()))
        location = str(path)
    else:
        location = request.getfixturevalue("restored")(name)
    memory = Memory(location, embedder=embedder, token_counter=token_counter)
    yield Upgraded(name, manifest, memory, location)
    memory.close()


def test_the_store_has_todays_schema_and_is_sound(upgraded: Upgraded) -> None:
    if upgraded.manifest["kind"] == "sqlite":
        with sqlite3.connect(upgraded.location) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
            # FTS5's own check: its index agrees with the text it holds.
            db.execute("INSERT INTO line_text (line_text) VALUES ('integrity-check')")
            lexical = db.execute("SELECT count(*) FROM line_text").fetchone()[0]
    else:
        import psycopg

        with psycopg.connect(upgraded.location) as db:
            version = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
            assert version == len(PG_MIGRATIONS)
            # BM25's line count, kept by triggers, is the lines' count.
            lexical = db.execute("SELECT sum(lines) FROM lexical_totals").fetchone()[0]
    assert lexical == len(upgraded.manifest["lines"])
    assert upgraded.memory.count_lines() == len(upgraded.manifest["lines"])


def sqlite_schema(path: str | Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        ).fetchall()


PG_SCHEMA = {
    "columns": "SELECT table_name, column_name, data_type, is_nullable, is_generated "
    "FROM information_schema.columns WHERE table_schema = %s",
    # Less the approximate index a store makes for its dimension with its first vectors.
    "indexes": "SELECT tablename, indexname FROM pg_indexes WHERE schemaname = %s "
    "AND indexname NOT LIKE 'lines_hnsw_%%'",
    "triggers": "SELECT event_object_table, trigger_name, action_timing, event_manipulation "
    "FROM information_schema.triggers WHERE trigger_schema = %s",
}


def postgres_schema(url: str, schema: str) -> dict[str, list[tuple]]:
    import psycopg

    with psycopg.connect(url) as db:
        return {
            name: sorted(db.execute(sql, (schema,)).fetchall()) for name, sql in PG_SCHEMA.items()
        }


def test_the_schema_is_a_new_stores(upgraded: Upgraded, tmp_path: Path) -> None:
    """Every table, column, index and trigger a store made today has: no migration was
    skipped or lost on the way."""
    if upgraded.manifest["kind"] == "sqlite":
        new = tmp_path / "new.db"
        Memory(new, embedder=upgraded.memory.embedder).close()
        made_today, upgraded_schema = sqlite_schema(new), sqlite_schema(upgraded.location)
        missing = [row[:2] for row in made_today if row not in upgraded_schema]
        extra = [row[:2] for row in upgraded_schema if row not in made_today]
        assert (missing, extra) == ([], [])
        assert upgraded_schema == made_today  # in the same order too
    else:
        from membot.store.postgres import PostgresStore

        PostgresStore(upgraded.location, schema="made_today").close()
        made_today = postgres_schema(upgraded.location, "made_today")
        for part, rows in postgres_schema(upgraded.location, "public").items():
            missing = set(made_today[part]) - set(rows)
            extra = set(rows) - set(made_today[part])
            assert (missing, extra) == (set(), set()), part


def test_every_line_is_kept_once_as_it_was(upgraded: Upgraded) -> None:
    for bot, person in upgraded.scopes():
        kept = [
            (line.thread, line.seq, line.role.value, line.text, line.ref)
            for line in upgraded.memory.history(user=person, bot=bot)
        ]
        expected = [
            (line["thread"], line["seq"], line["role"], line["text"], line["ref"])
            for line in upgraded.lines_of(bot, person)
        ]
        assert sorted(kept) == sorted(expected), (bot, person)


def test_every_line_keeps_its_vector(upgraded: Upgraded) -> None:
    """A line's own text finds it first among its person's lines, at a score of 1: its stored
    vector is the one made of its text."""
    for line in upgraded.manifest["lines"]:
        (best,) = upgraded.memory.search(
            line["text"], user=line["person"], bot=line["bot"], k=1, roles=ROLES
        )
        assert best.line.id == upgraded.stored(line).id, line["text"]
        assert best.score == pytest.approx(1.0, abs=1e-5), line["text"]


def test_earlier_lines_have_no_parts_until_a_reindex_cuts_them(upgraded: Upgraded) -> None:
    """Parts came with SQLite schema 11 and PostgreSQL 4: the lines stored before get
    theirs from `membot reindex` (a line of one short sentence has none)."""
    memory = upgraded.memory
    ids = [upgraded.stored(line).id for line in upgraded.manifest["lines"]]
    assert memory.store.line_parts(ids) == {}
    memory.reindex(memory.embedder)
    cut = {
        upgraded.stored(line).id: part_spans(line["text"]) for line in upgraded.manifest["lines"]
    }
    stored = memory.store.line_parts(ids)
    assert {line_id: list(parts.bounds) for line_id, parts in stored.items()} == {
        line_id: spans for line_id, spans in cut.items() if spans
    }


def test_every_line_keeps_its_full_text_row(upgraded: Upgraded) -> None:
    memory = upgraded.memory
    for line in upgraded.manifest["lines"]:
        bot_id = memory.store.bot_id(line["bot"])
        person_id = memory.store.person_id(line["person"])
        found = memory.store.lexical_search([line["word"]], bot_id, (person_id,), roles=ROLES)
        assert [line_id for line_id, _ in found] == [upgraded.stored(line).id], line["word"]


def test_remembered_summaries_and_ended_threads_are_kept(upgraded: Upgraded) -> None:
    memory = upgraded.memory
    for expected in upgraded.held("summaries", 2, "schema 1 had no summaries"):
        (summary,) = [
            summary
            for summary in memory.summaries(user=expected["person"], bot=expected["bot"])
            if summary.thread == expected["thread"]
        ]
        assert summary.text == expected["text"]
        assert list(summary.categories) == expected["categories"]
        # Its vectors: its first point finds it.
        point = expected["text"].splitlines()[0].removeprefix("- ")
        found = memory.search_summaries(
            memory.embed([point])[0],
            bot=expected["bot"],
            user=expected["person"],
            k=1,
            min_score=0.5,
        )
        assert [hit.id for hit, _ in found] == [summary.id]
    for ended in upgraded.manifest["ended_threads"]:
        state = memory.thread_state(bot=ended["bot"], user=ended["person"], thread=ended["thread"])
        assert state is not None and state.ended_at is not None
    for running in upgraded.manifest["running_summaries"]:
        state = memory.thread_state(
            bot=running["bot"], user=running["person"], thread=running["thread"]
        )
        assert state is not None
        assert (state.summary, state.summary_through) == (running["summary"], running["through"])


def test_a_kept_key_point_is_corrected_with_its_history(upgraded: Upgraded) -> None:
    """The corrections' table a store gets with schema 12 (PostgreSQL 5) holds a point's
    history in every upgraded store, and the summary is embedded again."""
    memory = upgraded.memory
    for expected in upgraded.held("summaries", 2, "schema 1 had no summaries"):
        person, bot = expected["person"], expected["bot"]
        first = memory.key_points(user=person, bot=bot)[0]
        fixed = memory.correct_key_point(first.summary_id, 0, "Kyoto in May.", user=person)
        assert [(c.old_text, c.new_text) for c in fixed.corrections] == [
            (first.text, "Kyoto in May.")
        ]
        query = memory.embed(["Kyoto in May."], keep=False)[0]
        found = memory.search_summaries(query, bot=bot, user=person, k=1, min_score=0.99)
        assert [hit.id for hit, _ in found] == [first.summary_id]


def test_expertise_documents_are_kept(upgraded: Upgraded) -> None:
    memory = upgraded.memory
    for expected in upgraded.held("documents", 2, "schema 1 had no expertise"):
        bot = expected["bot"]
        (info,) = [info for info in memory.documents(bot) if info.name == expected["name"]]
        assert (info.title, info.sha256) == (expected["title"], expected["sha256"])
        chunks = memory.document_chunks(expected["name"], bot=bot)
        assert [chunk.text for chunk in chunks] == expected["chunks"]
        assert info.chunks == len(expected["chunks"])
        for chunk in chunks:  # each chunk's vector is its text's (with its heading, if any)
            found = memory.search_expertise(
                memory.embed([chunk.text])[0], bot=bot, k=1, min_score=0.9
            )
            assert [hit.id for hit, _ in found] == [chunk.id]


def setting_value(name: str, value: str) -> object:
    """A value as ``bot set`` took it, in the type today's setting has."""
    default = getattr(BotSettings(), name)
    return type(default)(value)


def test_bot_settings_are_kept(upgraded: Upgraded) -> None:
    memory = upgraded.memory
    for bot, values in upgraded.manifest["settings_set"].items():
        settings = memory.bot_settings(bot)
        for name, value in values.items():  # prompt_budget of schema 1 included
            assert getattr(settings, name) == setting_value(name, value), name
        # What the old code stored is still there, names today's membot does not know too.
        stored = memory.store.bot_settings(bot)
        assert stored is not None
        assert stored.items() >= upgraded.manifest["settings_stored"][bot].items()


@pytest.mark.parametrize("upgraded", ["sqlite_v1"], indirect=True)
def test_a_setting_of_the_first_profiles_still_counts(upgraded: Upgraded) -> None:
    (value,) = [v["prompt_budget"] for v in upgraded.manifest["settings_set"].values()]
    assert upgraded.memory.bot_settings("membot").prompt_budget == int(value)


def test_api_keys_still_authenticate(upgraded: Upgraded) -> None:
    for expected in upgraded.held("keys", 3, "API keys came with schema 3"):
        key = authenticate(upgraded.memory, expected["secret"])
        assert (key.id, key.bot, key.user, key.label) == (
            expected["id"],
            expected["bot"],
            expected["user"],
            expected["label"],
        )
        assert key.state() == "active"


def test_sms_conversations_are_kept(upgraded: Upgraded) -> None:
    store = upgraded.memory.store
    came = "text conversations came with SQLite schema 6 (PostgreSQL 2)"
    for expected in upgraded.held("sms_senders", 6, came):
        state = store.sms_sender(expected["bot"], expected["sender"])
        assert state is not None
        assert {name: getattr(state, name) for name in expected} == expected
    for expected in upgraded.manifest["sms_messages"]:
        # A text sent again is answered as before: the record is found, with its replies.
        again = SmsRecord(expected["sid"], expected["bot"], expected["sender"], datetime.now(UTC))
        held = store.claim_sms_message(again, datetime(2000, 1, 1, tzinfo=UTC))
        assert held is not None
        assert (list(held.replies or ()), held.via) == (expected["replies"], expected["via"])


def test_importing_the_same_file_again_adds_only_what_had_no_key(upgraded: Upgraded) -> None:
    """Lines imported since schema 5 carry a key saying where they came from, and lines
    imported before it their ref (migration 5), so an import run again skips them; lines
    imported before schema 5 without a ref have no key and are added again."""
    memory = upgraded.memory
    plan = read_file(UPGRADES / "lines.jsonl", "jsonl", "membot", None)
    before = memory.count_lines()
    added = memory.add_many(plan.lines)
    unkeyed = [line for line in plan.lines if line.ref is None] if upgraded.level < 5 else []
    assert added == len(unkeyed)
    assert memory.count_lines() == before + added


def test_a_new_turn_in_an_old_thread_follows_its_lines(upgraded: Upgraded) -> None:
    memory, turn_of = upgraded.memory, upgraded.manifest["turn"]
    person, thread = turn_of["person"], turn_of["thread"]
    old = [line for line in upgraded.lines_of("membot", person) if line["thread"] == thread]
    last = max(line["seq"] for line in old)
    said = "After the upgrade Ottoline assigned a gavotte by Gossec."
    answer = "A gavotte suits a steady bow; count the upbeat."

    turn = Bot(memory, ScriptedLLM([answer] * 3), "membot").turn(said, user=person, thread=thread)

    assert turn.error is None
    lines = memory.history(user=person, bot="membot", thread=thread)
    assert [(line.seq, line.text) for line in lines[: len(old)]] == [
        (line["seq"], line["text"]) for line in old
    ]
    new = [(line.seq, line.role.value, line.text) for line in lines[len(old) :]]
    assert new == [(last + 1, "human", said), (last + 2, "bot", turn.response)]
    # The new line is found as the old ones are.
    (best,) = memory.search(said, user=person, k=1)
    assert best.line.seq == last + 1
    bot_id, person_id = memory.store.bot_id("membot"), memory.store.person_id(person)
    found = memory.store.lexical_search(["gavotte"], bot_id, (person_id,), roles=ROLES)
    assert {line_id for line_id, _ in found} == {line.id for line in lines[len(old) :]}


def test_the_first_profiles_settings_are_read_under_todays_names(memory) -> None:
    """Schema 1's ``recent_window`` and ``prompt_budget`` (without ``context_size``)."""
    memory.store.save_bot("old", {"recent_window": 5, "prompt_budget": 1000, "reply_tokens": 100})
    settings = memory.bot_settings("old")
    assert (settings.window_size, settings.prompt_budget, settings.context_size) == (5, 1000, 1100)
    # A value under today's name wins over the old one.
    memory.store.save_bot("new", {"recent_window": 5, "window_size": 3, "prompt_budget": 1000,
                                  "context_size": 2048})  # fmt: skip
    settings = memory.bot_settings("new")
    assert (settings.window_size, settings.context_size) == (3, 2048)


def test_a_first_profiles_setting_set_back_to_its_default_stays_so(memory) -> None:
    memory.store.save_bot("old", {"recent_window": 5, "prompt_budget": 1000})
    memory.configure_bot("old", window_size=BotSettings().window_size)
    settings = memory.bot_settings("old")
    assert settings.window_size == BotSettings().window_size and settings.prompt_budget == 1000
    stored = memory.store.bot_settings("old")
    assert "recent_window" not in stored and "prompt_budget" not in stored
    assert stored["context_size"] == 1000 + BotSettings().reply_tokens

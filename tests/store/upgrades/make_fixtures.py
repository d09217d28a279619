"""Make the stores of tests/store/test_upgrades.py with membot's own earlier code.

Run by hand from the repository root, with its git history at hand; the tests never run it:

    HF_HUB_OFFLINE=1 .venv/bin/python tests/store/upgrades/make_fixtures.py [NAME ...]

NAME is one of the keys of FIXTURES below (all of them when none is given). For each, the last
commit whose code writes that schema version (the parent of the commit that added the next
migration) is checked out into a temporary git worktree, and a child process of this script,
with ``PYTHONPATH=<worktree>/src`` so that it imports the old ``membot`` and not today's, drives
that commit's own command line (in-process, through typer's CliRunner) on a new store:

- ``import lines.jsonl`` (two people, three threads, 20 lines, some with a ref);
- ``bot set`` of a few settings (those the old ``BotSettings`` has);
- one ``say`` turn in bob's thread ``cello``, answered by the scripted LLM (``--llm script:``);
- from schema 2: ``expertise add expertise.md`` and ``end --remember yes`` of alice's thread
  ``trip``, the key points given by the scripted LLM;
- from schema 3: ``keys create`` of a person key and an admin key (their secrets go into the
  manifest: they are test fixtures);
- from schema 6: the state of two SMS senders and one answered text, through the old store's
  own methods (the command line has no way to make them without Twilio).

Every embedding is made by the same hashed bag of words as ``HashingEmbedder`` of
tests/conftest.py ("hash-bow", 256 dimensions; copied below, as the old code cannot import
today's tests): the child replaces ``membot.memory.resolve_embedder`` (and, where there is
one, ``membot.memory.facade``'s), which every old version calls to build its embedder. So the
tests read the vectors with the fast embedder the store tests use, and the bundled MiniLM is
not needed to make or to check them.

The store is then written out as it is on disk: a SQLite file, its WAL checkpointed first, as
``sqlite_vK.db.gz``; a PostgreSQL database (on a ``pgserver`` started here) as plain
``pg_dump`` output, ``postgres_vK.sql.gz``. Beside each, ``<name>.json`` is the manifest: what
the old code stored, read back from the store with plain SQL (every line; the bot's stored
settings and those set; summaries; documents; keys; SMS state; the embedder's name).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

# name: (kind, schema version, the commit whose code writes that version, and what that code
# can make, as the SQLite schema version with the same tables).
FIXTURES: dict[str, tuple[str, int, str, int]] = {
    "sqlite_v1": ("sqlite", 1, "371d58e^", 1),
    "sqlite_v2": ("sqlite", 2, "5d1d9c2^", 2),
    "sqlite_v3": ("sqlite", 3, "4a6d88e^", 3),
    "sqlite_v4": ("sqlite", 4, "9b90ab0^", 4),
    "sqlite_v5": ("sqlite", 5, "cb81e62^", 5),
    "sqlite_v6": ("sqlite", 6, "b2d46b0^", 6),
    "sqlite_v7": ("sqlite", 7, "c960c02^", 7),
    "sqlite_v8": ("sqlite", 8, "d90b17b^", 8),
    # The last commit of main before migration 10 (compact lines: branch one-sql).
    "sqlite_v9": ("sqlite", 9, "5b33f73", 9),
    # PostgreSQL schema 1 (what SQLite has after five migrations): the pg branch before its
    # merge, 102726e, which added migration 2 (SMS, as SQLite's 6).
    "postgres_v1": ("postgresql", 1, "102726e^2", 5),
    "postgres_v2": ("postgresql", 2, "d90b17b^", 8),
    # The last commit of main before line parts (SQLite migration 11, PostgreSQL 4).
    "sqlite_v10": ("sqlite", 10, "ea10306", 10),
    "postgres_v3": ("postgresql", 3, "ea10306", 10),
    # main with line parts merged, before corrections of key points (SQLite migration 12,
    # PostgreSQL 5): PostgreSQL 4 as released holds the tsvector trigger, which a commit of
    # the parts branch after ca6f07f added.
    "sqlite_v11": ("sqlite", 11, "ecde7ab", 11),
    "postgres_v4": ("postgresql", 4, "ecde7ab", 11),
    # main with corrections of key points, before linked identities (SQLite migration 13,
    # PostgreSQL 6).
    "sqlite_v12": ("sqlite", 12, "5a2478d", 12),
    "postgres_v5": ("postgresql", 5, "5a2478d", 12),
}

BOT = "membot"
TURN = ("bob", "cello")
SAID = "Ottoline wants my vibrato to start from the elbow, never the wrist."
ANSWER = "Elbow vibrato takes weeks; practise it slowly on long tones first."
REMEMBERED = ("alice", "trip")
POINTS = {
    "points": [
        "2026-05-01: Alice is planning a trip to Kyoto in April with her sister Harriet",
        "2026-05-01: Harriet is vegetarian",
    ],
    "categories": ["travel", "family"],
}
# Set with `bot set` where the old BotSettings has the name. prompt_budget is a field of the
# first version's only (later profiles have context_size, and prompt_budget is worked out).
SETTINGS: dict[str, str] = {
    "threshold": "0.42",
    "max_matches": "5",
    "expand_after": "2",
    "prompt_budget": "1024",
    "bot_name": "Sage",
    "idle_timeout_minutes": "90",
    "sms_number": "+15555550123",
}
SMS_SENDERS = [
    {
        "bot": BOT,
        "sender": "sms-5f3a9c",
        "thread": "sms-2026-05-04",
        "stopped": False,
        "asking_about": "sms-2026-05-03",
        "held_text": "Did you find the ferry times?",
        "held_sid": "SM0000000000000000000000000000aaaa",
    },
    {
        "bot": BOT,
        "sender": "sms-77be01",
        "thread": None,
        "stopped": True,
        "asking_about": None,
        "held_text": None,
        "held_sid": None,
    },
]
SMS_MESSAGE = {
    "sid": "SM0000000000000000000000000000bbbb",
    "bot": BOT,
    "sender": "sms-5f3a9c",
    "replies": ["Noted: the ferry leaves at nine."],
    "via": "twiml",
}

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """tests/conftest.py's HashingEmbedder, as it embeds: a hashed bag of words."""

    name = "hash-bow"
    dimension = 256

    def embed(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in WORD.findall(text.lower()) or ["<no words>"]:
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                row[int.from_bytes(digest, "big") % self.dimension] += 1.0
        if not texts:
            return rows
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# -- the child: runs with the old membot on its path ---------------------------------------


def inside(level: int, location: str, work: Path) -> None:
    """Make the store at ``location`` with the old code, as far as its ``level`` (the SQLite
    schema version it writes, or the one with the same tables) goes; write what only it saw
    (the keys' secrets, the settings set) to work/made.json."""
    import dataclasses
    import importlib

    from typer.testing import CliRunner

    import membot.memory

    membot.memory.resolve_embedder = lambda *args, **kwargs: HashingEmbedder()
    try:  # where Memory lives since the memory package (0.2): it imported its own name
        facade = importlib.import_module("membot.memory.facade")
        facade.resolve_embedder = membot.memory.resolve_embedder  # type: ignore[attr-defined]
    except ImportError:
        pass
    from membot.cli import app
    from membot.config import BotSettings

    runner = CliRunner()

    def cli(*args: str, llm: list[str] | None = None) -> str:
        options = ["--db", location]
        if llm is not None:
            script = work / "script.json"
            script.write_text(json.dumps(llm))
            options += ["--llm", f"script:{script}"]
        result = runner.invoke(app, [*options, *args])
        if result.exit_code != 0:
            import traceback

            trace = "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else ""
            command = " ".join(args)
            raise SystemExit(f"membot {command}: exit {result.exit_code}\n{result.output}\n{trace}")
        return result.stdout

    made: dict[str, Any] = {"settings": {}, "keys": []}
    cli("import", str(HERE / "lines.jsonl"))
    known = {item.name for item in dataclasses.fields(BotSettings)}
    for name, value in SETTINGS.items():
        if name in known:
            cli("bot", "set", BOT, name, value)
            made["settings"][name] = value
    user, thread = TURN
    cli("say", SAID, "--user", user, "--thread", thread, llm=[ANSWER])
    if level >= 2:
        cli("expertise", "add", str(HERE / "expertise.md"))
        user, thread = REMEMBERED
        ending = cli(
            "end",
            "--user",
            user,
            "--thread",
            thread,
            "--remember",
            "yes",
            "--json",
            llm=[json.dumps(POINTS)],
        )
        ending = json.loads(ending)
        if ending.get("decision") != "kept":
            raise SystemExit(f"the old code did not keep the summary: {ending}")
    if level >= 3:
        for scope in (["--bot", BOT, "--user", "alice", "--name", "alice's phone"], ["--admin"]):
            new = json.loads(cli("keys", "create", *scope, "--json"))
            made["keys"].append(new)
    if level >= 6:
        make_sms(location)
    (work / "made.json").write_text(json.dumps(made))


def make_sms(location: str) -> None:
    import inspect
    from datetime import UTC, datetime, timedelta

    from membot import Memory
    from membot.store.base import SmsRecord, SmsSender

    memory = Memory(location, embedder=HashingEmbedder())
    store = memory.store
    takes_expected = len(inspect.signature(store.save_sms_sender).parameters) > 1
    for sender in SMS_SENDERS:
        state = SmsSender(**sender)
        if takes_expected:
            assert store.save_sms_sender(state, None)
        else:
            store.save_sms_sender(state)
    now = datetime.now(UTC)
    message = SMS_MESSAGE
    record = SmsRecord(message["sid"], message["bot"], message["sender"], now)
    assert store.claim_sms_message(record, now - timedelta(days=1)) is None
    store.answer_sms_message(message["sid"], message["replies"], message["via"])
    memory.close()


# -- the manifest: what the store holds, read with plain SQL --------------------------------


def rows(db: Any, sql: str) -> list[tuple]:
    return [tuple(row) for row in db.execute(sql).fetchall()]


def records(db: Any, keys: str, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts, by the space-separated ``keys``."""
    return [dict(zip(keys.split(), row, strict=True)) for row in rows(db, sql)]


# Threads, as x, with the names of their bot (b) and person (p).
THREADS = "threads x JOIN people p ON p.id = x.person_id JOIN bots b ON b.id = x.bot_id"
LINES = (
    f"SELECT b.name, p.name, x.name, l.seq, l.role, l.text, l.ref FROM {THREADS} "
    "JOIN lines l ON l.thread_id = x.id ORDER BY b.name, p.name, x.name, l.seq"
)
SUMMARIES = (
    f"SELECT b.name, p.name, x.name, m.text, m.categories FROM {THREADS} "
    "JOIN memories m ON m.thread_id = x.id ORDER BY m.id"
)
RUNNING_SUMMARIES = (
    f"SELECT b.name, p.name, x.name, x.summary, x.summary_through FROM {THREADS} "
    "WHERE x.summary <> '' ORDER BY x.id"
)
ENDED = f"SELECT b.name, p.name, x.name FROM {THREADS} WHERE x.ended_at IS NOT NULL ORDER BY x.id"
DOCUMENTS = (
    "SELECT d.id, b.name, d.name, d.title, d.sha256 FROM documents d "
    "JOIN bots b ON b.id = d.bot_id ORDER BY d.id"
)
SMS_SENDER_COLUMNS = "bot sender thread stopped asking_about held_text held_sid"


def distinctive(text: str, others: list[str]) -> str:
    """The longest word of ``text`` whose first five letters no other text holds."""
    words = sorted({w for w in WORD.findall(text) if len(w) >= 5 and w.isalpha()}, key=len)
    for word in reversed(words):
        if not any(word[:5].lower() in other.lower() for other in others):
            return word
    raise SystemExit(f"no word of {text!r} is its own: make the line more distinctive")


def manifest(db: Any, name: str, commit: str, made: dict) -> dict[str, Any]:
    kind, version, _, level = FIXTURES[name]
    lines = records(db, "bot person thread seq role text ref", LINES)
    texts = [line["text"] for line in lines]
    for index, line in enumerate(lines):
        line["word"] = distinctive(line["text"], texts[:index] + texts[index + 1 :])
    meta = dict(rows(db, "SELECT key, value FROM meta"))
    settings = rows(db, "SELECT name, settings FROM bots")
    result: dict[str, Any] = {
        "kind": kind,
        "schema_version": version,
        "level": level,
        "made_by": commit,
        "embedder": {"name": meta.get("embedder"), "dimension": int(meta.get("dimension", 0))},
        "lines": lines,
        "settings_set": {BOT: made["settings"]},
        "settings_stored": {bot: json.loads(stored) for bot, stored in settings},
        "turn": {"person": TURN[0], "thread": TURN[1], "said": SAID, "answer": ANSWER},
        "summaries": [],
        "running_summaries": [],
        "ended_threads": [],
        "documents": [],
        "keys": [],
        "sms_senders": [],
        "sms_messages": [],
    }
    if level >= 2:
        summaries = records(db, "bot person thread text categories", SUMMARIES)
        for summary in summaries:
            summary["categories"] = json.loads(summary["categories"])
        result["summaries"] = summaries
        result["running_summaries"] = records(
            db, "bot person thread summary through", RUNNING_SUMMARIES
        )
        result["ended_threads"] = records(db, "bot person thread", ENDED)
        for document_id, bot, name, title, sha256 in rows(db, DOCUMENTS):
            chunks = rows(
                db, f"SELECT text FROM chunks WHERE document_id = {document_id} ORDER BY ord"
            )
            result["documents"].append(
                {
                    "bot": bot,
                    "name": name,
                    "title": title,
                    "sha256": sha256,
                    "chunks": [text for (text,) in chunks],
                }
            )
    if level >= 3:
        # `keys create --json` prints the key's fields with the secret as "key".
        secrets = {new["id"]: new["key"] for new in made["keys"]}
        keys = "SELECT id, bot, person, label FROM api_keys ORDER BY created_at, id"
        for key in records(db, "id bot user label", keys):
            result["keys"].append({**key, "secret": secrets[key["id"]]})
    if level >= 6:
        columns = ", ".join(SMS_SENDER_COLUMNS.split())
        senders = f"SELECT {columns} FROM sms_senders ORDER BY sender"
        for sender in records(db, SMS_SENDER_COLUMNS, senders):
            result["sms_senders"].append({**sender, "stopped": bool(sender["stopped"])})
        messages = "SELECT sid, bot, sender, replies, via FROM sms_messages ORDER BY sid"
        for message in records(db, "sid bot sender replies via", messages):
            result["sms_messages"].append({**message, "replies": json.loads(message["replies"])})
    return result


# -- the parent: worktrees, stores, files ---------------------------------------------------


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def run_old(tree: Path, level: int, location: str, work: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "HF_HUB_OFFLINE": "1",
        "HOME": str(work / "home"),
        "MEMBOT_CACHE_DIR": str(work / "cache"),
        "XDG_DATA_HOME": str(work / "data"),
        "XDG_CONFIG_HOME": str(work / "config"),
    }
    for name in ("MEMBOT_DB", "MEMBOT_EMBEDDER", "MEMBOT_LLM", "OPENAI_API_KEY"):
        env.pop(name, None)
    command = [sys.executable, __file__, "--inside", str(level), location, str(work)]
    subprocess.run(command, env=env, check=True, cwd=work)
    return json.loads((work / "made.json").read_text())


def make_sqlite(name: str, commit: str, tree: Path, work: Path) -> None:
    from membot.store.sqlite_driver import sqlite3

    _, version, _, level = FIXTURES[name]
    path = work / "store.db"
    made = run_old(tree, level, str(path), work)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert db.execute("PRAGMA user_version").fetchone()[0] == version, "not the schema version"
    result = manifest(db, name, commit, made)
    db.close()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was not checkpointed"
    write(name, "db", path.read_bytes(), result)


def make_postgres(name: str, commit: str, tree: Path, work: Path) -> None:
    import psycopg

    _, version, _, level = FIXTURES[name]
    url = postgres(work)
    made = run_old(tree, level, url, work)
    with psycopg.connect(url) as db:
        (found,) = db.execute("SELECT max(version) FROM schema_version").fetchone()
        assert found == version, "not the schema version"
        result = manifest(db, name, commit, made)
    dump = subprocess.run(
        [str(pg_bin() / "pg_dump"), "--no-owner", "--no-privileges", "-d", url],
        check=True,
        capture_output=True,
    ).stdout
    write(name, "sql", dump, result)


_server: Any = None
_server_folder: Path | None = None


def pg_bin() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return POSTGRES_BIN_PATH


def postgres(work: Path) -> str:
    """A new database on a pgserver started for this run (as tests/conftest.py starts one)."""
    global _server, _server_folder
    import psycopg

    if _server is None:
        folder = _server_folder = Path(tempfile.mkdtemp(prefix="membot-fixtures-pg-"))
        os.environ["XDG_RUNTIME_DIR"] = str(folder)
        import pgserver

        _server = pgserver.get_server(folder / "data", cleanup_mode="delete")
        with psycopg.connect(_server.get_uri(), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    database = f"fixture_{work.name.replace('-', '_')}"
    with psycopg.connect(_server.get_uri(), autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {database}")
    return _server.get_uri().replace("/postgres?", f"/{database}?")


def write(name: str, suffix: str, data: bytes, result: dict) -> None:
    (HERE / f"{name}.{suffix}.gz").write_bytes(gzip.compress(data, mtime=0))
    (HERE / f"{name}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(result['lines'])} lines, made by {result['made_by'][:10]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=", ".join(FIXTURES))
    parser.add_argument("--inside", nargs=3, metavar=("LEVEL", "LOCATION", "WORK"))
    args = parser.parse_args()
    if args.inside:
        level, location, work = args.inside
        inside(int(level), location, Path(work))
        return
    unknown = set(args.names) - set(FIXTURES)
    if unknown:
        parser.error(f"no such fixture: {', '.join(sorted(unknown))}")
    for name in args.names or FIXTURES:
        kind, _, spec, _ = FIXTURES[name]
        commit = git("rev-parse", spec)
        work = Path(tempfile.mkdtemp(prefix=f"membot-{name.replace('_', '-')}-"))
        tree = work / "tree"
        git("worktree", "add", "--detach", str(tree), commit)
        try:
            maker = make_sqlite if kind == "sqlite" else make_postgres
            maker(name, commit, tree, work)
        finally:
            git("worktree", "remove", "--force", str(tree))
            shutil.rmtree(work, ignore_errors=True)
    if _server is not None:
        _server.cleanup()
        shutil.rmtree(_server_folder, ignore_errors=True)


if __name__ == "__main__":
    main()

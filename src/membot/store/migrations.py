"""Versioned schema of the SQLite store. Append a migration; never edit a released one.

``PRAGMA user_version`` holds the number of migrations applied.
"""

from __future__ import annotations

from membot.errors import StoreError
from membot.store.sqlite_driver import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: bots, people, threads, lines with vectors and a lexical index, relevance buffers.
    """
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE bots (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        settings TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    );
    CREATE TABLE people (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL
    );
    CREATE TABLE threads (
        id INTEGER PRIMARY KEY,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (bot_id, person_id, name)
    );
    CREATE TABLE lines (
        id INTEGER PRIMARY KEY,
        thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL CHECK (seq >= 1),
        role TEXT NOT NULL CHECK (role IN ('human', 'bot', 'tool', 'system')),
        speaker TEXT,
        text TEXT NOT NULL,
        ref TEXT,
        created_at TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        UNIQUE (thread_id, seq)
    );
    CREATE INDEX lines_by_bot ON lines (bot_id, id);
    CREATE INDEX lines_by_person ON lines (person_id, thread_id);
    CREATE TABLE line_vectors (
        line_id INTEGER PRIMARY KEY REFERENCES lines(id) ON DELETE CASCADE,
        vector BLOB NOT NULL
    );
    CREATE VIRTUAL TABLE line_text USING fts5 (text, tokenize = 'porter unicode61');
    CREATE TRIGGER lines_forget_text AFTER DELETE ON lines BEGIN
        DELETE FROM line_text WHERE rowid = old.id;
    END;
    CREATE TABLE buffer_entries (
        thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        source_thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        score REAL NOT NULL,
        matched_seqs TEXT NOT NULL,
        PRIMARY KEY (thread_id, position)
    );
    """,
    # 2: ended threads and running summaries; remembered summaries; a bot's expertise.
    """
    ALTER TABLE threads ADD COLUMN ended_at TEXT;
    ALTER TABLE threads ADD COLUMN summary TEXT NOT NULL DEFAULT '';
    ALTER TABLE threads ADD COLUMN summary_through INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        thread_id INTEGER NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('summary')),
        text TEXT NOT NULL,
        categories TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        covers_from TEXT NOT NULL,
        covers_to TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE INDEX memories_by_person ON memories (bot_id, person_id);
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        title TEXT NOT NULL,
        media TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        added_at TEXT NOT NULL,
        UNIQUE (bot_id, name)
    );
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        ord INTEGER NOT NULL,
        heading TEXT,
        text TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        vector BLOB NOT NULL,
        UNIQUE (document_id, ord)
    );
    CREATE INDEX chunks_by_bot ON chunks (bot_id, id);
    """,
    # 3: API keys of `membot serve`, kept as a SHA-256 of the secret. Bot and person are names,
    # not references: a key may be made before its bot or person has said anything, and
    # `forget` (which deletes a person with nothing left) leaves keys to `membot keys revoke`.
    """
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        bot TEXT,
        person TEXT,
        label TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        revoked_at TEXT,
        last_used_at TEXT,
        CHECK (person IS NULL OR bot IS NOT NULL)
    );
    CREATE UNIQUE INDEX api_keys_by_hash ON api_keys (hash);
    """,
    # 4: a search reads one scope's lines (a person's with a bot, or a bot's): by this index
    # it costs what the scope holds, not what the store holds.
    """
    CREATE INDEX lines_by_scope ON lines (bot_id, person_id, id);
    """,
    # 5: where an imported line came from (its ref, or its place and text in the file), unique
    # per thread, so an import run again skips the lines it already stored. Lines imported
    # before keep their ref as their key (the first of a thread's duplicates, where an import
    # was run twice); lines said in a turn have none.
    """
    ALTER TABLE lines ADD COLUMN source_key TEXT;
    UPDATE lines SET source_key = 'ref:' || ref WHERE id IN (
        SELECT MIN(id) FROM lines WHERE ref IS NOT NULL GROUP BY thread_id, ref
    );
    CREATE UNIQUE INDEX lines_by_source ON lines (thread_id, source_key)
        WHERE source_key IS NOT NULL;
    """,
    # 6: text conversations (SMS). A sender is a person's name in the store (a keyed hash of
    # their number, never the number): whether they said STOP, their current thread, and the
    # "remember the last one?" question they owe an answer to, with the text that came
    # meanwhile. Each text received is recorded by Twilio's MessageSid, with what it was
    # answered, so a text sent again is answered the same way and stored once; records are
    # kept a day (Twilio retries within minutes). IF NOT EXISTS: a store taken back to an older
    # schema version by hand (tests/test_import_resume.py does) still has these tables.
    """
    CREATE TABLE IF NOT EXISTS sms_senders (
        bot TEXT NOT NULL,
        sender TEXT NOT NULL,
        thread TEXT,
        stopped INTEGER NOT NULL DEFAULT 0,
        asking_about TEXT,
        held_text TEXT,
        held_sid TEXT,
        PRIMARY KEY (bot, sender)
    );
    CREATE TABLE IF NOT EXISTS sms_messages (
        sid TEXT PRIMARY KEY,
        bot TEXT NOT NULL,
        sender TEXT NOT NULL,
        received_at TEXT NOT NULL,
        replies TEXT,
        via TEXT CHECK (via IN ('twiml', 'api'))
    );
    CREATE INDEX IF NOT EXISTS sms_messages_by_time ON sms_messages (received_at);
    CREATE INDEX IF NOT EXISTS sms_messages_by_sender ON sms_messages (sender);
    """,
    # 7: a forgotten line's words leave the full-text index when the line is deleted (FTS5's
    # secure-delete, SQLite 3.42+), instead of an 'optimize' pass over the whole index after
    # each forget; that one merges what earlier forgets left behind.
    """
    INSERT INTO line_text (line_text, rank) VALUES ('secure-delete', 1);
    INSERT INTO line_text (line_text) VALUES ('optimize');
    """,
    # 8: each bot's lines have a generation of their own (SqliteStore.bot_generation), so a
    # forget in one bot leaves the approximate index of another standing. A store made
    # before has had its removals anywhere: every bot is stamped with its generation.
    """
    INSERT OR IGNORE INTO meta (key, value)
        SELECT 'generation:all-bots', value FROM meta WHERE key = 'generation';
    """,
    # 9: which process answers a text while it is answered ("answering:HOST:PID"), so a
    # retry can tell one whose answerer died (membot.sms.claim_sms). A table of its own,
    # made if missing like every table here, so two processes opening the store at once
    # both get through (an ALTER TABLE failed in the second).
    """
    CREATE TABLE IF NOT EXISTS sms_answerers (
        sid TEXT PRIMARY KEY REFERENCES sms_messages (sid) ON DELETE CASCADE,
        answerer TEXT NOT NULL
    );
    """,
    # 10: the full-text index reads each line's text from `lines` (FTS5's external content)
    # instead of keeping a copy of its own: 139 bytes a line of LoCoMo's, the whole text
    # again. The index is rebuilt from `lines` in this transaction; a line's words leave it
    # when the line is deleted (FTS5's 'delete' needs the text as it was), securely as before.
    """
    DROP TRIGGER lines_forget_text;
    DROP TABLE line_text;
    CREATE VIRTUAL TABLE line_text USING fts5 (
        text, content = 'lines', content_rowid = 'id', tokenize = 'porter unicode61'
    );
    INSERT INTO line_text (line_text, rank) VALUES ('secure-delete', 1);
    INSERT INTO line_text (line_text) VALUES ('rebuild');
    CREATE TRIGGER lines_forget_text AFTER DELETE ON lines BEGIN
        INSERT INTO line_text (line_text, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    """,
    # 11: a line's parts (its sentences, or windows of a long line: membot.memory.line_parts),
    # each with a vector, so a fact said in passing, or past the 256 word pieces the line's
    # own vector reads, is found. One row a line, keyed by the line (no second index): the
    # parts' (start, end) character offsets as int32 pairs, their vectors as float16 rows.
    # Deleted with the line. Lines stored before get theirs from `membot reindex`.
    """
    CREATE TABLE IF NOT EXISTS line_parts (
        line_id INTEGER PRIMARY KEY REFERENCES lines(id) ON DELETE CASCADE,
        bounds BLOB NOT NULL,
        vectors BLOB NOT NULL
    );
    """,
    # 12: corrections of kept key points, as the person made them: the point as it read and
    # as it reads since (membot.memory.person_view). The summary itself holds the new text;
    # these rows are its history, deleted with the summary, or with the point when the
    # person deletes it.
    """
    CREATE TABLE IF NOT EXISTS memory_corrections (
        id INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        old_text TEXT NOT NULL,
        new_text TEXT NOT NULL,
        corrected_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS memory_corrections_by_memory
        ON memory_corrections (memory_id, id);
    """,
    # 13: identities linked as one person (membot.memory.person_links), per bot: each row puts
    # a person in a group of its bot (a group of one is no row). Link codes are kept only as
    # a hash, with whom they link and until when; failed entries, by the name that entered
    # them (an identity not yet stored may enter a code), for the rate limit.
    """
    CREATE TABLE IF NOT EXISTS person_links (
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        group_id INTEGER NOT NULL,
        linked_at TEXT NOT NULL,
        PRIMARY KEY (bot_id, person_id)
    );
    CREATE INDEX IF NOT EXISTS person_links_by_group ON person_links (bot_id, group_id);
    CREATE TABLE IF NOT EXISTS link_codes (
        hash TEXT PRIMARY KEY,
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person_id INTEGER NOT NULL REFERENCES people(id) ON DELETE CASCADE,
        made_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
    );
    CREATE INDEX IF NOT EXISTS link_codes_by_person ON link_codes (bot_id, person_id);
    CREATE TABLE IF NOT EXISTS link_failures (
        bot_id INTEGER NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
        person TEXT NOT NULL,
        failed_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS link_failures_by_person ON link_failures (bot_id, person);
    """,
)

# The meta keys holding the store's generation when every bot's lines, or one bot's, were
# last removed or replaced (SqliteStore.bot_generation).
ALL_BOTS_MOVED = "generation:all-bots"


def bot_moved(bot_id: int) -> str:
    return f"generation:bot:{bot_id}"


# The meta key holding the highest line id ever given out, once lines were removed: SQLite
# gives a new row the highest id left plus one, so removing the newest lines would hand their
# ids to the next ones (SqliteStore._retire_line_ids).
LAST_LINE_ID = "last-line-id"


def migrate(connection: sqlite3.Connection) -> int:
    """Apply the migrations this file has and the database lacks, all in one transaction (a
    new store's schema is made whole or not at all, even if the process is killed while
    making it); return the new version."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise StoreError(
            f"this store has schema version {version}, newer than this membot knows "
            f"({len(MIGRATIONS)}): upgrade membot"
        )
    if version == len(MIGRATIONS):
        return version
    scripts = "\n".join(MIGRATIONS[version:])
    try:
        connection.executescript(
            f"BEGIN IMMEDIATE;\n{scripts}\nPRAGMA user_version = {len(MIGRATIONS)};\nCOMMIT;"
        )
    except sqlite3.OperationalError:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        # Another process applied migrations between our version check and our lock: apply
        # what is left, if anything.
        if connection.execute("PRAGMA user_version").fetchone()[0] > version:
            return migrate(connection)
        raise
    return len(MIGRATIONS)

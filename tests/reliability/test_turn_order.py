"""Two processes answering turns of one thread at the same moment (``membot serve --workers
2``, or the command line beside a server): each reply follows its own line."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import HashingEmbedder

from membot import Memory, ScriptedLLM
from membot.store import ThreadKey
from membot.store.postgres_turns import TURN_LOCK_CLASS

TESTS = str(Path(__file__).resolve().parents[1])
pytestmark = pytest.mark.slow

# A process that says three lines in thread "t" of "sam", its model slow enough (0.3 s a
# reply) for the other process's turns to arrive while it writes.
TALKER = """
import sys, time
sys.path.insert(0, sys.argv[5])
from conftest import HashingEmbedder
from membot import Bot, Memory, ScriptedLLM

class Slow(ScriptedLLM):
    def complete(self, messages, max_tokens, *, schema=None):
        time.sleep(0.3)
        said = messages[-1]["content"]
        return f"reply to {said}"

memory = Memory(sys.argv[1], embedder=HashingEmbedder())
bot = Bot(memory, Slow())
open(sys.argv[3], "w").close()  # ready
while not __import__("os").path.exists(sys.argv[4]):  # go
    time.sleep(0.005)
for n in range(3):
    bot.turn(f"{sys.argv[2]}{n}", user="sam", thread="t")
"""


class SlowModel(ScriptedLLM):
    """Answers ``reply``; a turn whose line holds ``slow`` takes ``seconds``, and
    ``writing`` is set once such a turn reaches the model."""

    def __init__(self, slow: str, seconds: float, reply: str) -> None:
        super().__init__()
        self.slow, self.seconds, self.reply = slow, seconds, reply
        self.writing = threading.Event()

    def complete(self, messages, max_tokens, *, schema=None):
        if self.slow in messages[-1]["content"]:
            self.writing.set()
            time.sleep(self.seconds)
        return self.reply


def turn_in_the_background(bot, text: str, *, user: str, thread: str) -> threading.Thread:
    """A turn started in another thread, returned once its model is writing."""
    turn = threading.Thread(target=bot.turn, args=(text,), kwargs={"user": user, "thread": thread})
    turn.start()
    assert bot.llm.writing.wait(10)
    return turn


def test_two_processes_turns_of_one_thread_keep_each_reply_after_its_line(
    store_url: str, tmp_path: Path
):
    """Before the store's turn lock, the lines of both came first and the replies after
    them (HHBB), each reply after the other process's line. Once per store kind: a SQLite
    file (flock) and a PostgreSQL database (a transaction's advisory lock)."""
    db = store_url
    go = tmp_path / "go"
    talkers = []
    for name in ("a", "b"):
        ready = tmp_path / f"{name}.ready"
        command = [sys.executable, "-c", TALKER, db, name, str(ready), str(go), TESTS]
        talkers.append((subprocess.Popen(command, stderr=subprocess.PIPE, text=True), ready))
    for process, ready in talkers:
        while not ready.exists():  # a talker that died says why, rather than a wait for good
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.001)
    go.touch()
    for process, _ in talkers:
        assert process.wait(timeout=120) == 0, process.stderr.read()
    memory = Memory(db, embedder=HashingEmbedder())
    lines = memory.history(user="sam", thread="t")
    memory.close()
    assert len(lines) == 12
    for said, reply in zip(lines[::2], lines[1::2], strict=True):
        assert (said.role, reply.role) == ("human", "bot")
        assert reply.text == f"reply to {said.text}", [line.text for line in lines]
    # A turn that waited is timed when its turn came: the thread's times follow its order.
    moments = [line.created_at for line in lines]
    assert moments == sorted(moments)


def test_a_postgres_turn_waits_for_its_thread_only_and_then_says_why(postgres_url: str):
    """A second turn of a thread waits for the first; past its wait, a clear error. Another
    thread is not held up. A holder whose connection PostgreSQL ended (a process that died,
    an operator's idle timeout) lets the thread go, and its own turn still ends cleanly."""
    from membot.errors import StoreError
    from membot.store.postgres import PostgresStore

    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        with (
            first.turn_lock(ThreadKey("b", "sam", "t")),
            second._turns.held(("b", "sam", "t"), timeout=0.3),
        ):
            pytest.fail("a second turn of the thread went ahead")
    except StoreError as error:
        assert "another turn of this thread is still being answered after 0.3 s" in str(error)
    else:
        pytest.fail("no error")
    try:
        with first.turn_lock(ThreadKey("b", "sam", "t")):
            with second._turns.held(("b", "sam", "other"), timeout=0.3):
                pass  # another thread: not held up
            # The holder has no transaction id, so it holds back no other process's look
            # for new lines (pg_snapshot_xmin counts running transaction ids only).
            with second._pool.connection() as db:
                holders = db.execute(
                    "SELECT a.backend_xid, a.state FROM pg_stat_activity a "
                    "JOIN pg_locks l ON l.pid = a.pid WHERE l.locktype = 'advisory' "
                    "AND l.classid = %s AND l.granted",
                    (TURN_LOCK_CLASS,),
                ).fetchall()
            assert holders == [(None, "idle in transaction")]
            with second._pool.connection() as db:
                done = db.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
                horizon = db.execute(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
                ).fetchone()[0]
            assert int(horizon) > int(done)  # a transaction that ended is not waited for
            with second._pool.connection() as db:
                db.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND classid = %s AND granted",
                    (TURN_LOCK_CLASS,),
                )
            with second._turns.held(("b", "sam", "t"), timeout=5):
                pass  # the thread is free again
    finally:
        first.close()
        second.close()


def test_an_import_into_a_thread_waits_for_the_turn_under_way(store_url: str):
    """An import batch stored while the model wrote came between the turn's line and its
    reply; it now waits for the reply (on either store)."""
    from membot import Bot, LineInput

    memory = Memory(store_url, embedder=HashingEmbedder())
    try:
        bot = Bot(memory, SlowModel("the line", 0.5, "the reply"))
        turn = turn_in_the_background(bot, "the line", user="sam", thread="t")
        imported = LineInput("an imported line", "sam", "t", "human", bot.name)
        assert memory.add_many([imported]) == 1
        turn.join(10)
        said = [line.text for line in memory.history(user="sam", thread="t")]
        assert said == ["the line", "the reply", "an imported line"]
    finally:
        memory.close()


@pytest.mark.parametrize("through", ["tool result", "library"])
def test_a_line_added_waits_for_the_turn_under_way(store_url: str, through: str):
    """A tool's result posted while the model wrote came between the turn's line and its
    reply (a review's probe over REST), and so did a line of the library's ``Memory.add``
    (a session's note); both now follow the reply."""
    from membot import Bot

    memory = Memory(store_url, embedder=HashingEmbedder())
    try:
        bot = Bot(memory, SlowModel("the line", 0.5, "the reply"))
        turn = turn_in_the_background(bot, "the line", user="sam", thread="t")
        if through == "tool result":
            bot.add_tool_result("22 degrees", user="sam", thread="t", tool="weather")
        else:
            memory.add("22 degrees", user="sam", thread="t", role="bot")
        turn.join(10)
        said = [line.text for line in memory.history(user="sam", thread="t")]
        assert said == ["the line", "the reply", "22 degrees"]
    finally:
        memory.close()


def test_a_line_added_inside_its_threads_turn_lock_does_not_wait_for_itself(store_url: str):
    """Memory.add takes the thread's turn lock: inside that lock (as MCP's remember held
    it) it waited 180 s for itself, then failed (a review). A bad line is refused first."""
    from membot import ConfigError

    memory = Memory(store_url, embedder=HashingEmbedder())
    try:
        started = time.monotonic()
        with memory.turn_lock(bot="membot", user="sam", thread="t"):
            memory.add("mine", user="sam", thread="t")
        assert time.monotonic() - started < 10
        with pytest.raises(ConfigError, match="a line needs a user name"):
            memory.add("hi", user=None, thread="t")  # type: ignore[arg-type]
        assert [line.text for line in memory.history(user="sam")] == ["mine"]
    finally:
        memory.close()


@pytest.mark.parametrize("through", ["bot", "service"])
def test_a_turn_waiting_while_its_bot_is_deleted_does_not_make_it_again(
    store_url: str, through: str
):
    """A turn waiting behind another when its bot was deleted stored its line and reply,
    and the bot came back with a default profile (a probe, with a revoked person key). A
    server's turn waits first for its own lock, outside Bot.turn (a review)."""
    from membot import Bot, NotFoundError
    from membot.server.service import Service

    memory = Memory(store_url, embedder=HashingEmbedder())
    try:
        memory.create_bot("coach", remember_policy="never keep health details")
        model = SlowModel("the line", 0.8, "the reply")
        if through == "bot":
            take_turn = Bot(memory, model, "coach").turn
        else:
            service = Service(memory, llm=model)

            def take_turn(text: str, **where: str):
                return service.turn("coach", text=text, **where)

        first = threading.Thread(target=take_turn, args=("the line",),
                                 kwargs={"user": "sam", "thread": "t"})  # fmt: skip
        first.start()
        assert model.writing.wait(10)
        failed: list[Exception] = []

        def waiting() -> None:
            try:
                take_turn("a line that waits", user="sam", thread="t")
            except NotFoundError as error:
                failed.append(error)

        second = threading.Thread(target=waiting)
        second.start()
        time.sleep(0.2)  # the second turn waits for the first's lock
        memory.delete_bot("coach")
        first.join(10)
        second.join(10)
        assert [str(error) for error in failed] == [
            "no bot named 'coach': it was deleted meanwhile"
        ]
        assert memory.bots() == [] and memory.count_lines() == 0
    finally:
        memory.close()


def test_a_postgres_turn_lock_says_what_it_waited_for(postgres_url: str):
    """With every turn-lock connection in use, the error says so (not "another turn of
    this thread"); a database's short statement_timeout does not cut a turn's wait short."""
    import psycopg

    from membot.errors import StoreError
    from membot.store.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    store._turns.size = 1  # before its pool opens at the first turn
    try:
        with (
            store.turn_lock(ThreadKey("b", "sam", "t")),
            pytest.raises(StoreError, match=r"all 1 of the turn locks' connections"),
            store._turns.held(("b", "ann", "u"), timeout=0.3),
        ):
            pass
    finally:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f"ALTER DATABASE {name} SET statement_timeout = '50ms'")
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        with first.turn_lock(ThreadKey("b", "sam", "t")):
            started = time.monotonic()
            with (
                pytest.raises(StoreError, match="another turn of this thread"),
                second._turns.held(("b", "sam", "t"), timeout=0.5),
            ):
                pass
            assert time.monotonic() - started >= 0.45
    finally:
        first.close()
        second.close()


def test_a_short_idle_in_transaction_timeout_is_warned_of(postgres_url: str, caplog):
    """It would end a turn's lock while the model writes (docs/deploy.md)."""
    import logging

    import psycopg

    from membot.store.postgres import PostgresStore

    with psycopg.connect(postgres_url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f"ALTER DATABASE {name} SET idle_in_transaction_session_timeout = '30s'")
    with caplog.at_level(logging.WARNING, logger="membot.store.postgres_turns"):
        PostgresStore(postgres_url).close()
    assert "idle_in_transaction_session_timeout is 30 s on this database" in caplog.text


def test_an_import_waiting_for_one_thread_holds_up_no_other(store_url: str):
    """An import into a talking thread and another thread waited holding the other
    thread's lock, so that thread's turns waited for someone else's model too."""
    from membot import Bot, LineInput
    from membot.store.sqlite_lock import TurnLocks

    assert TurnLocks("x").bucket(("membot", "sam", "t")) != TurnLocks("x").bucket(
        ("membot", "ann", "u")
    )
    memory = Memory(store_url, embedder=HashingEmbedder())
    try:
        bot = Bot(memory, SlowModel("the slow one", 1.5, "a reply"))
        slow = turn_in_the_background(bot, "the slow one", user="sam", thread="t")
        both = [LineInput(f"imported into {who}", who, thread, "human", bot.name)
                for who, thread in (("sam", "t"), ("ann", "u"))]  # fmt: skip
        importing = threading.Thread(target=memory.add_many, args=(both,))
        importing.start()
        time.sleep(0.2)  # the import is waiting for sam's thread now

        bot.turn("a quick one", user="ann", thread="u")

        assert slow.is_alive(), "ann's turn waited for sam's model"
        slow.join(10)
        importing.join(10)
        assert [line.text for line in memory.history(user="sam", thread="t")] == [
            "the slow one",
            "a reply",
            "imported into sam",
        ]
    finally:
        memory.close()

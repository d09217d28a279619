"""Bot.turn(): store → recall → assemble → LLM → store the reply → Turn, with its whole trace."""

from __future__ import annotations

import threading

import pytest

from membot import Bot, ConfigError, Memory, Role, ScriptedLLM, StoreError, Turn, TurnFailedError
from membot.turn.replies import reply_schema
from membot.turn.templates import DEFAULTS

TURN_KEYS = {
    "response",
    "bot",
    "user",
    "thread",
    "line",
    "reply_line",
    "recalled",
    "matches",
    "prompt",
    "messages",
    "tokens",
    "timings_ms",
    "cut",
    "error",
    # chatState's trace
    "score",
    "citations",
    "feed",
    "story",
    "history_match_string",
    "history_matches",
    "history_hints",
    "expertise_match_string",
    "expertise_matches",
    "expertise_hints",
    "notes",
}
TIMING_KEYS = {"embed", "search", "assemble", "store", "llm", "relevance_check", "summarize",
               "memory_total"}  # fmt: skip


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_a_turn_stores_both_lines_and_answers(memory: Memory) -> None:
    llm = ScriptedLLM(["Nice to meet you, Alice."])
    turn = Bot(memory, llm).turn("Hi, I am Alice.", user="alice", thread="t1")

    assert isinstance(turn, Turn)
    assert turn.response == "Nice to meet you, Alice."
    assert (turn.human_line.seq, turn.human_line.role) == (1, Role.HUMAN)
    assert turn.bot_line is not None
    assert (turn.bot_line.seq, turn.bot_line.role) == (2, Role.BOT)
    assert [(line.role, line.text) for line in memory.history(user="alice")] == [
        (Role.HUMAN, "Hi, I am Alice."),
        (Role.BOT, "Nice to meet you, Alice."),
    ]
    ((system, user),) = llm.history
    assert user == {"role": "user", "content": "Hi, I am Alice."}
    assert system["role"] == "system" and "current conversation" in system["content"]
    assert turn.messages == (system, user)
    assert turn.tokens["prompt"] <= turn.tokens["budget"] == 2048 - 256
    assert turn.tokens["response"] == turn.bot_line.tokens
    assert set(turn.timings_ms) == TIMING_KEYS
    assert all(value >= 0 for value in turn.timings_ms.values())
    assert turn.error is None


def test_turn_to_json_carries_the_whole_trace(memory: Memory) -> None:
    bot = Bot(memory, ScriptedLLM(["Logistics."]))
    bot.turn("I work in logistics", user="alice", thread="t1")
    memory.configure_bot(threshold=0.3)
    data = bot.turn("where do I work", user="alice", thread="t2").to_json()

    assert set(data) == TURN_KEYS
    assert set(data["timings_ms"]) == TIMING_KEYS
    assert {"prompt", "budget", "line", "recalled", "response"} <= set(data["tokens"])
    assert data["line"]["seq"] == 1 and data["line"]["created_at"].endswith("Z")
    (block,) = data["recalled"]
    assert block["thread"] == "t1" and block["carried_over"] is False
    assert [line["text"] for line in block["lines"]] == ["I work in logistics", "Logistics."]
    assert set(block["lines"][0]) == {
        "id",
        "person",
        "seq",
        "role",
        "speaker",
        "text",
        "created_at",
        "ref",
    }
    assert data["matches"][0]["text"] == "I work in logistics"
    assert 'thread "t1"]' in data["prompt"]


def test_a_failing_llm_keeps_the_persons_line(memory: Memory) -> None:
    bot = Bot(memory, ScriptedLLM(["!error the model is down", "Back again."]))

    failed = bot.turn("Are you there?", user="alice", thread="t1")

    assert failed.error == "the model is down"
    assert failed.response == "" and failed.bot_line is None
    assert [line.text for line in memory.history(user="alice")] == ["Are you there?"]
    again = bot.turn("Hello?", user="alice", thread="t1")
    assert [line.seq for line in memory.history(user="alice")] == [1, 2, 3]
    assert again.response == "Back again."


@pytest.mark.parametrize(
    "failure", [StoreError("the store failed: busy; try again"), ZeroDivisionError("a bug")]
)
def test_a_failure_after_the_line_is_stored_names_the_stored_line(memory, monkeypatch, failure):
    """A busy store or a bug after the line was stored used to surface as itself ("try
    again"), and a client that tried again stored the line twice."""
    bot = Bot(memory, ScriptedLLM())

    def recall(*args, **kwargs):
        raise failure

    monkeypatch.setattr(memory, "recall", recall)
    with pytest.raises(TurnFailedError) as failed:
        bot.turn("Are you there?", user="sam", thread="t1")
    assert (failed.value.thread, failed.value.seq, failed.value.failure) == ("t1", 1, failure)
    assert "Your line was stored (thread 't1', seq 1)" in str(failed.value)
    shown = "the store failed: busy" if isinstance(failure, StoreError) else "membot failed"
    assert str(failed.value).startswith(shown)
    assert [line.text for line in memory.history(user="sam")] == ["Are you there?"]


def test_a_dry_run_builds_the_prompt_without_the_llm(memory: Memory) -> None:
    llm = ScriptedLLM(["never said"])
    turn = Bot(memory, llm).turn("Just store this.", user="alice", thread="t1", dry_run=True)
    assert turn.response == "" and turn.bot_line is None and turn.error is None
    assert llm.history == []
    assert "Now HUMAN says 'Just store this.'" in turn.prompt
    assert turn.timings_ms["llm"] == 0
    assert len(memory.history(user="alice")) == 1


def test_bad_input_stores_nothing_and_asks_no_llm(memory: Memory) -> None:
    llm = ScriptedLLM()
    bot = Bot(memory, llm)
    bot.turn("kept", user="alice", thread="t1", dry_run=True)
    for text, user in (("", "alice"), ("   ", "alice"), ("hello", "")):
        with pytest.raises(ConfigError):
            bot.turn(text, user=user, thread="t1")
    assert [line.text for line in memory.history(user="alice")] == ["kept"]
    assert llm.history == []


def test_every_earlier_line_is_in_the_prompt_once(memory: Memory) -> None:
    """The recent window and recall meet without a hole and without repeating a line."""
    memory.configure_bot(
        threshold=0.4,
        max_matches=50,
        expand_before=0,
        expand_after=0,
        window_size=2,
        strategy="lines",
    )
    bot = Bot(memory, ScriptedLLM([f"kiwi reply{n}" for n in range(10)]))
    for n in range(8):
        turn = bot.turn(f"kiwi line{n}", user="alice", thread="t1")
        earlier = [line.text for line in memory.history(user="alice")][: turn.human_line.seq - 1]
        for text in earlier:
            assert turn.prompt.count(f": {text}\n") == 1, (n, text, turn.prompt)
        recalled = {line.seq for block in turn.recalled for line in block.lines}
        assert recalled == set(range(1, turn.human_line.seq - 2)), n


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_turns_from_several_writers_keep_one_threads_seq_gap_free(memory, make_memory):
    """Four front ends, each with its own Memory on one file, talking in the same thread."""
    start = threading.Barrier(4)
    failures: list[BaseException] = []

    def talk(name: str) -> None:
        try:
            bot = Bot(make_memory(memory.embedder), ScriptedLLM())
            start.wait()
            for number in range(10):
                bot.turn(f"{name} says {number}", user="alice", thread="shared")
        except BaseException as error:  # reported below
            failures.append(error)

    # Memory objects are made in the threads: opening the file is part of the race.
    threads = [threading.Thread(target=talk, args=(f"writer{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    history = memory.history(user="alice", thread="shared")
    assert [line.seq for line in history] == list(range(1, 81))
    assert sum(line.role == Role.BOT for line in history) == 40
    for name in ("writer0", "writer1", "writer2", "writer3"):
        said = [line.text for line in history if line.text.startswith(name)]
        assert said == [f"{name} says {number}" for number in range(10)]


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_recall_in_a_bot_follows_the_bots_settings(memory: Memory) -> None:
    memory.add("mango mango", user="alice", thread="t1", bot="fruit-bot")
    memory.configure_bot("fruit-bot", threshold=0.5)
    fruit = Bot(memory, ScriptedLLM(), name="fruit-bot").turn(
        "mango", user="alice", thread="t2", dry_run=True
    )
    other = Bot(memory, ScriptedLLM()).turn("mango", user="alice", thread="t2", dry_run=True)
    assert [block.thread for block in fruit.recalled] == ["t1"]
    assert other.recalled == ()  # another bot's memory is another memory


@pytest.mark.slow
def test_alice_is_remembered_with_the_real_embedder(make_memory, minilm) -> None:
    """The Python API end to end with MiniLM and the default settings."""
    memory = make_memory(minilm)
    bot = Bot(memory, ScriptedLLM(["Noted!", "You work in logistics."]))
    bot.turn("My name is Alice and I work in logistics.", user="alice", thread="t1")

    turn = bot.turn("Where do I work?", user="alice", thread="t2")
    recalled = [line.text for block in turn.recalled for line in block.lines]
    assert "My name is Alice and I work in logistics." in recalled
    assert "My name is Alice and I work in logistics." in turn.messages[0]["content"]
    assert turn.response == "You work in logistics."

    bob = bot.turn("Where do I work?", user="bob", thread="t2", dry_run=True)
    assert bob.recalled == () and bob.matches == ()
    (best, *_) = memory.search("logistics", user="alice", thread="t1")
    assert best.line.text == "My name is Alice and I work in logistics."
    assert memory.forget(user="alice", thread="t1") == {"threads": 1, "lines": 2, "summaries": 0}
    again = bot.turn("Where do I work?", user="alice", thread="t3", dry_run=True)
    assert all(block.thread != "t1" for block in again.recalled)


def test_a_missing_api_key_is_a_failed_reply_not_a_crash(memory: Memory) -> None:
    from membot import OpenAICompatibleLLM

    turn = Bot(memory, OpenAICompatibleLLM("gpt-4o-mini")).turn("hi", user="alice", thread="t")
    assert turn.response == "" and "set OPENAI_API_KEY" in (turn.error or "")
    assert [line.text for line in memory.history(user="alice")] == ["hi"]


# -- streaming ----------------------------------------------------------------------------


def streamed_turn(memory: Memory, raw: str, **settings) -> tuple[Turn, list[str], ScriptedLLM]:
    llm = ScriptedLLM([raw], piece_size=3)
    shown: list[str] = []
    memory.configure_bot(threshold=0.1)  # the hashing embedder's scores run low
    turn = Bot(memory, llm).turn(
        "Where do I work?", user="alice", thread="t2", settings=settings, on_text=shown.append
    )
    return turn, shown, llm


def test_a_streamed_reply_shows_the_response_text_and_stores_exactly_that(memory) -> None:
    first = memory.add("I work in logistics", user="alice", thread="t1")
    raw = f'{{"response": "You work\\nin \\"logistics\\".", "citation_ids": ["h{first.id}"]}}'
    turn, shown, llm = streamed_turn(memory, raw)
    assert len(shown) > 3  # the reply grew on screen, piece by piece
    assert "".join(shown) == turn.response == turn.bot_line.text == 'You work\nin "logistics".'
    assert [citation.id for citation in turn.citations] == [f"h{first.id}"]
    assert llm.streamed == [True] and llm.schemas == [reply_schema([f"h{first.id}"])]


def test_a_streamed_plain_text_reply_is_stored_as_shown(memory) -> None:
    turn, shown, llm = streamed_turn(memory, "  Logistics, I believe.  ", citations=False)
    assert len(shown) > 3
    assert "".join(shown) == turn.response == "Logistics, I believe."
    assert llm.schemas == [None]


def test_a_reply_opening_with_a_speaker_label_is_shown_and_stored_without_it(memory) -> None:
    # Small models copy the transcript's "AI: …" form (seen with the bundled SmolLM2).
    for raw, citations in (("AI: Logistics, I believe.", False), ("  assistant:  Yes.", False)):
        turn, shown, _ = streamed_turn(memory, raw, citations=citations)
        assert "".join(shown) == turn.response == turn.bot_line.text
        assert turn.response in ("Logistics, I believe.", "Yes.")
    turn = Bot(memory, ScriptedLLM(["AI: Logistics."])).turn(
        "Where do I work?", user="a", thread="t"
    )
    assert turn.response == "Logistics."
    turn = Bot(memory, ScriptedLLM(["Aid is on its way."])).turn("Help?", user="a", thread="t")
    assert turn.response == "Aid is on its way."  # a label only when it is one


def test_a_streamed_example_or_fragment_shows_only_the_no_response(memory) -> None:
    for raw in ('{"response": "what AI says", "citation_ids": []}', '{"citation_ids": ["h'):
        turn, shown, _ = streamed_turn(memory, raw)
        assert shown == [turn.response] == [DEFAULTS["no_response"]]
        assert any("no_response" in note for note in turn.notes)


def test_a_stream_failing_midway_is_the_turns_error(memory) -> None:
    turn, shown, _ = streamed_turn(memory, '{"response": "You work in!error connection lost')
    assert turn.error == "connection lost"
    assert "".join(shown) == "You work in"  # what arrived before the failure was shown
    assert turn.response == "" and turn.bot_line is None
    assert [line.text for line in memory.history(user="alice")][-1] == "Where do I work?"


def test_a_turn_without_on_text_completes_in_one_call(memory) -> None:
    llm = ScriptedLLM(['{"response": "Hi.", "citation_ids": []}'])
    turn = Bot(memory, llm).turn("hello", user="alice", thread="t3")
    assert turn.response == "Hi." and llm.streamed == [False]

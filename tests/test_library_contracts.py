"""What a program using membot as a library meets: bad arguments are a ConfigError saying what
to change (never an AttributeError from deep inside), custom embedders and models are held to
their protocol, and the package is typed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

from membot import (
    Bot,
    ConfigError,
    EmbedderMismatchError,
    LineInput,
    Memory,
    NotFoundError,
    ProviderError,
    Role,
    ScriptedLLM,
    StoreError,
)


def test_the_package_says_it_is_typed() -> None:
    assert files("membot").joinpath("py.typed").is_file()


def test_a_store_that_is_no_path_or_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="empty path"):
        Memory("  ")
    with pytest.raises(ConfigError, match="not int"):
        Memory(123)  # type: ignore[arg-type]


def test_memory_closes_its_store_as_a_context_manager(tmp_path: Path, embedder) -> None:
    with Memory(tmp_path / "m.db", embedder=embedder) as memory:
        memory.add("I keep bees.", user="ana", thread="t")
    with pytest.raises(StoreError):
        memory.count_lines()  # closed
    with Memory(tmp_path / "m.db", embedder=embedder) as again:
        assert [line.text for line in again.history(user="ana")] == ["I keep bees."]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": None}, "nothing to search for"),
        ({"query": "   "}, "nothing to search for"),
        ({"k": "3"}, "k is how many lines"),
        ({"k": 0}, "k is how many lines"),
        ({"k": True}, "k is how many lines"),
        ({"roles": "human"}, "roles is a list"),
        ({"roles": ["assistant"]}, "unknown role 'assistant'"),
        ({"user": ""}, "blank user name"),
    ],
)
def test_search_says_which_argument_is_wrong(memory: Memory, arguments: dict, said: str) -> None:
    memory.add("I keep bees.", user="ana", thread="t")
    asked = {"query": "bees", "user": "ana"} | arguments
    with pytest.raises(ConfigError, match=said):
        memory.search(asked.pop("query"), **asked)


def test_search_takes_roles_as_names_or_as_roles(memory: Memory) -> None:
    memory.add("I keep bees.", user="ana", thread="t")
    memory.add("Bees are lovely.", user="ana", thread="t", role=Role.BOT)
    found = memory.search("bees", user="ana", roles=[Role.BOT], k=np.int64(3))
    assert [match.line.text for match in found] == ["Bees are lovely."]


@pytest.mark.parametrize("now", ["2024-05-01", datetime(2024, 5, 1, 9)])
def test_a_turn_at_a_time_without_its_zone_is_refused_before_anything_is_stored(
    memory: Memory, now: object
) -> None:
    llm = ScriptedLLM(["never"])
    with pytest.raises(ConfigError, match="now"):
        Bot(memory, llm).turn("hello", user="ana", thread="t", now=now)  # type: ignore[arg-type]
    assert memory.history(user="ana") == [] and llm.history == []
    with pytest.raises(ConfigError, match="created_at needs a time zone"):
        memory.add("hello", user="ana", thread="t", created_at=datetime(2024, 5, 1, 9))
    moment = datetime(2024, 5, 1, 9, tzinfo=UTC)
    turn = Bot(memory, llm).turn("hello", user="ana", thread="t", now=moment)
    assert turn.human_line.created_at == moment


def test_names_are_checked_where_they_are_given(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="holds '/'"):
        Bot(memory, ScriptedLLM(), "a/b")
    with pytest.raises(ConfigError, match="a bot needs a name"):
        memory.create_bot(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool's name"):
        Bot(memory, ScriptedLLM()).add_tool_result("20 C", user="ana", thread="t", tool=None)  # type: ignore[arg-type]
    assert memory.history(user="ana") == []


def lines(count: int, bad_at: int | None = None) -> list[LineInput]:
    return [
        LineInput("" if n == bad_at else f"line {n}", "ana", "t", created_at=None)
        for n in range(count)
    ]


def test_a_bad_line_in_a_list_is_named_and_nothing_is_stored(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="line 600: a line needs some text"):
        memory.add_many(lines(700, bad_at=600), batch_size=256)
    assert memory.count_lines() == 0
    with pytest.raises(ConfigError, match="line 1: a LineInput, not dict"):
        memory.add_many([lines(1)[0], {"text": "hi"}])  # type: ignore[list-item]
    assert memory.count_lines() == 0


def test_a_bad_line_from_a_generator_keeps_the_whole_batches_before_it(memory: Memory) -> None:
    with pytest.raises(ConfigError, match="line 600"):
        memory.add_many(iter(lines(700, bad_at=600)), batch_size=256)
    assert memory.count_lines() == 512


class Careless:
    """An embedder that answers a list, rows not of unit length, or as ``mode`` says."""

    name = "careless"

    def __init__(self, words, mode: str = "list") -> None:
        self.words = words  # the tests' hashed bag of words
        self.mode = mode

    @property
    def dimension(self) -> int:
        return self.words.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = self.words.embed(texts) * 7.0
        if self.mode == "short":
            return rows[:-1]
        if self.mode == "nan":
            rows[0, 0] = np.nan
        return rows.tolist()  # type: ignore[return-value]


def test_a_custom_embedders_rows_are_scaled_to_unit_length(tmp_path: Path, embedder) -> None:
    memory = Memory(tmp_path / "m.db", embedder=Careless(embedder))
    memory.add("I keep bees in the garden.", user="ana", thread="t")
    (match,) = memory.search("bees in the garden", user="ana")
    assert match.score == pytest.approx(4 / np.sqrt(6 * 4), abs=1e-5)  # a cosine, not 49 times it
    assert memory.embed([]).shape[0] == 0  # nothing asked is no error
    memory.close()


@pytest.mark.parametrize(("mode", "said"), [("short", "shape"), ("nan", "NaN")])
def test_a_custom_embedders_bad_answer_is_refused_before_storing(
    tmp_path: Path, embedder, mode: str, said: str
) -> None:
    memory = Memory(tmp_path / "m.db", embedder=Careless(embedder, mode))
    with pytest.raises(ProviderError, match=said):  # the embedder's fault: a 503, not a 400
        memory.add_many(lines(3))
    assert memory.count_lines() == 0
    memory.close()


def test_a_store_made_with_a_custom_embedder_says_how_to_open_it(tmp_path: Path, embedder) -> None:
    with Memory(tmp_path / "m.db", embedder=embedder) as memory:  # "hash-bow": no spec makes it
        memory.add("I keep bees.", user="ana", thread="t")
    with Memory(tmp_path / "m.db") as again:
        assert [line.text for line in again.history(user="ana")] == ["I keep bees."]
        with pytest.raises(EmbedderMismatchError, match=r"Memory\(db, embedder=\.\.\.\)"):
            again.search("bees", user="ana")


class ForgetsThenFails(ScriptedLLM):
    """A model during whose call the person's thread is forgotten, and which then fails."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory

    def complete(self, messages, max_tokens, *, schema=None):  # type: ignore[no-untyped-def]
        self.memory.forget(user="ana", thread="t")
        raise RuntimeError("lost the thread")

    stream = complete  # type: ignore[assignment]


def test_a_turn_whose_thread_is_forgotten_meanwhile_says_the_line_is_gone(
    memory: Memory,
) -> None:
    with pytest.raises(NotFoundError, match="forgotten while this turn ran"):
        Bot(memory, ForgetsThenFails(memory)).turn("hello", user="ana", thread="t")
    assert memory.history(user="ana") == []


def test_a_line_too_long_for_the_prompt_keeps_its_end_and_says_so(memory: Memory) -> None:
    memory.create_bot("small", context_size=1024, reply_tokens=256)
    text = "Here is my whole story. " * 400 + "So: which city should I move to?"
    turn = Bot(memory, ScriptedLLM(["Lisbon."]), "small").turn(text, user="ana", thread="t")
    assert turn.messages[-1]["content"].endswith("which city should I move to?")
    assert any("its start and its end" in note for note in turn.notes)
    assert memory.history(user="ana")[0].text == text  # stored whole


def test_a_document_of_headings_only_is_added_with_no_passages(memory: Memory, tmp_path: Path):
    path = tmp_path / "empty.md"
    path.write_text("# Title\n\n## Sub\n")
    added = memory.add_document(path)
    assert added.chunks == 0

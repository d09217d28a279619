"""A person's own view of their memory: lines by thread and key points with their dates,
searched; one line or one key point deleted; a key point corrected, its old text kept as
history and its new text what recall reads from the next turn. On both stores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot import ConfigError, Memory, NotFoundError

BOTH = pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
MAY_1 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
POINTS = (
    "- 2026-05-01: ana said: I work as a nurse in Leeds.\n"
    "- 2026-05-01: ana said: My cat is called Miso.\n"
    "- 2026-05-01: ana said: I am allergic to peanuts."
)


def kept(memory: Memory) -> int:
    """Two threads of ana, one of bo; a summary of ana's first thread; its id."""
    for thread, text in (("work", "I work as a nurse in Leeds"), ("cats", "My cat is Miso")):
        memory.add(text, user="ana", thread=thread, created_at=MAY_1)
    memory.add("bo lives in Oslo", user="bo", thread="home", created_at=MAY_1)
    return memory.add_summary(bot="membot", user="ana", thread="work", text=POINTS).id


@BOTH
def test_a_person_sees_their_lines_by_thread_and_key_points_with_dates(memory: Memory) -> None:
    summary_id = kept(memory)

    seen = memory.person_memory(user="ana", bot="membot")

    assert [(t.thread, [line.text for line in t.lines]) for t in seen.threads] == [
        ("work", ["I work as a nurse in Leeds"]),
        ("cats", ["My cat is Miso"]),
    ]
    assert [(p.summary_id, p.number, p.thread) for p in seen.key_points] == [
        (summary_id, 0, "work"),
        (summary_id, 1, "work"),
        (summary_id, 2, "work"),
    ]
    assert seen.key_points[1].text == "2026-05-01: ana said: My cat is called Miso."
    assert seen.key_points[0].kept_at.date() == datetime.now(UTC).date()
    assert seen.to_json()["key_points"][0]["corrections"] == []
    assert "Oslo" not in str(seen.to_json())  # bo's line is not ana's
    found = memory.person_memory(user="ana", query="miso")
    assert [t.thread for t in found.threads] == ["cats"]
    assert [p.number for p in found.key_points] == [1]


@BOTH
def test_a_corrected_key_point_keeps_its_history_and_recall_reads_the_new_text(
    memory: Memory,
) -> None:
    summary_id = kept(memory)

    point = memory.correct_key_point(summary_id, 1, "My cat is called Luna.", user="ana")
    memory.correct_key_point(summary_id, 1, "My cat is called Luna Bell.", user="ana")

    assert point.text == "My cat is called Luna."
    now = memory.key_point(summary_id, 1, user="ana")
    assert now.text == "My cat is called Luna Bell."
    assert [(c.old_text, c.new_text) for c in now.corrections] == [
        ("2026-05-01: ana said: My cat is called Miso.", "My cat is called Luna."),
        ("My cat is called Luna.", "My cat is called Luna Bell."),
    ]
    (summary,) = memory.summaries(user="ana")
    assert "- My cat is called Luna Bell." in summary.text and "Miso" not in summary.text
    assert "- 2026-05-01: ana said: I work as a nurse in Leeds." in summary.text  # untouched
    # Re-embedded: the new text is what a turn's recall of kept summaries meets.
    query = memory.embed(["My cat is called Luna Bell."], keep=False)[0]
    hits = memory.search_summaries(query, bot="membot", user="ana", k=1, min_score=0.99)
    assert [found.id for found, _ in hits] == [summary_id]
    old = memory.embed(["My cat is called Miso."], keep=False)[0]
    assert memory.search_summaries(old, bot="membot", user="ana", k=1, min_score=0.99) == []


@BOTH
def test_a_deleted_key_point_goes_with_its_history_and_the_last_one_with_its_summary(
    memory: Memory,
) -> None:
    summary_id = kept(memory)
    memory.correct_key_point(summary_id, 1, "My cat is called Luna.", user="ana")

    gone = memory.forget_key_point(summary_id, 1, user="ana")

    assert gone.text == "My cat is called Luna."
    assert [p.text for p in memory.key_points(user="ana")] == [
        "2026-05-01: ana said: I work as a nurse in Leeds.",
        "2026-05-01: ana said: I am allergic to peanuts.",
    ]
    assert memory.store.summary_corrections([summary_id]) == {}  # its history went too
    memory.forget_key_point(summary_id, 1, user="ana")
    memory.forget_key_point(summary_id, 0, user="ana")
    assert memory.summaries(user="ana") == []


@BOTH
def test_another_persons_line_or_point_is_not_found_and_stays(memory: Memory) -> None:
    summary_id = kept(memory)
    (bo_line,) = memory.history(user="bo")

    with pytest.raises(NotFoundError, match="no line"):
        memory.forget_line(bo_line.id, user="ana")
    with pytest.raises(NotFoundError, match="no key point"):
        memory.correct_key_point(summary_id, 0, "I am a pilot.", user="bo")
    with pytest.raises(NotFoundError, match="no key point"):
        memory.forget_key_point(summary_id, 7, user="ana")
    with pytest.raises(NotFoundError, match="no line"):
        memory.forget_line(10**9, user="ana")
    with pytest.raises(ConfigError, match="needs some text"):
        memory.correct_key_point(summary_id, 0, "   ", user="ana")

    assert memory.history(user="bo") == [bo_line]
    assert len(memory.key_points(user="ana")) == 3


@BOTH
def test_a_deleted_line_is_gone_from_its_thread_search_and_full_text(memory: Memory) -> None:
    kept(memory)
    (line,) = memory.history(user="ana", thread="cats")
    bot_id, person_id = memory.store.bot_id("membot"), memory.store.person_id("ana")
    assert memory.search("Miso", user="ana")[0].line.id == line.id  # held in memory now
    assert memory.store.lexical_search(["miso"], bot_id or 0, (person_id or 0,)) != []

    gone = memory.forget_line(line.id, user="ana", bot="membot")

    assert gone == line
    assert memory.history(user="ana", thread="cats") == []
    assert all(match.line.id != line.id for match in memory.search("Miso cat", user="ana"))
    assert memory.store.lexical_search(["miso"], bot_id or 0, (person_id or 0,)) == []
    assert [t.thread for t in memory.person_memory(user="ana").threads] == ["work"]


def test_a_deleted_line_leaves_the_running_summary_that_quoted_it(memory: Memory) -> None:
    """A model that cannot summarise (the bundled one) folds the person's own words into the
    thread's running summary: a line deleted goes from there too, the other rows stay."""
    from membot import Bot, ScriptedLLM

    memory.configure_bot(window_size=2, window_overlap=0)
    llm = ScriptedLLM()
    llm.writes_summaries = False
    bot = Bot(memory, llm)
    said = ["My sister Ana lives in Porto.", "I'm training for a half marathon.", "ok thanks"]
    for minute, text in enumerate(said):
        bot.turn(text, user="alice", thread="t1", now=MAY_1.replace(minute=minute))
    state = memory.thread_state(bot="membot", user="alice", thread="t1")
    assert state is not None and "Porto" in state.summary and "marathon" in state.summary
    (sister,) = [line for line in memory.history(user="alice") if "Porto" in line.text]

    memory.forget_line(sister.id, user="alice")

    state = memory.thread_state(bot="membot", user="alice", thread="t1")
    assert state is not None
    assert state.summary == "2026-05-01: alice said: I'm training for a half marathon."


@BOTH
def test_the_newest_line_deleted_its_seq_taken_again_is_folded_in_later(memory: Memory) -> None:
    """The next line takes a deleted newest line's seq: the running summary, which covered
    that seq, covers only what is left, so the new line is not counted as folded in."""
    for text in ("one", "two", "three"):
        memory.add(text, user="ana", thread="t", created_at=MAY_1)
    state = memory.thread_state(bot="membot", user="ana", thread="t")
    assert state is not None
    memory.save_thread_summary(state, "ana said one, two and three", 3)
    (three,) = [line for line in memory.history(user="ana") if line.text == "three"]

    memory.forget_line(three.id, user="ana")
    again = memory.add("four", user="ana", thread="t", created_at=MAY_1)

    state = memory.thread_state(bot="membot", user="ana", thread="t")
    assert state is not None and state.summary_through == 2 and again.seq == 3


def test_the_newest_line_deleted_leaves_the_running_summary_too(memory: Memory) -> None:
    memory.add("I keep bees in Leeds", user="ana", thread="t", created_at=MAY_1)
    state = memory.thread_state(bot="membot", user="ana", thread="t")
    assert state is not None
    memory.save_thread_summary(state, "2026-05-01: ana said: I keep bees in Leeds", 1)
    (line,) = memory.history(user="ana")

    memory.forget_line(line.id, user="ana")

    state = memory.thread_state(bot="membot", user="ana", thread="t")
    assert state is not None and (state.summary, state.summary_through) == ("", 0)

"""Linking identities of one bot as one person: codes made, entered, used once, expired,
rate-limited, and links undone; on both stores."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from membot import LinkCode, LinkCodeError, Linked, Memory, NotFoundError, TooManyAttemptsError
from membot.memory.person_links import ALPHABET, code_hash

BOTH = pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
NOW = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
SMS = "sms-4f1c9a"


def _known(memory: Memory, *people: str, bot: str = "default") -> None:
    for person in people:
        memory.add(f"hello from {person}", user=person, bot=bot, thread="t1")


@BOTH
def test_a_code_entered_by_another_identity_links_the_two(memory: Memory) -> None:
    _known(memory, "ana", SMS)
    code = memory.link_code(user="ana", bot="default", now=NOW)
    assert isinstance(code, LinkCode)
    assert len(code.code) == 9 and code.code[4] == "-"
    assert set(code.code.replace("-", "")) <= set(ALPHABET)
    assert code.expires_at == NOW + timedelta(minutes=10)
    assert code.to_json() == {"code": code.code, "expires_at": code.expires_at.isoformat()}

    typed = " " + code.code.lower().replace("-", " ") + " "
    linked = memory.link_with_code(typed, user=SMS, bot="default", now=NOW)
    assert linked == Linked(SMS, ("ana", SMS))
    assert linked.to_json() == {"person": SMS, "linked": ["ana", SMS]}
    assert memory.linked(user="ana", bot="default") == Linked("ana", ("ana", SMS))


@BOTH
def test_a_used_code_cannot_be_replayed(memory: Memory) -> None:
    _known(memory, "ana", SMS, "mallory")
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    memory.link_with_code(code, user=SMS, bot="default", now=NOW)
    with pytest.raises(LinkCodeError) as replayed:
        memory.link_with_code(code, user="mallory", bot="default", now=NOW)
    assert "not valid" in str(replayed.value)
    assert memory.linked(user="mallory", bot="default").linked == ("mallory",)
    assert memory.linked(user="ana", bot="default").linked == ("ana", SMS)


@BOTH
def test_expired_own_and_other_bots_codes_fail_alike(memory: Memory) -> None:
    _known(memory, "ana", SMS)
    _known(memory, "ana", SMS, bot="other")
    messages = set()
    expired = memory.link_code(user="ana", bot="default", now=NOW).code
    with pytest.raises(LinkCodeError) as error:
        memory.link_with_code(expired, user=SMS, bot="default", now=NOW + timedelta(minutes=10))
    messages.add(str(error.value))
    own = memory.link_code(user="ana", bot="default", now=NOW).code
    with pytest.raises(LinkCodeError) as error:
        memory.link_with_code(own, user="ana", bot="default", now=NOW)
    messages.add(str(error.value))
    with pytest.raises(LinkCodeError) as error:
        memory.link_with_code(own, user=SMS, bot="other", now=NOW)
    messages.add(str(error.value))
    with pytest.raises(LinkCodeError) as error:
        memory.link_with_code("not a code", user=SMS, bot="default", now=NOW)
    messages.add(str(error.value))
    assert len(messages) == 1
    # The own code, refused to its maker and to another bot's identity, still links SMS here.
    assert memory.link_with_code(own, user=SMS, bot="default", now=NOW).linked == ("ana", SMS)
    assert memory.linked(user=SMS, bot="other").linked == (SMS,)


@BOTH
def test_code_just_before_expiry_links(memory: Memory) -> None:
    _known(memory, "ana", SMS)
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    late = NOW + timedelta(minutes=9, seconds=59)
    assert memory.link_with_code(code, user=SMS, bot="default", now=late).linked == ("ana", SMS)


@BOTH
def test_a_code_is_asked_for_where_the_person_is_known(memory: Memory) -> None:
    _known(memory, "ana")
    with pytest.raises(NotFoundError):
        memory.link_code(user="stranger", bot="default", now=NOW)
    with pytest.raises(NotFoundError):
        memory.link_code(user="ana", bot="nobody", now=NOW)


@BOTH
def test_five_codes_an_hour(memory: Memory) -> None:
    _known(memory, "ana")
    for minute in range(5):
        memory.link_code(user="ana", bot="default", now=NOW + timedelta(minutes=minute))
    with pytest.raises(TooManyAttemptsError) as error:
        memory.link_code(user="ana", bot="default", now=NOW + timedelta(minutes=30))
    assert error.value.retry_after == pytest.approx(30 * 60)
    memory.link_code(user="ana", bot="default", now=NOW + timedelta(minutes=60, seconds=1))


@BOTH
def test_five_failed_entries_lock_out_even_the_right_code(memory: Memory) -> None:
    _known(memory, "ana", SMS)
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    wrong = "0000-0000" if code != "0000-0000" else "1111-1111"
    for _ in range(5):
        with pytest.raises(LinkCodeError):
            memory.link_with_code(wrong, user=SMS, bot="default", now=NOW)
    with pytest.raises(TooManyAttemptsError) as error:
        memory.link_with_code(code, user=SMS, bot="default", now=NOW + timedelta(minutes=1))
    assert error.value.retry_after == pytest.approx(9 * 60)
    # Not consumed while locked out: it links once the window passed (still within its life).
    later = NOW + timedelta(minutes=9, seconds=30)
    with pytest.raises(TooManyAttemptsError):
        memory.link_with_code(code, user=SMS, bot="default", now=later)
    ok = NOW + timedelta(minutes=10)
    code = memory.link_code(user="ana", bot="default", now=ok).code
    assert memory.link_with_code(code, user=SMS, bot="default", now=ok).linked == ("ana", SMS)


@BOTH
def test_linking_merges_groups_and_unlink_splits_going_forward(memory: Memory) -> None:
    _known(memory, "ana", "ana-mcp", SMS, "bo", "bo-mcp")
    for maker, enterer in (("ana", SMS), ("bo", "bo-mcp"), ("ana-mcp", "bo")):
        code = memory.link_code(user=maker, bot="default", now=NOW).code
        memory.link_with_code(code, user=enterer, bot="default", now=NOW)
    everyone = ("ana-mcp", "bo", "bo-mcp")
    assert memory.linked(user="bo-mcp", bot="default").linked == everyone
    code = memory.link_code(user=SMS, bot="default", now=NOW).code
    memory.link_with_code(code, user="bo", bot="default", now=NOW)
    whole = tuple(sorted(("ana", SMS, *everyone)))
    assert memory.linked(user="ana", bot="default").linked == whole
    assert memory.unlink(user="bo", bot="default") == Linked("bo", ("bo",))
    assert memory.linked(user="bo", bot="default").linked == ("bo",)
    assert memory.linked(user="ana", bot="default").linked == tuple(sorted(set(whole) - {"bo"}))


@BOTH
def test_unlinking_one_of_two_undoes_the_pair(memory: Memory) -> None:
    _known(memory, "ana", SMS)
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    memory.link_with_code(code, user=SMS, bot="default", now=NOW)
    memory.unlink(user=SMS, bot="default")
    assert memory.linked(user="ana", bot="default").linked == ("ana",)
    assert memory.linked(user=SMS, bot="default").linked == (SMS,)
    # A new pair, made afterwards, takes a label no leftover row holds.
    _known(memory, "cy")
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    memory.link_with_code(code, user="cy", bot="default", now=NOW)
    assert memory.linked(user=SMS, bot="default").linked == (SMS,)
    assert memory.linked(user="cy", bot="default").linked == ("ana", "cy")


@BOTH
def test_the_store_keeps_only_a_hash_and_logs_no_code(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    _known(memory, "ana", SMS)
    caplog.set_level(logging.DEBUG)
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    memory.link_with_code(code, user=SMS, bot="default", now=NOW)
    store = memory.store
    rows = store._query("SELECT hash FROM link_codes")  # type: ignore[attr-defined]
    assert [row[0] for row in rows] == [code_hash(code)]
    letters = code.replace("-", "")
    assert letters not in caplog.text and code not in caplog.text
    dumped = "\n".join(str(row) for row in store._query("SELECT * FROM link_codes"))  # type: ignore[attr-defined]
    assert letters not in dumped


@BOTH
def test_forgetting_a_linked_person_is_all_or_nothing(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ana and their text-message identity are forgotten in one transaction: a failure at
    the second identity, after the first's rows were deleted, leaves both identities' lines,
    the link and ana's open code; asking again then removes all of it."""
    _known(memory, "ana", SMS, "bo")
    memory.add("my bike lock is 4711", user=SMS, bot="default", thread="t2")
    code = memory.link_code(user="ana", bot="default", now=NOW).code
    memory.link_with_code(code, user=SMS, bot="default", now=NOW)
    open_code = memory.link_code(user="ana", bot="default", now=NOW).code
    store = memory.store
    forget_identity = store._forget_identity  # type: ignore[attr-defined]
    reached = []

    def dies_at_the_second(db: object, person: str, bot: str | None, thread: str | None):
        removed = forget_identity(db, person, bot, thread)  # deleted, not yet committed
        reached.append(person)
        if person == SMS:
            raise RuntimeError("the process died here")
        return removed

    monkeypatch.setattr(store, "_forget_identity", dies_at_the_second)
    with pytest.raises(RuntimeError):
        memory.forget(user="ana")
    assert reached == ["ana", SMS]
    assert [line.text for line in store.history("ana", None, None)] == ["hello from ana"]
    assert len(store.history(SMS, None, None)) == 2
    assert memory.linked(user="ana", bot="default").linked == ("ana", SMS)
    assert store.link_code_taken(code_hash(open_code))

    monkeypatch.undo()
    assert memory.forget(user="ana") == {"threads": 3, "lines": 3, "summaries": 0}
    assert store.history("ana", None, None) == store.history(SMS, None, None) == []
    assert memory.linked(user=SMS, bot="default").linked == (SMS,)
    assert not store.link_code_taken(code_hash(open_code))
    assert memory.people("default") == ["bo"]


def test_crockford_reading_of_a_typed_code() -> None:
    assert code_hash("k7qf-3m9p") == code_hash("K7QF3M9P") == code_hash(" K7QF 3M9P ")
    assert code_hash("OIL0-0000") == code_hash("0110-0000")
    assert code_hash("K7QF-3M9U") is None  # no U in Crockford's base32
    assert code_hash("K7QF-3M9") is None

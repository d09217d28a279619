"""Reading the model's reply: JSON wherever it is, plain text as a fallback, known ids only."""

from __future__ import annotations

import pytest

from membot.replies import Reply, first_json_object, read_reply

KNOWN = {"h1", "h7", "s2", "e3"}


def test_bare_json_gives_the_response_and_its_citations() -> None:
    reply = read_reply(
        '{"response": "You work in logistics.", "citation_ids": ["h1", "e3"]}', KNOWN
    )
    assert reply == Reply("You work in logistics.", ("h1", "e3"), None)


def test_fenced_json_is_read() -> None:
    text = 'Here you go:\n```json\n{"response": "Hi!", "citation_ids": ["s2"]}\n```\nDone.'
    assert read_reply(text, KNOWN) == Reply("Hi!", ("s2",), None)
    plain_fence = '```\n{"response": "Hello", "citation_ids": []}\n```'
    assert read_reply(plain_fence, KNOWN) == Reply("Hello", (), None)


def test_json_inside_prose_is_read() -> None:
    text = 'Sure. {"response": "It is on Friday.", "citation_ids": ["h7"]} Hope that helps!'
    assert read_reply(text, KNOWN) == Reply("It is on Friday.", ("h7",), None)


def test_prose_with_braces_before_the_json_still_finds_the_object() -> None:
    text = 'A set {1, 2} and then {"response": "ok", "citation_ids": ["h1"]}'
    assert read_reply(text, KNOWN) == Reply("ok", ("h1",), None)


def test_plain_text_is_the_response_without_citations_and_with_a_note() -> None:
    reply = read_reply("  You told me you like tea.  ", KNOWN)
    assert reply.response == "You told me you like tea."
    assert reply.citation_ids == ()
    assert reply.note is not None and "not JSON" in reply.note


def test_an_empty_reply_is_empty_without_a_note() -> None:
    assert read_reply("   ", KNOWN) == Reply("", (), None)


def test_json_without_a_response_falls_back_to_the_raw_text() -> None:
    text = '{"answer_text": "hello", "citation_ids": ["h1"]}'
    reply = read_reply(text, KNOWN)
    assert reply.response == text
    assert reply.citation_ids == ()
    assert reply.note is not None and "no 'response'" in reply.note


def test_json_with_an_empty_response_gives_an_empty_response() -> None:
    """The bot then answers with its no_response string, not with the JSON itself."""
    reply = read_reply('{"response": "  ", "citation_ids": ["h1"]}', KNOWN)
    assert reply.response == ""
    assert reply.citation_ids == ()


@pytest.mark.parametrize("key", ["reply", "answer"])
def test_other_names_for_the_response_are_read(key: str) -> None:
    assert read_reply(f'{{"{key}": "Yes.", "citation_ids": []}}', KNOWN).response == "Yes."


def test_unknown_citation_ids_are_dropped_with_a_note() -> None:
    reply = read_reply('{"response": "ok", "citation_ids": ["h1", "h99", "x", "h1"]}', KNOWN)
    assert reply.response == "ok"
    assert reply.citation_ids == ("h1",)
    assert reply.note == "left out citation ids that match no hint: h99, x"


def test_without_known_ids_every_id_is_kept_once() -> None:
    reply = read_reply('{"response": "ok", "citation_ids": ["a", "b", "a"]}')
    assert reply == Reply("ok", ("a", "b"), None)


def test_integer_ids_are_read_as_strings() -> None:
    assert read_reply('{"response": "ok", "citation_ids": [7, " h1 "]}', {"7", "h1"}) == Reply(
        "ok", ("7", "h1"), None
    )
    dropped = read_reply('{"response": "ok", "citation_ids": [7]}', KNOWN)
    assert dropped.citation_ids == () and "7" in (dropped.note or "")


def test_citations_is_read_as_an_alias_and_a_single_id_as_a_list() -> None:
    assert read_reply('{"response": "ok", "citations": ["e3"]}', KNOWN).citation_ids == ("e3",)
    assert read_reply('{"response": "ok", "citation_ids": "h7"}', KNOWN).citation_ids == ("h7",)
    assert read_reply('{"response": "ok", "citation_ids": null}', KNOWN).citation_ids == ()
    odd = read_reply('{"response": "ok", "citation_ids": [["h1"], {"id": "h7"}]}', KNOWN)
    assert odd == Reply("ok", (), None)


@pytest.mark.parametrize(
    "text",
    [
        '{"response": "cut off here',
        '{"response": "ok", "citation_ids": ["h1"]',
        "{'response': 'single quotes'}",
        '{"response": "ok",, }',
    ],
)
def test_broken_json_is_used_as_plain_text(text: str) -> None:
    reply = read_reply(text, KNOWN)
    assert reply.response == text
    assert reply.citation_ids == ()
    assert reply.note is not None


def test_first_json_object_skips_arrays_and_scalars() -> None:
    assert first_json_object('[1, 2] "x" {"a": 1}') == {"a": 1}
    assert first_json_object("[1, 2]") is None
    assert first_json_object("no json") is None

"""Reading the model's reply: JSON wherever it is, plain text as a fallback, known ids only."""

from __future__ import annotations

import json

import pytest

from membot.turn.artefacts import ReplyContext
from membot.turn.replies import (
    Reply,
    ResponseText,
    ShownText,
    first_json_object,
    instruction_examples,
    read_reply,
    relay_reply,
)

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


def test_json_without_a_response_text_is_not_shown() -> None:
    """The bot then answers with its no_response string, never with the JSON."""
    for text in (
        '{"answer_text": "hello", "citation_ids": ["h1"]}',
        '{ "response": { "citation_ids": ["h1"] } }',
    ):
        reply = read_reply(text, KNOWN)
        assert reply.response == ""
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
    ("text", "expected"),
    [
        ('{"response": "cut off here', Reply("cut off here", ())),
        ('{"response": "ok", "citation_ids": ["h1"]', Reply("ok", ("h1",))),
        ('{"response": "ok", "citation_ids": ["h1", "h', Reply("ok", ("h1",))),
        ('{"response": "ok",, }', Reply("ok", ())),
        ('{"response": "a \\"quote\\" and \\u00e9', Reply('a "quote" and é', ())),
        ('```json\n{"response": "fenced, cut', Reply("fenced, cut", ())),
        ('{"answer": "Yes', Reply("Yes", ())),
    ],
)
def test_a_cut_off_json_reply_keeps_its_response_text(text: str, expected: Reply) -> None:
    """A reply stopped by the token limit: what there was of the response, and the ids
    already complete."""
    reply = read_reply(text, KNOWN)
    assert (reply.response, reply.citation_ids) == (expected.response, expected.citation_ids)
    assert reply.note is not None


@pytest.mark.parametrize(
    "text",
    [
        "{'response': 'single quotes'}",
        '{"citation_ids": ["h1"',
        '{ "response": { "citation_ids": ["the citation IDs of the hints you used"] } ',
        'Sure! {"response": "broken, "citation_ids": ["h1"',
        '"response": "no braces"',
    ],
)
def test_a_json_fragment_is_never_the_response(text: str) -> None:
    reply = read_reply(text, KNOWN)
    assert reply.response == ""
    assert reply.citation_ids == ()
    assert reply.note is not None


EXAMPLES = instruction_examples("AI")


def test_the_examples_are_the_values_in_the_prompts_json_instruction() -> None:
    assert EXAMPLES == ("what AI says", "the citation IDs of the hints you used")
    assert instruction_examples("Guide")[0] == "what Guide says"


@pytest.mark.parametrize(
    "text",
    [
        '{"response": "What AI says", "citation_ids": []}',
        '{"response": "what AI says.", "citation_ids": ["h1"]}',
        "What AI says",
        "  what ai says!  ",
        "I used the citation IDs of the hints you used.",
        '{"response": "The citation ID of the hint you used", "citation_ids": ["h1"]}',
    ],
)
def test_a_reply_repeating_the_prompts_example_is_not_shown(text: str) -> None:
    reply = read_reply(text, KNOWN, EXAMPLES)
    assert reply.response == "" and reply.citation_ids == ()
    assert reply.note == "the reply repeated the prompt's example instead of answering"


def test_a_reply_merely_mentioning_the_example_words_is_kept() -> None:
    text = '{"response": "Ask me what AI says about bees.", "citation_ids": []}'
    assert read_reply(text, KNOWN, EXAMPLES).response == "Ask me what AI says about bees."


def test_first_json_object_skips_arrays_and_scalars() -> None:
    assert first_json_object('[1, 2] "x" {"a": 1}') == {"a": 1}
    assert first_json_object("[1, 2]") is None
    assert first_json_object("no json") is None


# -- streaming ----------------------------------------------------------------------------

ESCAPED = json.dumps(
    {
        "citation_ids": ["h1"],
        "meta": {"response": "not this"},
        "response": 'Line one\nsaid "hi" \\ caf\u00e9 \U0001f600 tab\tend',
        "after": "x",
    },
    ensure_ascii=True,
)


def pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 1000])
def test_the_response_text_is_decoded_however_the_deltas_split_it(size: int) -> None:
    """Escapes (\\n, \\", \\\\, \\uXXXX and a surrogate pair) split across deltas; the
    response key after others; a "response" inside a nested object ignored."""
    reader = ResponseText()
    given = [reader.feed(delta) for delta in pieces(ESCAPED, size)]
    assert "".join(given) == json.loads(ESCAPED)["response"]
    assert reader.found and not reader.not_json
    if size == 1:  # characters come as they are written, not all at the end
        assert sum(1 for piece in given if piece) > 20


def test_only_the_first_top_level_object_is_read() -> None:
    reader = ResponseText()
    assert reader.feed('{"response": 5, "x": "y"} {"response": "later"}') == ""
    assert not reader.found


@pytest.mark.parametrize("text", ["Hello there", "```json\n{}", '  "response": "x"'])
def test_text_that_does_not_open_an_object_gives_nothing(text: str) -> None:
    reader = ResponseText()
    assert reader.feed(text) == "" and reader.not_json


def test_a_lone_high_surrogate_comes_out_as_json_reads_it() -> None:
    text = '{"response": "a\\ud83d b"}'
    assert ResponseText().feed(text) == json.loads(text)["response"]


def test_shown_text_holds_back_surrounding_whitespace_and_the_example() -> None:
    shown = ShownText(["what AI says"])
    given = [shown.feed(piece) for piece in ["  ", "What", " AI", " about", " bees ", " "]]
    assert given == ["", "", "", "What AI about", " bees", ""]
    assert shown.text == "What AI about bees"


def test_shown_text_holds_a_possible_label_and_leaves_a_label_out() -> None:
    shown = ShownText(artefacts=ReplyContext.of("Bea", "Sam"))
    given = [shown.feed(piece) for piece in ["B", "e", "a", ":", " Hi", " Sam"]]
    assert given == ["", "", "", "", "Hi", " Sam"] and shown.text == "Hi Sam"
    plain = ShownText(artefacts=ReplyContext.of("AI", "HUMAN"))
    assert [plain.feed(piece) for piece in ["A", "id", " comes"]] == ["", "Aid", " comes"]


def relay(deltas: list[str], read, json_wanted: bool = True) -> tuple[list[str], Reply]:
    shown: list[str] = []
    reply = relay_reply(
        iter(deltas), shown.append, read, json_wanted=json_wanted, examples=EXAMPLES
    )
    return shown, reply


def test_relay_passes_the_response_text_and_returns_the_reply_with_its_citations() -> None:
    raw = '{"response": "You work\\nin logistics.", "citation_ids": ["h1", "e3"]}'
    shown, reply = relay(pieces(raw, 4), lambda text: read_reply(text, KNOWN, EXAMPLES))
    assert len(shown) > 3
    assert "".join(shown) == reply.response == "You work\nin logistics."
    assert reply.citation_ids == ("h1", "e3")


def test_relay_of_plain_text_passes_it_stripped() -> None:
    shown, reply = relay(
        pieces("  Hello there, Alice.  \n", 3),
        lambda text: Reply(text.strip(), ()),
        json_wanted=False,
    )
    assert len(shown) > 3 and "".join(shown) == reply.response == "Hello there, Alice."


def no_response_reader(text: str) -> Reply:
    reply = read_reply(text, KNOWN, EXAMPLES)
    return reply if reply.response else Reply("I have no answer.", (), reply.note)


@pytest.mark.parametrize(
    "raw",
    [
        '{"response": "What AI says", "citation_ids": ["h1"]}',
        '{"response": "", "citation_ids": []}',
        '{"response": {"citation_ids": ["h1"]}}',
        "The citation IDs of the hints you used",
    ],
)
def test_relay_never_shows_an_example_or_json_and_ends_with_the_fallback(raw: str) -> None:
    shown, reply = relay(pieces(raw, 3), no_response_reader)
    assert shown == ["I have no answer."] and reply.response == "I have no answer."


def test_relay_holds_a_reply_that_is_not_json_until_it_is_read_whole() -> None:
    raw = 'Sure! {"response": "It is on Friday.", "citation_ids": ["h7"]}'
    shown, reply = relay(pieces(raw, 5), no_response_reader)
    assert shown == ["It is on Friday."] and reply.citation_ids == ("h7",)


def test_relay_of_a_cut_off_reply_keeps_what_was_shown() -> None:
    shown, reply = relay(pieces('{"response": "It is on Fri', 4), no_response_reader)
    assert "".join(shown) == reply.response == "It is on Fri"


def test_when_the_whole_reads_otherwise_the_shown_text_stands() -> None:
    raw = '{"response": "first", "response": "second", "citation_ids": ["h1"]}'
    shown, reply = relay(pieces(raw, 6), no_response_reader)
    assert "".join(shown) == reply.response == "first"
    assert reply.citation_ids == ("h1",) and "streaming" in (reply.note or "")

"""Reading LINK texts (membot.service.text_links): which texts ask for a code, enter one or
unlink, and which are ordinary texts; and what the SMS records keep of a reply with a code."""

from __future__ import annotations

import pytest

from membot.service.text_links import CODE_SENT_BEFORE, LinkRequest, kept_replies, link_request


@pytest.mark.parametrize("text", ["LINK", "link", " Link. ", "link!", "LINK:"])
def test_link_alone_asks_for_a_code(text: str) -> None:
    assert link_request(text) == LinkRequest("code")


@pytest.mark.parametrize(
    "text, code",
    [
        ("LINK K7QF-3M9P", "K7QF-3M9P"),
        ("link k7qf3m9p", "k7qf3m9p"),
        ("Link: K7QF 3M9P.", "K7QF 3M9P"),
        ("  LINK  k7 qf-3m 9p ", "k7 qf-3m 9p"),
    ],
)
def test_link_and_a_code_enters_it_as_typed(text: str, code: str) -> None:
    assert link_request(text) == LinkRequest("enter", code)


@pytest.mark.parametrize("text", ["UNLINK", "unlink.", " Unlink "])
def test_unlink(text: str) -> None:
    assert link_request(text) == LinkRequest("unlink")


@pytest.mark.parametrize(
    "text",
    ["link me to that recipe", "Link please", "links", "LINK K7QF-3M9", "LINK K7QF-3M9PX",
     "blink", "the link K7QF-3M9P", "LINK, please", "unlink me"],
)  # fmt: skip
def test_other_texts_are_no_link_requests(text: str) -> None:
    assert link_request(text) is None


def test_a_request_shows_no_code_in_its_repr() -> None:
    assert "K7QF" not in repr(link_request("LINK K7QF-3M9P"))


def test_the_records_keep_no_reply_with_a_code() -> None:
    assert kept_replies("LINK", ["Your link code is K7QF-3M9P."]) == [CODE_SENT_BEFORE]
    assert kept_replies("link.", []) == []  # a silenced number got nothing: nothing to keep
    assert kept_replies("LINK K7QF-3M9P", ["Linked: ..."]) == ["Linked: ..."]
    assert kept_replies("hello", ["Hi."]) == ["Hi."]

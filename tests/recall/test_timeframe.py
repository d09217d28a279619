"""Relative and absolute time expressions read as date windows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membot.recall.timeframe import window_of

NOW = datetime(2023, 4, 18, 16, 50, tzinfo=UTC)  # a Tuesday


def days(query: str, now: datetime | None = NOW) -> tuple[str, str] | None:
    window = window_of(query, now)
    return None if window is None else (window[0].date().isoformat(), window[1].date().isoformat())


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Which book did I finish a week ago?", ("2023-04-04", "2023-04-18")),
        ("What did I cook a couple of days ago?", ("2023-04-15", "2023-04-18")),
        ("What did I buy 3 days ago?", ("2023-04-14", "2023-04-17")),
        ("Who did I meet last Tuesday?", ("2023-04-10", "2023-04-13")),
        ("Who did I meet last Monday?", ("2023-04-16", "2023-04-18")),
        ("Where did I go last week?", ("2023-04-04", "2023-04-18")),
        ("What did I finish last month?", ("2023-02-17", "2023-04-18")),
        ("How many videos in the past few weeks?", ("2023-03-28", "2023-04-18")),
        ("What did I do yesterday?", ("2023-04-16", "2023-04-18")),
        ("What did I watch in January?", ("2023-01-01", "2023-02-01")),
        ("What did I watch in June?", ("2022-06-01", "2022-07-01")),
        ("What did I do in April?", ("2023-04-01", "2023-04-18")),
    ],
)
def test_relative_expressions_are_read_against_now(query: str, expected: tuple[str, str]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did I do on March 3rd?", ("2023-03-02", "2023-03-05")),
        ("Where was I on 3 March?", ("2023-03-02", "2023-03-05")),
        ("What did I eat on the 3rd of March?", ("2023-03-02", "2023-03-05")),  # not the month
        ("What did I buy on May 12?", ("2022-05-11", "2022-05-14")),  # still to come this year
        ("What did I do on April 18th?", ("2023-04-17", "2023-04-18")),  # today, up to now
        ("What happened on Valentine's day?", ("2023-02-13", "2023-02-16")),
        ("What did we do at Christmas?", ("2022-12-24", "2022-12-27")),
        ("What did we do on Christmas Eve?", ("2022-12-23", "2022-12-26")),
        ("What did I do on New Year's Eve?", ("2022-12-30", "2023-01-02")),
        ("What did I do on New Year's Day?", ("2022-12-31", "2023-01-03")),
        ("What did I do on Halloween?", ("2022-10-30", "2022-11-02")),
        ("What did we eat at Easter?", ("2023-04-08", "2023-04-11")),  # 9 April 2023
        ("Who came for Thanksgiving?", ("2022-11-23", "2022-11-26")),  # 24 November 2022
    ],
)
def test_a_day_or_a_holiday_without_its_year_is_its_latest_before_now(
    query: str, expected: tuple[str, str]
) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Gina find on 1 February, 2023?", ("2023-01-31", "2023-02-03")),
        ("What did Tim read on 8th December, 2023?", ("2023-12-07", "2023-12-10")),
        ("What did Tim read on the 8th of December 2023?", ("2023-12-07", "2023-12-10")),
        ("Who did Maria meet on May 3, 2023?", ("2023-05-02", "2023-05-05")),
        ("What happened on 2023-07-07?", ("2023-07-06", "2023-07-09")),
        ("What did John host in May 2023?", ("2023-05-01", "2023-06-01")),
        ("What did John achieve in 2023?", ("2023-01-01", "2024-01-01")),
    ],
)
def test_dates_that_name_their_year_need_no_now(query: str, expected: tuple[str, str]) -> None:
    assert days(query, None) == expected


@pytest.mark.parametrize(
    "query",
    [
        "How many months ago did I attend the workshop?",
        "What may I bring to the party?",
        "Which device did I get first?",
        "What did I do on 31 February, 2023?",  # no such day
        "What did I do on June 31st?",
        "What may 3 people bring?",
        "What happened 5000 years ago?",
        "How is June doing?",  # a person, not a month
        "Did August call back about the flat?",
    ],
)
def test_queries_without_a_time_give_no_window(query: str) -> None:
    assert window_of(query, NOW) is None


def test_relative_expressions_need_now_and_windows_end_by_now() -> None:
    assert window_of("What did I do last week?") is None
    assert window_of("What did I buy in June?") is None
    window = window_of("What did I do a week ago?", NOW)
    assert window is not None and window[1] == NOW


def test_a_naive_now_is_read_as_utc() -> None:
    window = window_of("What did I do last week?", NOW.replace(tzinfo=None))
    assert window is not None and window[1] == NOW

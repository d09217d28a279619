"""The days a line names, read by rules: may a remembered point carry this date?

A point kept about a person is dated within the thread (the days of its first and last
line) or on a day the person named. :func:`named_days` reads, from one line and the moment it
was said, the spans of days it names, past or future, generously (a point dated a day off
the day meant is still the person's): ISO dates, "3 June", "June 3rd, 2024", a month
("in June": that month this year, last year or next), "yesterday", "today", "tonight",
"tomorrow", a weekday ("on Friday", "next Friday": the week either side), "last / this / next
week, weekend, month, year", "in N days / weeks / months", "N days / weeks ago".

What it does not read it does not name, so a point dated by an unusual phrase ("the day
after the party") is dropped: a memory must not hold a date nobody said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta

Span = tuple[date, date]  # first and last day, both included

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
# The names of months and weekdays, which are capitalised without being anyone's name.
CALENDAR_WORDS = frozenset(_MONTHS) | frozenset(
    f"{day}day" for day in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun")
)
_NUMBER = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 4,
}
_COUNT = r"(\d{1,3}|" + "|".join(sorted(map(re.escape, _NUMBER), key=len, reverse=True)) + ")"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 31, "year": 366}

_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b\.?,?\s*(\d{{4}})?", re.I
)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b,?\s*(\d{{4}})?", re.I)
_MONTH_ALONE = re.compile(
    rf"\b(?:in|during|of|since|until|by|early|mid|late|this|next|last)"
    rf"\s+(?:-\s*)?{_MONTH}\b(?:,?\s+(\d{{4}}))?",
    re.I,
)
_YEAR = re.compile(r"\b(?:in|during|since|until|by)\s+((?:19|20)\d\d)\b", re.I)
_DAY_WORD = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening))\b", re.I
)
_WEEKDAY_WORD = re.compile(rf"\b{_WEEKDAY}s?\b", re.I)
_NAMED_UNIT = re.compile(r"\b(last|this|next|coming|past)\s+(week(?:end)?|month|year)\b", re.I)
_IN_COUNT = re.compile(rf"\b(?:in|within|after)\s+{_COUNT}\s+(day|week|month|year)s?\b", re.I)
_AGO = re.compile(rf"\b{_COUNT}\s+(day|week|month|year)s?\s+(?:ago|before|earlier)\b", re.I)


def named_days(text: str, said: datetime) -> list[Span]:
    """The spans of days ``text``, said at ``said``, names (see the module doc)."""
    today = said.date()
    spans: list[Span] = []
    for reader in (_absolute_days, _month_days, _relative_days):
        try:
            spans.extend(reader(text, today))
        except (OverflowError, ValueError):  # "in 999 years" said in 9990
            continue
    return spans


def within(day: date, spans: Iterable[Span]) -> bool:
    return any(first <= day <= last for first, last in spans)


def _day_or_none(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:  # "31 February"
        return None


def _month_number(word: str) -> int:
    word = word.lower().rstrip(".")
    return next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(word[:3]))


def _around(day: date | None, slack: int = 1) -> list[Span]:
    return [] if day is None else [(day - timedelta(days=slack), day + timedelta(days=slack))]


def _absolute_days(text: str, today: date) -> list[Span]:
    """Dates with a day in them; a date without its year is read in this year and the
    years either side (a birthday "on 3 June" said in December)."""
    spans: list[Span] = []
    for match in _ISO.finditer(text):
        spans += _around(_day_or_none(int(match[1]), int(match[2]), int(match[3])))
    found = [(m[1], m[2], m[3]) for m in _DAY_MONTH.finditer(text)]
    found += [(m[2], m[1], m[3]) for m in _MONTH_DAY.finditer(text)]
    for day, month, year in found:
        years = [int(year)] if year else [today.year - 1, today.year, today.year + 1]
        for each in years:
            spans += _around(_day_or_none(each, _month_number(month), int(day)))
    return spans


def _month_days(text: str, today: date) -> list[Span]:
    spans: list[Span] = []
    for match in _MONTH_ALONE.finditer(text):
        month = _month_number(match[1])
        years = [int(match[2])] if match[2] else [today.year - 1, today.year, today.year + 1]
        for year in years:
            last = date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)
            spans.append((date(year, month, 1), last))
    for match in _YEAR.finditer(text):
        spans.append((date(int(match[1]), 1, 1), date(int(match[1]), 12, 31)))
    return spans


def _relative_days(text: str, today: date) -> list[Span]:
    """Days named relative to the moment the line was said."""
    spans: list[Span] = []
    for match in _DAY_WORD.finditer(text):
        offset = {"yesterday": -1, "tomorrow": 1}.get(match[1].lower(), 0)
        spans += _around(today + timedelta(days=offset))
    if _WEEKDAY_WORD.search(text):  # "on Friday", "last Friday", "next Friday"
        spans.append((today - timedelta(days=8), today + timedelta(days=14)))
    for match in _NAMED_UNIT.finditer(text):
        length = _UNIT_DAYS["week" if match[2].lower() == "weekend" else match[2].lower()]
        which = match[1].lower()
        if which in ("last", "past"):
            spans.append((today - timedelta(days=2 * length), today))
        elif which == "this":
            spans.append((today - timedelta(days=length), today + timedelta(days=length)))
        else:
            spans.append((today, today + timedelta(days=2 * length)))
    for pattern, sign in ((_IN_COUNT, 1), (_AGO, -1)):
        for match in pattern.finditer(text):
            word = " ".join(match[1].lower().split())
            count = int(word) if word.isdigit() else _NUMBER[word]
            unit = _UNIT_DAYS[match[2].lower()]
            center = today + timedelta(days=sign * count * unit)
            spans += _around(center, max(unit, 1))
    return spans

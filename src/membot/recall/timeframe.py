"""When a query points: time expressions read as a date window, by rules.

``window_of("Which book did I finish a week ago?", now)`` is the span a line's date should
fall in for the question to be about it, or None when the query names no time. A date that
names its year counts without ``now``: ``7 July, 2023``, ``July 7th, 2023`` or ``2023-07-07``
(that day, a day either side), ``July 2023`` (that month), ``in 2023`` (that year). The other
rules cover what people say of their own past in a chat, relative to ``now`` (the moment of
asking; without it they are not read):

- a day of a month without its year (``March 3rd``, ``3 March``, ``the 3rd of March``) or a
  holiday on a fixed or reckoned day (Christmas, New Year's Eve, Valentine's Day, Halloween,
  Easter, Thanksgiving, ...): its latest occurrence not after ``now``, a day either side;
- ``N days / weeks / months / years ago`` (N a digit, a number word, "a", "a couple of",
  "a few"): the day ``N`` units back, give or take one unit;
- ``yesterday``, ``today``, ``the other day``;
- ``last week / month / year / weekend / <weekday>``: that span before ``now`` (a weekday
  a day either side);
- ``this week / month / year``, ``past / last N <units>``, ``past few <units>``: from that
  far back up to ``now``;
- a month name after ``in``, ``during``, ``of``, ``since``, ``early``, ``mid`` or ``late`` (a
  bare "June" or "August" may be a person): that month's latest occurrence not after ``now``.

A dated expression wins over a relative one, else the first found; a window never ends after
``now``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december"]  # fmt: skip

_COUNT = r"(\d+|" + "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + r")"
_UNIT = r"(day|week|month|year)s?"
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
_PAST = re.compile(rf"\b(?:past|last|previous)\s+{_COUNT}\s+{_UNIT}\b", re.I)
_LAST = re.compile(r"\blast\s+(week|month|year|weekend|" + "|".join(_WEEKDAYS) + r")\b", re.I)
_PAST_UNIT = re.compile(r"\b(?:past|this)\s+(week|month|year)\b", re.I)
_DAY_WORD = re.compile(r"\b(yesterday|today|the other day)\b", re.I)
_MONTH = re.compile(
    r"\b(?:(in|during|of|since|early|mid|late)\s+(?:-\s*)?)?("
    + "|".join(_MONTHS)
    + r")\b(?:,?\s+(\d{4}))?",
    re.I,
)
_YEAR = re.compile(r"\b(?:in|during)\s+((?:19|20)\d\d)\b", re.I)
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_OF_MONTH = re.compile(  # "March 3rd", "3 March", "the 3rd of March" (no year)
    rf"\b(?:the\s+)?{_ORDINAL}\s+(?:of\s+)?(" + "|".join(_MONTHS) + r")\b"
    r"|\b(" + "|".join(_MONTHS) + rf")\s+(?:the\s+)?{_ORDINAL}\b",
    re.I,
)
_MONTH_NAME = "(" + "|".join(_MONTHS) + ")"
_DATE = re.compile(  # "7 July, 2023", "the 7th of July 2023", "July 7th, 2023", "2023-07-07"
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAME},?\s+(\d{{4}})\b"
    rf"|\b{_MONTH_NAME}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s*(\d{{4}})\b"
    r"|\b(\d{4})-(\d\d)-(\d\d)\b",
    re.I,
)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[" ".join(word.lower().split())]


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1)
    end = datetime(year + month // 12, month % 12 + 1, 1)
    return start, end


def window_of(
    query: str, now: datetime | None = None, zone: tzinfo | None = UTC
) -> tuple[datetime, datetime] | None:
    """The [start, end) span ``query`` points to, in ``now``'s time zone (UTC for a naive
    ``now``; ``zone`` without one); None if none. Without ``now`` only dates that name their
    year count."""
    zone = (now.tzinfo or UTC) if now is not None else zone
    naive = now.replace(tzinfo=None) if now is not None else None
    try:
        span = _absolute(query)
        if span is None and naive is not None:
            span = _relative(query, naive)
    except (ValueError, OverflowError):  # "31 February, 2023", "3000 years ago"
        return None
    if span is None:
        return None
    start, end = span
    if naive is not None:
        end = min(end, naive)
    if end <= start:
        return None
    return start.replace(tzinfo=zone), end.replace(tzinfo=zone)


def _absolute(query: str) -> tuple[datetime, datetime] | None:
    """A day, a month of a year or a year the query names, the day a day either side."""
    if match := _DATE.search(query):
        if match[1]:
            day = datetime(int(match[3]), _MONTHS.index(match[2].lower()) + 1, int(match[1]))
        elif match[4]:
            day = datetime(int(match[6]), _MONTHS.index(match[4].lower()) + 1, int(match[5]))
        else:
            day = datetime(int(match[7]), int(match[8]), int(match[9]))
        return day - timedelta(days=1), day + timedelta(days=2)
    for match in _MONTH.finditer(query):
        if match[3] and (match[1] or _capitalised_month(match[2])):
            return _month_span(int(match[3]), _MONTHS.index(match[2].lower()) + 1)
    if match := _YEAR.search(query):
        year = int(match[1])
        return datetime(year, 1, 1), datetime(year + 1, 1, 1)
    return None


def _relative(query: str, now: datetime) -> tuple[datetime, datetime] | None:
    today = _day(now)
    if (day := _named_day(query, today)) is not None:
        return day - timedelta(days=1), day + timedelta(days=2)
    if match := _AGO.search(query):
        unit = _UNIT_DAYS[match[2].lower()]
        day = today - timedelta(days=_count(match[1]) * unit)
        return day - timedelta(days=unit), day + timedelta(days=unit + 1)
    if match := _PAST.search(query):
        return now - timedelta(days=_count(match[1]) * _UNIT_DAYS[match[2].lower()]), now
    if match := _LAST.search(query):
        word = match[1].lower()
        if word in _WEEKDAYS:
            back = (today.weekday() - _WEEKDAYS.index(word) - 1) % 7 + 1
            day = today - timedelta(days=back)
            return day - timedelta(days=1), day + timedelta(days=2)
        if word == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            return saturday - timedelta(days=1), saturday + timedelta(days=3)
        return now - timedelta(days=2 * _UNIT_DAYS[word]), now
    if match := _PAST_UNIT.search(query):
        return now - timedelta(days=_UNIT_DAYS[match[1].lower()]), now
    if match := _DAY_WORD.search(query):
        back = {"yesterday": 1, "today": 0}.get(match[1].lower(), 3)
        return today - timedelta(days=back + 1), today - timedelta(days=back - 1)
    for match in _MONTH.finditer(query):
        if not match[1]:  # a bare "June" or "August" may well be a person
            continue
        month = _MONTHS.index(match[2].lower()) + 1
        year = now.year if month <= now.month else now.year - 1
        return _month_span(year, month)
    return None


def _named_day(query: str, today: datetime) -> datetime | None:
    """The latest day not after ``today`` that ``query`` names by its month and day, or by a
    holiday; None if it names none ("May" only with a capital: "may I ...")."""
    if match := _DAY_OF_MONTH.search(query):
        month_word = match[2] or match[3]
        if month_word.lower() != "may" or month_word[0].isupper():
            month = _MONTHS.index(month_word.lower()) + 1
            number = int(match[1] or match[4])
            return _latest(today, _on(month, number))
    if match := _HOLIDAY.search(query):  # one group a holiday: the one that matched
        return _latest(today, _HOLIDAYS[(match.lastindex or 1) - 1][1])
    return None


def _latest(today: datetime, day_in: Callable[[int], datetime]) -> datetime:
    """``day_in(year)`` of this year, or of last year when it is still to come."""
    day = day_in(today.year)
    return day if day <= today else day_in(today.year - 1)


def _easter(year: int) -> datetime:
    """Easter Sunday of ``year`` (the Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    weekday = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 19 * weekday) // 433
    month = (h + weekday - 7 * m + 90) // 25
    return datetime(year, month, (h + weekday - 7 * m + 33 * month + 19) % 32)


def _thanksgiving(year: int) -> datetime:
    """The fourth Thursday of November of ``year`` (Thanksgiving in the United States)."""
    first = datetime(year, 11, 1)
    return first + timedelta(days=(3 - first.weekday()) % 7 + 21)


def _on(month: int, number: int) -> Callable[[int], datetime]:
    return lambda year: datetime(year, month, number)


# Holidays by the words that name them, and their day in a year (a name that another one
# opens, "christmas" of "christmas eve", comes after it).
_HOLIDAYS: tuple[tuple[str, Callable[[int], datetime]], ...] = (
    (r"christmas\s+eve", _on(12, 24)),
    (r"christmas(?:\s+day)?|xmas", _on(12, 25)),
    (r"boxing\s+day", _on(12, 26)),
    (r"new\s+year['’]?s\s+eve", _on(12, 31)),
    (r"new\s+year['’]?s(?:\s+day)?", _on(1, 1)),
    (r"valentine['’]?s(?:\s+day)?", _on(2, 14)),
    (r"(?:st\.?|saint)\s+patrick['’]?s\s+day", _on(3, 17)),
    (r"halloween", _on(10, 31)),
    (r"independence\s+day|fourth\s+of\s+july", _on(7, 4)),
    (r"easter(?:\s+sunday)?", _easter),
    (r"thanksgiving", _thanksgiving),
)
_HOLIDAY = re.compile(r"\b(?:" + "|".join(f"({words})" for words, _ in _HOLIDAYS) + r")\b", re.I)


def _capitalised_month(word: str) -> bool:
    return word[0].isupper() and word.lower() != "may"

"""The time a query names: "yesterday", "last May", "in March 2023", "two weeks ago" (issue 40.2).

A pure parser, no model: :func:`time_named` finds the first expression of time in a query and gives
the span it means, as of ``now`` (the search's clock), or None. Recall then prefers memories said in
that span (``memstream.recall.dates``). Only what can be read without knowing the conversation is
read: "the week before the trip" names a span relative to an event, which needs the event's date, so
it gives None rather than a guess.

Spans are half-open ``[start, end)`` in ``now``'s time zone: "yesterday" is the whole previous day,
"last May" the most recent May wholly before this month, "May" alone the most recent May up to now
(this month's if we are in May), "last week" the seven days before this week's Monday, "on Friday" the
most recent Friday before today, "over the weekend" the most recent Saturday and Sunday, "the week before
last" the week before last week.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Final, NamedTuple

MONTHS: Final[dict[str, int]] = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
WEEKDAYS: Final[dict[str, int]] = {
    name: i for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
NUMBERS: Final[dict[str, int]] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3,
}  # fmt: skip
_UNIT = r"(day|week|month|year)s?"
_COUNT = r"(\d{1,3}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(" + "|".join(WEEKDAYS) + r")"

_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH_YEAR = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r",?\s+(\d{4})\b")
_MONTH_DAY_YEAR = re.compile(r"\b" + _MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_MONTH_YEAR = re.compile(r"\b" + _MONTH + r",?\s+(?:of\s+)?(\d{4})\b")
_AGO = re.compile(r"\b" + _COUNT + r"\s+" + _UNIT + r"\s+ago\b")
_RELATIVE = re.compile(r"\b(last|this|past|previous|next)\s+(week(?:end)?|month|year|" + _WEEKDAY[1:-1] + r")\b")
_LAST_MONTH_NAME = re.compile(r"\b(last|this|in|during|since|early|late|mid)\s+" + _MONTH + r"(?!\s*\d)")
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b")
_DAY_WORDS = re.compile(
    r"\b(the day before yesterday|yesterday|today|tonight|this morning|this afternoon|this evening|last night)\b"
)
_WEEK_BEFORE_LAST = re.compile(r"\bthe week before last\b")
_OVER_WEEKEND = re.compile(r"\bover the weekend\b")  # "on the weekend" is as often a habit or a plan
_ON_WEEKDAY = re.compile(r"\bon\s+" + _WEEKDAY + r"\b")


class Span(NamedTuple):
    """The span a query names, ``[start, end)``, and the words that named it."""

    start: datetime
    end: datetime
    words: str

    def holds(self, when: datetime) -> bool:
        if when.tzinfo is None and self.start.tzinfo is not None:
            when = when.replace(tzinfo=self.start.tzinfo)
        elif when.tzinfo is not None and self.start.tzinfo is None:
            when = when.replace(tzinfo=None)
        return self.start <= when < self.end


def _day(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int, like: datetime) -> datetime:
    return _day(like).replace(year=year, month=month, day=1)


def _next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)


def _month_span(year: int, month: int, like: datetime, words: str) -> Span:
    start = _month_start(year, month, like)
    return Span(start, _next_month(start), words)


def _year_span(year: int, like: datetime, words: str) -> Span:
    start = _month_start(year, 1, like)
    return Span(start, start.replace(year=year + 1), words)


def _shift_months(when: datetime, months: int) -> datetime:
    index = when.year * 12 + when.month - 1 + months
    return when.replace(year=index // 12, month=index % 12 + 1, day=1)


def _count(word: str) -> int:
    """'3', 'three', 'a few', 'a couple of', 'an' as a number."""
    if word.isdigit():
        return int(word)
    return NUMBERS.get(word.removeprefix("a ") if word.startswith("a ") else word, 1)


def _valid_day(year: int, month: int, day: int, like: datetime) -> datetime | None:
    try:
        return _day(like).replace(year=year, month=month, day=day)
    except ValueError:
        return None


def _exact_day(text: str, now: datetime) -> Span | None:
    """A calendar day written out: 2025-02-03, 8 May 2023, May 8th, 2023 (an impossible day gives None)."""
    for pattern, year, month, day in ((_ISO_DAY, 1, 2, 3), (_DAY_MONTH_YEAR, 3, 2, 1), (_MONTH_DAY_YEAR, 3, 1, 2)):
        if m := pattern.search(text):
            number = int(m[month]) if m[month].isdigit() else MONTHS[m[month]]
            if (start := _valid_day(int(m[year]), number, int(m[day]), now)) is not None:
                return Span(start, start + timedelta(days=1), m[0])
    return None


def time_named(query: str, now: datetime) -> Span | None:
    """The span of time the query names, as of ``now``; None when it names none (see the module doc)."""
    text = query.casefold()
    today = _day(now)
    if (exact := _exact_day(text, now)) is not None:
        return exact
    if m := _MONTH_YEAR.search(text):
        return _month_span(int(m[2]), MONTHS[m[1]], now, m[0])
    if m := _DAY_WORDS.search(text):
        word = m[1]
        back = {"the day before yesterday": 2, "yesterday": 1, "last night": 1}.get(word, 0)
        start = today - timedelta(days=back)
        return Span(start, start + timedelta(days=1), word)
    if m := _AGO.search(text):
        count, unit = _count(m[1]), m[2]
        if unit == "day":
            start = today - timedelta(days=count)
            return Span(start, start + timedelta(days=1), m[0])
        if unit == "week":
            start = today - timedelta(days=7 * count + today.weekday())
            return Span(start, start + timedelta(days=7), m[0])
        if unit == "month":
            start = _shift_months(today, -count)
            return Span(start, _next_month(start), m[0])
        return _year_span(today.year - count, now, m[0])
    if m := _WEEK_BEFORE_LAST.search(text):
        monday = today - timedelta(days=today.weekday() + 14)
        return Span(monday, monday + timedelta(days=7), m[0])
    if m := _OVER_WEEKEND.search(text):  # the most recent weekend: this one once it has begun
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        return Span(saturday, saturday + timedelta(days=2), m[0])
    if m := _RELATIVE.search(text):
        which, unit = m[1], m[2]
        step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1}[which]
        if unit in ("week", "weekend"):
            monday = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
            if unit == "weekend":
                saturday = monday + timedelta(days=5)
                return Span(saturday, saturday + timedelta(days=2), m[0])
            return Span(monday, monday + timedelta(days=7), m[0])
        if unit == "month":
            start = _shift_months(today, step)
            return Span(start, _next_month(start), m[0])
        if unit == "year":
            return _year_span(today.year + step, now, m[0])
        # A weekday: "last Friday" is the most recent Friday before today, "this/next" the coming one.
        gap = (today.weekday() - WEEKDAYS[unit]) % 7
        if step < 0:
            day = today - timedelta(days=gap or 7)
        else:
            day = today + timedelta(days=(WEEKDAYS[unit] - today.weekday()) % 7 + (7 if step > 0 and gap == 0 else 0))
        return Span(day, day + timedelta(days=1), m[0])
    if m := _ON_WEEKDAY.search(text):  # "on Friday": the most recent one before today (we ask about the past)
        day = today - timedelta(days=(today.weekday() - WEEKDAYS[m[1]]) % 7 or 7)
        return Span(day, day + timedelta(days=1), m[0])
    if m := _LAST_MONTH_NAME.search(text):
        which, month = m[1], MONTHS[m[2]]
        if m[2] == "may" and which not in ("last", "in", "during"):
            return None  # "this may break", "since may be": the verb, not the month
        if which == "this":
            year = today.year
        elif which == "last":  # wholly before this month
            year = today.year if month < today.month else today.year - 1
        else:  # the most recent such month up to now, this one included
            year = today.year if month <= today.month else today.year - 1
        return _month_span(year, month, now, m[0])
    if m := _YEAR.search(text):
        return _year_span(int(m[1]), now, m[0])
    return None

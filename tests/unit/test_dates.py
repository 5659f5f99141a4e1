"""Issue 40.2: the time a query names, read without a model (memstream.rules.dates)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstream.rules.dates import time_named

#: A Wednesday.
NOW = datetime(2026, 11, 25, 15, 30, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did we decide yesterday?", day(2026, 11, 24), day(2026, 11, 25)),
        ("the bug we hit last night", day(2026, 11, 24), day(2026, 11, 25)),
        ("what did I say today about the cache", day(2026, 11, 25), day(2026, 11, 26)),
        ("the trip last May", day(2026, 5, 1), day(2026, 6, 1)),
        ("what happened last November", day(2025, 11, 1), day(2025, 12, 1)),  # wholly before this month
        ("in November, who called?", day(2026, 11, 1), day(2026, 12, 1)),  # this one, up to now
        ("in December", day(2025, 12, 1), day(2026, 1, 1)),  # the most recent December
        ("When did Caroline go hiking in May 2023?", day(2023, 5, 1), day(2023, 6, 1)),
        ("the talk on 8 May 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("the talk on May 8th, 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("the release of 2025-02-03", day(2025, 2, 3), day(2025, 2, 4)),
        ("two weeks ago", day(2026, 11, 9), day(2026, 11, 16)),
        ("3 days ago", day(2026, 11, 22), day(2026, 11, 23)),
        ("a couple of months ago", day(2026, 9, 1), day(2026, 10, 1)),
        ("a year ago", day(2025, 1, 1), day(2026, 1, 1)),
        ("last week", day(2026, 11, 16), day(2026, 11, 23)),
        ("this week", day(2026, 11, 23), day(2026, 11, 30)),
        ("last weekend", day(2026, 11, 21), day(2026, 11, 23)),
        ("last month", day(2026, 10, 1), day(2026, 11, 1)),
        ("last year", day(2025, 1, 1), day(2026, 1, 1)),
        ("last Friday", day(2026, 11, 20), day(2026, 11, 21)),
        ("last Wednesday", day(2026, 11, 18), day(2026, 11, 19)),
        ("during 2022", day(2022, 1, 1), day(2023, 1, 1)),
        ("the day before yesterday", day(2026, 11, 23), day(2026, 11, 24)),
        ("what did we fix on Friday?", day(2026, 11, 20), day(2026, 11, 21)),  # the most recent one
        ("the call on Wednesday", day(2026, 11, 18), day(2026, 11, 19)),  # today's weekday: a week back
        ("what did Ben cook over the weekend", day(2026, 11, 21), day(2026, 11, 23)),
        ("the week before last", day(2026, 11, 9), day(2026, 11, 16)),
        ("in 2023, where did they travel?", day(2023, 1, 1), day(2024, 1, 1)),
    ],
)
def test_a_named_time_is_the_span_it_means(query: str, start: datetime, end: datetime) -> None:
    span = time_named(query, NOW)
    assert span is not None, query
    assert (span.start, span.end) == (start, end), query
    assert span.words in query.casefold()


@pytest.mark.parametrize(
    "query",
    [
        "how do I rotate the signing key",
        "this may break the build",  # the verb, not the month
        "the week before the trip",  # relative to an event: no guess
        "what dish did you suggest for the shared meal on the weekend",  # a habit or a plan, not a past span
        "port 2023 on the gateway",  # a number, not a year
        "the 2025-02-30 release",  # no such day
    ],
)
def test_a_query_naming_no_time_gives_none(query: str) -> None:
    assert time_named(query, NOW) is None


def test_a_span_holds_what_was_said_in_it_whatever_the_time_zone_marking() -> None:
    span = time_named("yesterday", NOW)
    assert span is not None
    assert span.holds(datetime(2026, 11, 24, 23, 59, tzinfo=UTC))
    assert span.holds(datetime(2026, 11, 24, 8, 0))  # naive: taken in the span's zone
    assert not span.holds(day(2026, 11, 25))

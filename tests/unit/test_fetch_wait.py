"""How long a consumer's fetch waits: short while records come, growing while none do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from memstream.kafka.fetch_wait import FetchWait, adapt_fetch_wait


def waits_after(wait: FetchWait, outcomes: str) -> list[int]:
    """The wait after each fetch: ``r`` brought records, ``.`` came back empty."""
    return [wait.fetched(outcome == "r") for outcome in outcomes]


def test_the_wait_stays_short_for_three_empty_fetches_then_doubles_to_the_idle_wait() -> None:
    wait = FetchWait(20, 200)
    assert wait.ms == 20
    assert waits_after(wait, "r.......") == [20, 20, 20, 40, 80, 160, 200, 200]


def test_the_first_records_bring_the_short_wait_back() -> None:
    wait = FetchWait(20, 200)
    assert waits_after(wait, "......r..") == [20, 20, 40, 80, 160, 200, 20, 20, 20]


def test_equal_waits_never_change_and_an_idle_wait_below_the_busy_one_is_raised_to_it() -> None:
    assert set(waits_after(FetchWait(500, 500), "r" + "." * 40)) == {500}
    assert set(waits_after(FetchWait(300, 100), "." * 40)) == {300}


def test_a_zero_busy_wait_still_grows_when_idle() -> None:
    assert waits_after(FetchWait(0, 100), "........") == [0, 0, 2, 4, 8, 16, 32, 64]


def test_the_patience_is_the_empty_fetches_before_the_wait_grows() -> None:
    assert waits_after(FetchWait(10, 1000, patience=1), "...") == [20, 40, 80]


def test_a_long_idle_spell_does_not_overflow() -> None:
    wait = FetchWait(20, 200)
    waits_after(wait, "." * 10_000)
    assert wait.ms == 200


class StubFetcher:
    """aiokafka's fetcher as adapt_fetch_wait sees it: each fetch's outcome, and the wait it sends."""

    def __init__(self, outcomes: list[bool]) -> None:
        self._fetch_max_wait_ms = 500
        self.outcomes = outcomes
        self.sent_with: list[int] = []

    async def _proc_fetch_request(self, assignment: Any, node_id: int, request: Any) -> bool:
        self.sent_with.append(self._fetch_max_wait_ms)
        return self.outcomes.pop(0)


def test_each_fetch_is_sent_with_the_wait_its_predecessors_earned() -> None:
    fetcher = StubFetcher([True, False, False, False, False, False, True, False])
    consumer = SimpleNamespace(_fetcher=fetcher)
    adapt_fetch_wait(consumer, FetchWait(20, 200))
    assert fetcher._fetch_max_wait_ms == 20  # the consumer's own 500 is replaced from the first fetch

    async def fetch_all() -> list[bool]:
        return [await fetcher._proc_fetch_request(None, 0, None) for _ in range(8)]

    assert asyncio.run(fetch_all()) == [True, False, False, False, False, False, True, False]
    assert fetcher.sent_with == [20, 20, 20, 20, 40, 80, 160, 20]
    assert fetcher._fetch_max_wait_ms == 20

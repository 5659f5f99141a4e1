"""How long a consumer's fetch waits: short while records come, growing while none do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from memstream.kafka.doorbell import Doorbell
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
        self._fetcher_timeout = 0.2  # aiokafka's default poll of its fetch routine
        self.outcomes = outcomes
        self.sent_with: list[int] = []

        self.closed = False

    async def _proc_fetch_request(self, assignment: Any, node_id: int, request: Any) -> bool:
        self.sent_with.append(self._fetch_max_wait_ms)
        return self.outcomes.pop(0)

    async def close(self) -> None:
        self.closed = True


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


def test_a_wakeable_wait_is_held_by_the_broker_up_to_200_ms_and_beyond_is_a_short_fetch_and_a_pause() -> None:
    wait = FetchWait(20, 2000, wakeable=True)
    seen = []
    for outcome in "r" + "." * 9:
        wait.fetched(outcome == "r")
        seen.append((wait.request_ms, wait.pause_ms))
    assert seen == [
        (20, 0), (20, 0), (20, 0), (40, 0), (80, 0), (160, 0), (20, 300), (20, 620), (20, 1260), (20, 1980)
    ]  # fmt: skip
    wait.woken()
    assert (wait.request_ms, wait.pause_ms) == (20, 0)
    unwakeable = FetchWait(20, 2000)
    waits_after(unwakeable, "." * 10)
    assert (unwakeable.request_ms, unwakeable.pause_ms) == (2000, 0)
    assert FetchWait(500, 2000, wakeable=True, held_ms=100).held_ms == 500  # never below the busy wait


def test_a_wakeable_wait_without_a_doorbell_is_refused() -> None:
    consumer = SimpleNamespace(_fetcher=StubFetcher([]))
    with pytest.raises(ValueError, match="doorbell"):
        adapt_fetch_wait(consumer, FetchWait(20, 2000, wakeable=True))


def pause_began(bell: Doorbell) -> asyncio.Event:
    """Set when a consumer begins to wait on ``bell`` (a ring from then on ends that wait)."""
    began = asyncio.Event()
    wait = bell.wait

    async def waiting(seen: int, timeout: float) -> bool:
        began.set()
        return await wait(seen, timeout)

    bell.wait = waiting  # type: ignore[method-assign]
    return began


def test_a_ring_ends_the_pause_and_the_next_fetch_goes_out_at_once_with_the_short_wait() -> None:
    fetcher = StubFetcher([False] * 100)
    bell = Doorbell()
    wait = FetchWait(1, 60_000, patience=1, wakeable=True, held_ms=1)
    adapt_fetch_wait(SimpleNamespace(_fetcher=fetcher), wait, bell)

    async def scenario() -> list[bool]:
        # Empty fetches until the pause after one would be long (minutes): the stub answers at once.
        outcomes = []
        while wait.pause_ms < 1000:
            outcomes.append(await fetcher._proc_fetch_request(None, 0, None))
        fetcher.outcomes = [False, True]
        began = pause_began(bell)
        pausing = asyncio.ensure_future(fetcher._proc_fetch_request(None, 0, None))
        await began.wait()  # the fetch came back empty and its pause began
        bell.ring()
        outcomes.append(await asyncio.wait_for(pausing, 30))  # not the minute the pause could last
        outcomes.append(await fetcher._proc_fetch_request(None, 0, None))
        return outcomes

    outcomes = asyncio.run(scenario())
    assert outcomes[-2:] == [False, True]
    assert fetcher.sent_with[-1] == 1 and wait.empty == 0


def test_a_ring_between_sending_a_fetch_and_pausing_after_it_is_not_missed() -> None:
    bell = Doorbell()
    fetcher = StubFetcher([False] * 20)
    answer = fetcher._proc_fetch_request

    async def published_while_in_flight(assignment: Any, node_id: int, request: Any) -> bool:
        bell.ring()  # acknowledged after the broker read this fetch's partitions, before it answered
        return await answer(assignment, node_id, request)

    fetcher._proc_fetch_request = published_while_in_flight  # type: ignore[method-assign]
    wait = FetchWait(1, 60_000, patience=0, wakeable=True, held_ms=1)
    adapt_fetch_wait(SimpleNamespace(_fetcher=fetcher), wait, bell)
    wait.empty = 20  # the pause after this fetch would be a minute

    async def one() -> bool:
        return await asyncio.wait_for(fetcher._proc_fetch_request(None, 0, None), 30)

    assert asyncio.run(one()) is False
    assert wait.empty == 0  # woken: the next fetch goes out at once


def test_closing_the_consumer_ends_a_pause() -> None:
    fetcher = StubFetcher([False] * 5)
    bell = Doorbell()
    wait = FetchWait(1, 60_000, patience=0, wakeable=True, held_ms=1)
    adapt_fetch_wait(SimpleNamespace(_fetcher=fetcher), wait, bell)
    wait.empty = 20

    async def scenario() -> bool:
        began = pause_began(bell)
        pausing = asyncio.ensure_future(fetcher._proc_fetch_request(None, 0, None))
        await began.wait()
        await asyncio.sleep(0)  # into the wait proper
        await fetcher.close()
        return await asyncio.wait_for(pausing, 30)

    assert asyncio.run(scenario()) is False
    assert fetcher.closed and not bell._waiters


def test_the_fetch_routine_sleeps_as_long_as_the_next_fetch_may_take() -> None:
    """aiokafka's fetch routine wakes every ``_fetcher_timeout`` to re-plan every partition, though
    it can send nothing while a fetch or its pause is under way: it sleeps as long as the next
    fetch may take (held and paused), and polls at aiokafka's 0.2 s again once records flow."""
    fetcher = StubFetcher([False] * 12 + [True])
    wait = FetchWait(20, 2000)  # not wakeable: the broker holds the whole wait (the ledger's consumer)
    adapt_fetch_wait(SimpleNamespace(_fetcher=fetcher), wait)

    async def fetches() -> list[float]:
        polls = []
        for _ in range(13):
            await fetcher._proc_fetch_request(None, 0, None)
            polls.append(fetcher._fetcher_timeout)
        return polls

    polls = asyncio.run(fetches())
    assert polls[:2] == [0.2, 0.2]  # short waits: aiokafka's own poll
    assert polls[-2] == 2.0  # idle: the held 2 s fetch
    assert polls[-1] == 0.2  # records again

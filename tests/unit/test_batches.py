"""agents.base.batches: what has arrived goes at once, batches grow under load, acks follow processing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from memstream.agents.base import batches


class FakeConsumer:
    """The worker's consumer as batches() tells it an event is finished."""

    def __init__(self) -> None:
        self.finished: list[tuple[object, str]] = []

    def finished_with(self, message: object, stage: str) -> None:
        self.finished.append((message, stage))


class FakeEvent:
    def __init__(self, n: int) -> None:
        self.n = n
        self.acked = False
        self.message = f"message {n}"
        consumer = FakeConsumer()
        self.app = SimpleNamespace(consumer=SimpleNamespace(finished=consumer.finished_with))
        self.marks = consumer.finished

    @property
    def finished(self) -> bool:
        return self.marks == [(self.message, "test")]

    def ack(self) -> None:
        self.acked = True


class FakeStream:
    """Events are put in by the test; ``noack().events()`` yields them as a Faust stream would."""

    def __init__(self) -> None:
        self.arrivals: asyncio.Queue[FakeEvent | BaseException] = asyncio.Queue()

    def noack(self) -> FakeStream:
        return self

    async def events(self) -> AsyncIterator[FakeEvent]:
        while True:
            item = await self.arrivals.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def arrive(self, *numbers: int) -> list[FakeEvent]:
        events = [FakeEvent(n) for n in numbers]
        for event in events:
            self.arrivals.put_nowait(event)
        return events


def batches_of(stream: FakeStream, max_size: int, *, linger: float = 0.0) -> AsyncGenerator[list[FakeEvent], None]:
    """``batches`` over the fakes, which stand in for Faust's stream and events: typed as what they are."""
    return cast(
        "AsyncGenerator[list[FakeEvent], None]", batches(cast(Any, stream), max_size, stage="test", linger=linger)
    )


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_lone_event_goes_at_once_without_waiting_for_a_window() -> None:
    stream = FakeStream()
    it = batches_of(stream, 64)
    stream.arrive(1)
    started = time.monotonic()
    batch = await asyncio.wait_for(anext(it), 5)
    assert [e.n for e in batch] == [1]
    assert time.monotonic() - started < 1.0
    await it.aclose()


async def test_events_waiting_together_form_one_batch_capped_at_max_size() -> None:
    stream = FakeStream()
    it = batches_of(stream, 3)
    stream.arrive(1)
    first = await anext(it)
    # While the first batch is processed, five more arrive: they come as 3 then 2, in order.
    stream.arrive(2, 3, 4, 5, 6)
    await _settle()
    second = await it.asend(None)
    third = await anext(it)
    assert [[e.n for e in b] for b in (first, second, third)] == [[1], [2, 3, 4], [5, 6]]
    await it.aclose()


async def test_events_are_acked_only_when_their_batch_is_processed() -> None:
    stream = FakeStream()
    it = batches_of(stream, 8)
    events = stream.arrive(1, 2)
    await _settle()
    batch = await anext(it)
    assert batch == events and not any(e.acked or e.finished for e in events)
    later = stream.arrive(3)
    await anext(it)  # resuming the generator means the first batch was processed
    assert all(e.acked and e.finished for e in events) and not later[0].acked
    await it.aclose()
    assert not later[0].acked and not later[0].finished  # stopped mid-batch: redelivered after a restart, not committed


async def test_linger_waits_for_more_events_up_to_its_deadline() -> None:
    stream = FakeStream()
    it = batches_of(stream, 8, linger=0.3)
    stream.arrive(1)

    async def later() -> None:
        await asyncio.sleep(0.05)
        stream.arrive(2)

    arriving = asyncio.create_task(later())
    started = time.monotonic()
    batch = await anext(it)
    waited = time.monotonic() - started
    await arriving
    assert [e.n for e in batch] == [1, 2]
    assert waited >= 0.25  # not full: it lingered to the deadline
    await it.aclose()


async def test_a_failing_stream_raises_in_the_consumer_instead_of_hanging() -> None:
    stream = FakeStream()
    it = batches_of(stream, 8)
    stream.arrivals.put_nowait(RuntimeError("consumer crashed"))
    with pytest.raises(RuntimeError, match="consumer crashed"):
        await asyncio.wait_for(anext(it), 5)

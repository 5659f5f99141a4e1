"""A loop that closes with a task that ignores its cancellation still closes (tests/support/loops.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.support.loops import cancel_left_tasks


async def _deaf() -> None:
    """A task that swallows every cancellation, as a Faust service retrying a broker that is gone did."""
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue


def test_a_runner_closes_although_a_task_ignores_its_cancellation() -> None:
    closed = threading.Event()

    def run() -> None:
        with pytest.warns(UserWarning, match="1 tasks did not end"), asyncio.Runner() as runner:
            runner.get_loop().create_task(_deaf(), name="deaf")
            runner.run(asyncio.sleep(0))
        closed.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    # The bound is 10 s; asyncio's own teardown would never return.
    assert closed.wait(120), "the runner's close waited for a task that never ends"


def test_tasks_that_end_when_cancelled_are_waited_for_and_none_is_stuck() -> None:
    loop = asyncio.new_event_loop()
    ended: list[str] = []

    async def polite() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ended.append("polite")
            raise

    task = loop.create_task(polite())
    loop.run_until_complete(asyncio.sleep(0))
    assert cancel_left_tasks(loop, seconds=30) == []
    assert task.cancelled() and ended == ["polite"]
    loop.close()

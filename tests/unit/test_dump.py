"""``kill -USR1`` on a worker writes where its tasks wait and each partition's commit state."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest
from faust.types import TP

from memstream.kafka.order import Order
from memstream.telemetry import dump


class FakeConsumer:
    """What memstream's consumer keeps per partition, for two partitions."""

    def __init__(self) -> None:
        self.a, self.b = TP("p.turns", 0), TP("p.turns", 1)
        self._committed_offset = {self.a: 12, self.b: None}
        self._finished = {self.a: {14, 15, 13}}
        self._held = {self.a: (12, 3)}
        self._read_offset = {self.a: 16}
        self._order = Order()
        for offset in (12, 13, 14, 15):
            self._order.take("snapshot", self.a, offset, handed_before_a_seek=False)
        self._order.take("history", self.a, 12, handed_before_a_seek=False)

    def assignment(self) -> set[TP]:
        return {self.b, self.a}

    def highwater(self, tp: TP) -> int:
        return {self.a: 20, self.b: 0}[tp]


def test_partitions_tell_position_commit_finished_and_hold() -> None:
    lines = dump.partitions(FakeConsumer())
    assert lines == [
        "p.turns:0 read 16 committed 12 highwater 20 finished 13..15 (3) held (12, 3) next history 13, snapshot 16",
        "p.turns:1 read None committed None highwater 0 finished - held - next -",
    ]


def test_partitions_of_a_consumer_not_started() -> None:
    class NotStarted:
        def assignment(self) -> set[TP]:
            raise RuntimeError("consumer not started")

    assert dump.partitions(NotStarted()) == ["no assignment (RuntimeError('consumer not started'))"]


async def _parked(event: asyncio.Event) -> None:
    await event.wait()


async def test_tasks_show_where_each_waits() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_parked(event), name="parked-on-event")
    await asyncio.sleep(0)
    blocks = dump.tasks(asyncio.get_running_loop())
    event.set()
    await task
    mine = [line for line in blocks if line.startswith("parked-on-event: ")]
    assert len(mine) == 1
    # The whole chain, down to the asyncio call it is suspended in.
    assert "test_dump.py:" in mine[0] and " _parked > locks.py:" in mine[0] and mine[0].endswith(" wait")


async def test_sigusr1_logs_the_report_and_keeps_running(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.get_running_loop()

    class App:
        consumer = FakeConsumer()

    dump.install(loop, lambda: App())
    try:
        with caplog.at_level(logging.WARNING, logger="memstream.telemetry.dump"):
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(100):
                if "SIGUSR1" in caplog.text:
                    break
                await asyncio.sleep(0.01)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    assert "--- event loop 0:" in caplog.text
    assert "p.turns:0 read 16 committed 12" in caplog.text
    assert "test_sigusr1_logs_the_report_and_keeps_running" in caplog.text  # this very task, waiting

"""Table recovery ends on a changelog whose end offset no record is delivered at (issue 35.6).

The fake consumer reproduces the offset gap the heavy worker-kill run hung on: the changelog's end
(highwater) counts an offset no record arrives at, the consumer's position is past it, and Faust's
recovery (its aborted-transaction fix-up runs only in exactly-once mode) waits forever."""

from __future__ import annotations

import asyncio
from collections import Counter

import faust
from faust.types import TP

from memstream.kafka.recovery import Recovery, TableManager, passed_ends

CHANGELOG = TP("memstream-windows-changelog", 0)


class FakeConsumer:
    """A consumer whose fetch is at ``position``; a seek reads from there again, and nothing new
    arrives (the offset past the last record has none)."""

    def __init__(self, position: int | None) -> None:
        self.at = position
        self.seeks: list[dict[TP, int]] = []

    async def position(self, tp: TP) -> int | None:
        return self.at

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.append(dict(partitions))


def recovering(position: int | None) -> tuple[faust.App, Recovery, FakeConsumer]:
    app = faust.App("recovery-test", broker="kafka://127.0.0.1:1", store="memory://", TableManager=TableManager)
    recovery = app.tables.recovery  # type: ignore[attr-defined]
    assert isinstance(recovery, Recovery)
    consumer = FakeConsumer(position)
    app._consumer = consumer  # type: ignore[assignment]
    recovery.in_recovery = True
    # Faust keeps the partition's last offset (end - 1): the end is 446, the last record that
    # arrives is at 444, the offset 445 is a marker no fetch delivers.
    recovery.active_highwaters = Counter({CHANGELOG: 445})
    recovery.active_offsets = Counter({CHANGELOG: 444})
    return app, recovery, consumer


def test_faust_alone_waits_for_an_end_no_record_arrives_at() -> None:
    app, recovery, _ = recovering(position=446)
    assert not app.in_transaction  # so Faust's own fix-up (detect_aborted_tx) never runs
    assert recovery.need_recovery()


def test_an_end_the_consumer_passed_with_nothing_arriving_counts_as_read() -> None:
    _, recovery, consumer = recovering(position=446)

    async def looks() -> None:
        assert await recovery.settle_passed_ends() == {}  # first look: records may still be on the way
        assert await recovery.settle_passed_ends() == {}  # passed: read again from the last one received
        assert consumer.seeks == [{CHANGELOG: 444}]
        assert await recovery.settle_passed_ends() == {}
        assert await recovery.settle_passed_ends() == {CHANGELOG: 445}  # still nothing: a gap
        assert consumer.seeks == [{CHANGELOG: 444}]

    asyncio.run(looks())
    assert not recovery.need_recovery()


def test_records_that_arrive_after_the_read_again_are_not_skipped() -> None:
    _, recovery, _ = recovering(position=446)

    async def looks() -> None:
        await recovery.settle_passed_ends()
        await recovery.settle_passed_ends()  # read again
        recovery.active_offsets[CHANGELOG] = 445  # the dropped record came: recovery ends by itself

    asyncio.run(looks())
    assert not recovery.need_recovery()
    assert asyncio.run(recovery.settle_passed_ends()) == {}


def test_a_consumer_short_of_the_end_keeps_recovery_waiting() -> None:
    _, recovery, _ = recovering(position=445)

    async def looks() -> None:
        for _ in range(3):
            assert await recovery.settle_passed_ends() == {}

    asyncio.run(looks())
    assert recovery.need_recovery()


def test_passed_ends_waits_for_the_queue_and_for_records_still_arriving() -> None:
    highwaters = {CHANGELOG: 445}
    assert passed_ends(highwaters, {CHANGELOG: 444}, {CHANGELOG: 444}, {CHANGELOG: 446}, queue_empty=False) == {}
    assert passed_ends(highwaters, {CHANGELOG: 444}, {CHANGELOG: 440}, {CHANGELOG: 446}, queue_empty=True) == {}
    assert passed_ends(highwaters, {CHANGELOG: 444}, {}, {CHANGELOG: 446}, queue_empty=True) == {}
    assert passed_ends(highwaters, {CHANGELOG: 444}, {CHANGELOG: 444}, {CHANGELOG: None}, queue_empty=True) == {}
    assert passed_ends(highwaters, {CHANGELOG: 445}, {CHANGELOG: 445}, {CHANGELOG: 446}, queue_empty=True) == {}
    got = passed_ends(highwaters, {CHANGELOG: 444}, {CHANGELOG: 444}, {CHANGELOG: 446}, queue_empty=True)
    assert got == {CHANGELOG: 445}

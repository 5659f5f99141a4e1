"""The worker's consumer commits a partition only past events a stage processed.

Each case is one of the ways Faust 0.15.3's own rule committed past an unprocessed event
(memstream.kafka.commits): a worker SIGKILLed after such a commit never sees the event again.
The cases run on the consumer class the pipeline's app really uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from faust.types import TP, Message

from memstream.kafka.commits import committable
from memstream.kafka.transport import MemstreamApp

TOPIC = "unit-commits-facts"
TP0 = TP(TOPIC, 0)


@pytest.fixture
def consumer() -> Iterator[Any]:
    app = MemstreamApp("unit-commits", broker="kafka://127.0.0.1:9", store="memory://", autodiscover=False)
    app.topics.acking_topics.add(TOPIC)
    app.flow_control.resume()
    yield app.consumer


def message(offset: int, generation: int | None) -> Message:
    return Message(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None, generation_id=generation)


def test_the_rule_commits_only_a_run_that_starts_at_the_floor() -> None:
    assert committable([10, 11, 12], 10) == 13
    assert committable([11, 12], 10) is None  # 10 is not processed
    assert committable([10, 12], 10) == 11
    assert committable([5, 6], None) is None  # where this assignment began is not known yet
    assert committable([3, 4], 5) is None  # acks below the floor are history
    assert committable([10, 14], 10, never_delivered=[11, 12, 13]) == 15


def test_an_unacked_event_just_after_the_committed_offset_holds_the_commit(consumer: Any) -> None:
    # Offset 10 (a slow session's snapshot) is in flight; 11 (another session's) is done.
    consumer._committed_offset[TP0] = 10
    consumer._finished[TP0] = {11}
    assert consumer._new_offset(TP0) is None
    consumer._finished[TP0].add(10)
    assert consumer._new_offset(TP0) == 12


def test_a_partition_never_committed_commits_from_where_it_started_reading(consumer: Any) -> None:
    # Faust keeps no committed offset for a partition with none (or with 0 committed).
    consumer._finished[TP0] = {5, 6}
    assert consumer._new_offset(TP0) is None
    consumer._floors[TP0] = 3
    assert consumer._new_offset(TP0) is None  # 3 and 4 are not processed
    consumer._finished[TP0] |= {3, 4}
    assert consumer._new_offset(TP0) == 7


def test_only_what_a_stage_finished_moves_the_commit_never_an_ack(consumer: Any) -> None:
    """Faust acks events no stage applied (an exchange was lost so with every other commit fault
    fixed: its turns acked, never in any session window, committed past): acks count for nothing."""
    app = consumer.app
    app.consumer_generation_id = 2
    consumer._committed_offset[TP0] = 10
    stale = message(10, generation=1)  # fetched before the rebalance; fetched again after the seek
    assert consumer.ack(stale) is False
    assert stale.acked  # so a graceful stop does not wait for it
    assert consumer.ack(message(11, generation=2)) is True
    assert consumer._new_offset(TP0) is None  # acked, not finished
    consumer.finished(message(10, generation=2), "snapshot")
    assert consumer._new_offset(TP0) == 11


def test_an_event_of_a_topic_two_stages_read_counts_once_both_finished_it(consumer: Any) -> None:
    consumer._readers[TOPIC] = 2  # snapshots: extract and rollout
    consumer._committed_offset[TP0] = 10
    consumer.finished(message(10, generation=0), "extract")
    consumer.finished(message(10, generation=0), "extract")  # read again: still one stage
    assert consumer._new_offset(TP0) is None
    consumer.finished(message(10, generation=0), "rollout")
    assert consumer._new_offset(TP0) == 11


async def test_a_hole_in_the_fetched_offsets_is_not_counted_as_processed(consumer: Any) -> None:
    # Faust records a gap when an offset arrives beyond the last one read. Its read offsets race
    # with a seek: events delivered (and skipped) while perform_seek ran made a "gap" of 734-1014
    # on a turns partition, and the commit passed 51 exchanges no stage had seen (bench.faults.chaos).
    consumer._committed_offset[TP0] = 3
    await consumer._add_gap(TP0, 4, 7)
    consumer._finished[TP0] = {3, 8}
    assert consumer._new_offset(TP0) == 4  # 4-7 are not known to be anything but unprocessed


class Seeks:
    """The consumer's seeks, recorded instead of made (no broker here)."""

    def __init__(self, consumer: Any) -> None:
        self.made: list[tuple[TP, int]] = []
        consumer.assignment = lambda: {TP0}
        consumer.flow_active = True
        consumer.seek = self.seek

    async def seek(self, tp: TP, offset: int) -> None:
        self.made.append((tp, offset))


async def test_an_event_passed_over_unprocessed_is_read_again(consumer: Any) -> None:
    seeks = Seeks(consumer)
    consumer._committed_offset[TP0] = 10
    consumer._finished[TP0] = {11, 12}  # 10 was skipped (its ack ignored); the fetch position is past it
    consumer._new_offset(TP0)
    await consumer._read_passed_over_again()
    assert seeks.made == []  # one round: it may still be on its way to a stage
    consumer._new_offset(TP0)
    await consumer._read_passed_over_again()
    assert seeks.made == [(TP0, 10)]
    consumer._finished[TP0].add(10)  # read again, processed
    assert consumer._new_offset(TP0) == 13
    await consumer._read_passed_over_again()
    assert seeks.made == [(TP0, 10)]


async def test_an_event_a_stage_still_holds_is_not_read_again(consumer: Any) -> None:
    seeks = Seeks(consumer)
    consumer._committed_offset[TP0] = 10
    consumer._finished[TP0] = {11}
    slow = message(10, generation=0)  # a slow session's snapshot, in its stage
    consumer._unacked_messages.add(slow)
    for _ in range(5):
        consumer._new_offset(TP0)
        await consumer._read_passed_over_again()
    assert seeks.made == []


async def test_an_offset_held_again_after_a_read_again_waits_twice_as_long(consumer: Any) -> None:
    seeks = Seeks(consumer)
    consumer._committed_offset[TP0] = 10
    consumer._finished[TP0] = {11}
    rounds: list[int] = []
    for round_ in range(1, 15):
        consumer._new_offset(TP0)
        await consumer._read_passed_over_again()
        if len(seeks.made) > len(rounds):
            rounds.append(round_)
    assert rounds == [2, 6, 14]  # 2 rounds, then 4, then 8: never a busy loop on an offset that never comes
    consumer.app.flow_control.suspend()  # a rebalance: its own seek reads from the committed offset
    for _ in range(20):
        consumer._new_offset(TP0)
        await consumer._read_passed_over_again()
    assert len(seeks.made) == 3

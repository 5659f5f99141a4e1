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
    consumer._acked[TP0] = [11]
    assert consumer._new_offset(TP0) is None
    consumer._acked[TP0].append(10)
    assert consumer._new_offset(TP0) == 12


def test_a_partition_never_committed_commits_from_where_it_started_reading(consumer: Any) -> None:
    # Faust keeps no committed offset for a partition with none (or with 0 committed).
    consumer._acked[TP0] = [5, 6]
    assert consumer._new_offset(TP0) is None
    consumer._floors[TP0] = 3
    assert consumer._new_offset(TP0) is None  # 3 and 4 are not processed
    consumer._acked[TP0] += [3, 4]
    assert consumer._new_offset(TP0) == 7


def test_the_ack_of_an_event_skipped_in_a_rebalance_is_not_counted(consumer: Any) -> None:
    app = consumer.app
    app.consumer_generation_id = 2
    consumer._committed_offset[TP0] = 10
    stale = message(10, generation=1)  # fetched before the rebalance; fetched again after the seek
    assert consumer.ack(stale) is False
    assert stale.acked  # so a graceful stop does not wait for it
    assert consumer._new_offset(TP0) is None
    app.flow_control.suspend()
    assert consumer.ack(message(10, generation=2)) is False
    app.flow_control.resume()
    assert consumer.ack(message(10, generation=2)) is True
    assert consumer._new_offset(TP0) == 11


async def test_a_hole_in_the_fetched_offsets_does_not_cover_the_event_after_it(consumer: Any) -> None:
    consumer._committed_offset[TP0] = 3
    # Offset 3 read, then 7 arrives: 4-6 were never delivered; 7 is not processed yet.
    await consumer._add_gap(TP0, 4, 7)
    consumer._acked[TP0] = [3, 8]
    assert consumer._new_offset(TP0) == 7
    consumer._committed_offset[TP0] = 7  # as the commit records it
    consumer._acked[TP0].append(7)
    assert consumer._new_offset(TP0) == 9

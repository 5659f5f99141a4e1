"""A partition's true end offset, on Kafka and on the embedded broker alike.

Tansu 0.6 answers a ListOffsets "latest" query with the last batch's base offset + 1,
not the offset after its last record: after one 20-record batch it says 1 (measured;
the fetch response's high watermark for the same partition says 20). Everything that
needs "how far does this partition go" — replay's copy, Faust's table recovery, drain
checks — asks here instead: ListOffsets first (the true end on Kafka, a lower bound on
Tansu), then one Fetch per leader at the last listed batch, whose high watermark is the
true end on both. The fetch asks for a byte and a 1 ms wait (Tansu 0.6 answers a fetch with
a 0 ms wait with no topics at all, measured), so it costs about one round trip.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import NoError as _NoError
from aiokafka.errors import for_code
from aiokafka.protocol.fetch import FetchRequest

READ_UNCOMMITTED = 0
#: The shortest wait Tansu answers with partition data (0 gets an empty response).
FETCH_WAIT_MS = 1


async def end_offsets(consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The offset after the last record of each partition (what Kafka calls the high watermark)."""
    tps = list(partitions)
    if not tps:
        return {}
    listed: Mapping[TopicPartition, int] = await consumer.end_offsets(tps)
    begins: Mapping[TopicPartition, int] = await consumer.beginning_offsets(tps)
    return await high_watermarks(consumer._client, tps, listed, begins)


async def high_watermarks(
    client: Any, tps: list[TopicPartition], listed: Mapping[TopicPartition, int], begins: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Each partition's high watermark from a fetch at its last listed batch, never below
    the listed end (a partition whose leader is unknown or that answers with an error
    keeps the listed value)."""
    ends = {tp: int(listed[tp]) for tp in tps}
    by_leader: dict[int, dict[str, list[tuple[int, int, int]]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for tp in tps:
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader == -1:
            continue
        at = max(int(begins.get(tp, 0)), ends[tp] - 1)
        by_leader[leader][tp.topic].append((tp.partition, at, 1))
    for leader, topics in by_leader.items():
        request = FetchRequest(FETCH_WAIT_MS, 0, 1, READ_UNCOMMITTED, list(topics.items()))
        response = await client.send(leader, request)
        for topic, partitions in response.topics:
            for partition, error_code, highwater, *_ in partitions:
                tp = TopicPartition(topic, partition)
                if for_code(error_code) is _NoError and tp in ends:
                    ends[tp] = max(ends[tp], int(highwater))
    return ends

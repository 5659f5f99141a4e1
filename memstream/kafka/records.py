"""Reading a topic's records up to its true end, once, outside any consumer group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.kafka import offsets


async def read_records(
    bootstrap: str, wanted: Mapping[TopicPartition, set[int] | None], *, max_fetch_bytes: int = 1024 * 1024
) -> list[Any]:
    """The records (aiokafka ``ConsumerRecord``) of each partition up to its end as of now, in
    partition order: those at the ``wanted`` offsets, or all of a partition mapped to None.
    The ends are the true ones (Tansu's ListOffsets is short of them, memstream.kafka.offsets)."""
    if not wanted:
        return []
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",  # a partition whose first records are gone starts at its earliest
        max_partition_fetch_bytes=max_fetch_bytes,
    )
    await consumer.start()
    try:
        tps = sorted(wanted)
        consumer.assign(tps)
        ends: dict[TopicPartition, int] = await offsets.end_offsets(consumer, tps)
        pending = set()
        for tp in tps:
            chosen = wanted[tp]
            first = min(chosen) if chosen else 0
            if ends[tp] > first:
                consumer.seek(tp, first)
                pending.add(tp)
        found: dict[TopicPartition, list[Any]] = {tp: [] for tp in tps}
        while pending:
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
            if not pending:
                break
            for tp, messages in (await consumer.getmany(*pending, timeout_ms=500)).items():
                chosen = wanted[tp]
                found[tp] += [m for m in messages if m.offset < ends[tp] and (chosen is None or m.offset in chosen)]
        return [record for tp in tps for record in found[tp]]
    finally:
        await consumer.stop()

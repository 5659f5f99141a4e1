"""The fault harness's trace of a lost exchange names the last topic that holds it, and its window.

It read only the first topic of the turn path: its first ``assign`` narrowed the client's metadata to
that topic, so every later one had no partitions and was skipped. Every trace said "lost after turns"
and "never in a window", whatever the pipeline had done with the exchange.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.kafka.broker import EmbeddedBroker
from memstream.topics import SNAPSHOTS, TURNS, topic_name
from tests.support.chaos import exchange_text, trace_lost

pytestmark = [pytest.mark.e2e]

QUESTION = "kernel falcon walnut willow 2-0?"
ANSWER = "quartz saddle ember violin."


async def publish(bootstrap: str, records: list[tuple[str, int, bytes]]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = sorted({topic for topic, _, _ in records})
        await admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1) for name in names])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for topic, partition, value in records:
            await producer.send_and_wait(topic, value, key=b"s2", partition=partition)
    finally:
        await producer.stop()


def test_a_trace_follows_an_exchange_past_the_turns_topic_into_its_window() -> None:
    prefix = f"trace{uuid.uuid4().hex[:8]}"
    turns, snapshots = topic_name(prefix, TURNS), topic_name(prefix, SNAPSHOTS)
    window = f"{prefix}-snapshot-sessions-changelog"
    with EmbeddedBroker() as broker:
        asyncio.run(
            publish(
                broker.bootstrap,
                [
                    (turns, 0, b"other turn"),
                    (turns, 0, f'{{"content":"{QUESTION}"}}'.encode()),
                    (turns, 0, f'{{"content":"{ANSWER}"}}'.encode()),
                    (window, 0, f'{{"applied":[{{"content":"{ANSWER}"}}]}}'.encode()),
                    (snapshots, 1, b"another snapshot"),
                    (snapshots, 1, f'{{"text":"[user] {QUESTION}"}}'.encode()),
                ],
            )
        )

        trace = asyncio.run(trace_lost(broker.bootstrap, prefix, [exchange_text(QUESTION, ANSWER)]))

    assert "lost after snapshots p1@1, group committed None" in trace
    assert "answer p0@2, in a window" in trace

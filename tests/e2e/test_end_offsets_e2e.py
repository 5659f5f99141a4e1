"""True end offsets on the embedded broker: Tansu 0.6 answers ListOffsets "latest" with the
last batch's base offset + 1, so everything that reads "to the end" asks memstream.kafka.offsets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.kafka import offsets
from memstream.kafka.broker import EmbeddedBroker
from memstream.worker.replay import Start, copy_turns
from tests.e2e.conftest import start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


@pytest_asyncio.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    with EmbeddedBroker() as started:
        yield started


async def one_batch(bootstrap: str, topic: str, count: int, *, partitions: int = 1) -> None:
    """``count`` records in as few batches as the producer makes (one per partition here)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=200)
    await producer.start()
    try:
        futures = [await producer.send(topic, b"record %d" % i, key=b"k", partition=0) for i in range(count)]
        await producer.flush()
        assert [(await f).offset for f in futures] == list(range(count))
    finally:
        await producer.stop()


async def test_end_of_a_one_batch_partition_is_after_its_last_record(broker: EmbeddedBroker) -> None:
    await one_batch(broker.bootstrap, "twenty", 20)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition("twenty", 0)
        assert await offsets.end_offsets(consumer, [tp]) == {tp: 20}
    finally:
        await consumer.stop()


async def test_end_of_an_empty_partition_is_zero(broker: EmbeddedBroker) -> None:
    await one_batch(broker.bootstrap, "empty", 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition("empty", 0)
        assert await offsets.end_offsets(consumer, [tp]) == {tp: 0}
    finally:
        await consumer.stop()


async def test_replay_copies_every_record_of_a_batch(broker: EmbeddedBroker) -> None:
    await one_batch(broker.bootstrap, "source", 20)
    await one_batch(broker.bootstrap, "target", 0)
    copied = await copy_turns(broker.bootstrap, "source", "target", Start(), lambda done, total: None)
    assert copied == 20


async def test_faust_highwaters_are_true_ends(tmp_path: Path) -> None:
    """Table recovery reads changelogs up to ``consumer.highwaters``: it must be the true end."""
    running = await start_pipeline(tmp_path / "data")
    try:
        await one_batch(running.bootstrap, "batched", 20)
        tp = TopicPartition("batched", 0)
        assert await running.pipeline.app.consumer.highwaters(tp) == {tp: 20}
    finally:
        await running.stop()

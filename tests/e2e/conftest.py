"""End-to-end fixtures: the real embedded broker, store and embedder, a fake Anthropic API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest_asyncio
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from memstream.kafka.records import read_records
from memstream.schemas import decode
from memstream.worker import runner
from tests.conftest import make_settings

T = TypeVar("T")

#: The longest any e2e wait may take before the test fails (never a fixed sleep).
DEADLINE_SECONDS = 90.0


async def eventually(
    check: Callable[[], Awaitable[T | None]], *, timeout: float = DEADLINE_SECONDS, what: str = ""
) -> T:
    """Poll ``check`` until it returns a truthy value, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or check}; last value: {last!r}")


async def read_topic(
    bootstrap: str, topic: str, *, until: Callable[[list[Any]], bool], timeout: float = DEADLINE_SECONDS
) -> list[Any]:
    """Consume a topic from the beginning as a downstream service would, until ``until`` holds."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for messages in batch.values():
                records.extend(messages)
            if until(records):
                return records
        raise AssertionError(f"timed out reading {topic}: {len(records)} records")
    finally:
        await consumer.stop()


async def read_whole(bootstrap: str, topics: Iterable[str]) -> dict[str, list[ConsumerRecord[bytes, bytes]]]:
    """Every record each topic holds now, each partition read to its true end (a topic not created yet
    holds none). For checks that something is nowhere: reading until a timeout may pass before the
    records arrive, and so prove nothing."""
    names = list(dict.fromkeys(topics))
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()  # the cluster's metadata, for partitions_for_topic
        wanted = {TopicPartition(t, p): None for t in names for p in sorted(consumer.partitions_for_topic(t) or [])}
    finally:
        await consumer.stop()
    records: dict[str, list[ConsumerRecord[bytes, bytes]]] = {t: [] for t in names}
    for record in await read_records(bootstrap, wanted):
        records[record.topic].append(record)
    return records


def values(records: list[Any]) -> list[Any]:
    return [decode(r.value) for r in records]


async def start_pipeline(data_dir: Path, **overrides: Any) -> runner.Running:
    return await runner.start(make_settings(data_dir, **overrides), loglevel="warning")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def tmp_module_dir(tmp_path_factory: Any) -> AsyncIterator[Path]:
    yield tmp_path_factory.mktemp("e2e")

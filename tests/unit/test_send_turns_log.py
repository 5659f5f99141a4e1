"""The spool's batched send with the durable turn log (memstream.intake.publish.send_turns): the log's
commits overlap the sends, and still no turn is sent before it is on disk, nor acknowledged before
every one of them is."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstream.intake.publish import log_chunks, send_turns
from memstream.intake.turnlog import TurnLog
from memstream.schemas import Turn, decode


def turns(count: int) -> list[Turn]:
    now = datetime.now(UTC)
    return [
        Turn(
            session_id=f"s{i % 5}",
            project=f"/p{i % 3}",
            role="user" if i % 2 == 0 else "assistant",
            content=f"turn {i}",
            ts=now,
            user="dev@example.com",
        )
        for i in range(count)
    ]


class Producer:
    """Counts, at each send, the turns another connection reads in the log file (committed ones only)."""

    def __init__(self, path: Path) -> None:
        self.reader = sqlite3.connect(path)
        self.sent: list[bytes] = []
        self.on_disk_at_send: list[int] = []

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        self.on_disk_at_send.append(self.reader.execute("SELECT COUNT(*) FROM turns").fetchone()[0])
        self.sent.append(value)
        delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        delivered.set_result(None)
        await asyncio.sleep(0)  # the loop turns, as aiokafka's send lets its sender run
        return delivered


def test_chunks_cover_the_batch_in_order_and_grow() -> None:
    for count in (0, 1, 127, 128, 129, 300, 1000, 2000, 5000):
        chunks = log_chunks(count)
        assert [i for a, b in chunks for i in range(a, b)] == list(range(count))
        sizes = [b - a for a, b in chunks]
        assert sizes == sorted(sizes)
    assert len(log_chunks(2000)) == 4  # commits grow as log2 of the batch, not with it


async def test_every_turn_is_on_disk_before_it_is_sent_and_all_before_the_ack(tmp_path: Path) -> None:
    batch = turns(1000)
    with TurnLog(tmp_path / "log.db") as log:
        producer = Producer(tmp_path / "log.db")
        sent = await send_turns(producer, "t", batch, log=log)
        assert sent == 1000
        # The i-th turn sent was already committed to the log (another connection counted it).
        assert all(on_disk > i for i, on_disk in enumerate(producer.on_disk_at_send))
        assert [t.content for t in map(decode, producer.sent)] == [t.content for t in batch]  # type: ignore[union-attr]
        assert [t.content for t in map(decode, (item.event for item in log.unfinished()))] == [  # type: ignore[union-attr]
            t.content for t in batch
        ]
        assert log.last_published() == 1000  # acknowledged: every turn flagged


async def test_a_failed_send_leaves_the_logged_turns_unpublished(tmp_path: Path) -> None:
    class Failing(Producer):
        async def send(self, topic: str, value: bytes, key: bytes) -> Any:
            if len(self.sent) == 200:
                raise ConnectionError("broker gone")
            return await super().send(topic, value, key)

    with TurnLog(tmp_path / "log.db") as log:
        with pytest.raises(ConnectionError):
            await send_turns(Failing(tmp_path / "log.db"), "t", turns(1000), log=log)
        assert log.last_published() == 0  # the next start publishes what the log holds
        assert log.count_unfinished() >= 200

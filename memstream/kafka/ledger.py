"""The forgotten scopes, as every process sees them: the compacted ``forgotten`` topic, followed live.

The forget barrier travels keyed by scope, so it reaches every stage whose state is keyed by
scope. The snapshot agent's state is keyed by session: each worker follows the whole ledger
with one consumer of its own (no group, every partition, from the beginning) to learn which
of its sessions' windows were said before a forget.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memstream.kafka.doorbell import Doorbell
from memstream.kafka.fetch_wait import FetchWait, adapt_fetch_wait
from memstream.schemas import ForgetScope, decode

log = logging.getLogger(__name__)
#: How long one poll of the ledger waits for news. A poll returns as soon as records come, so
#: this only sets how often an idle follower wakes up for nothing.
POLL_MS = 60_000


def ledger_of(app: Any) -> ForgottenLedger:
    """The worker's ledger (``MemstreamApp.forgotten_ledger``), made at first use: the snapshot
    agent reads it, and the forget agent and the API's forget sink record into it at once."""
    ledger = getattr(app, "forgotten_ledger", None)
    if ledger is None:
        ledger = app.forgotten_ledger = ForgottenLedger()
    return ledger


class ForgottenLedger:
    def __init__(self) -> None:
        self._at: dict[str, datetime] = {}

    def record(self, op: ForgetScope) -> None:
        previous = self._at.get(op.scope_key)
        self._at[op.scope_key] = op.forgotten_at if previous is None else max(previous, op.forgotten_at)

    def latest(self, *scope_keys: str) -> datetime | None:
        """The latest forget of any of these scopes (None: never forgotten, as far as known)."""
        found = [self._at[key] for key in scope_keys if key and key in self._at]
        return max(found) if found else None

    async def follow(
        self,
        bootstrap: str,
        topic: str,
        *,
        security: Mapping[str, Any] | None = None,
        fetch_max_wait_ms: int = 500,
        idle_wait_ms: int = 0,
        doorbell: Doorbell | None = None,
    ) -> None:
        """Read the ledger from its beginning and keep reading it until cancelled.

        Fetches wait as the pipeline's own consumers do (``memstream.kafka.fetch_wait.FetchWait``):
        ``fetch_max_wait_ms`` while forgets come, up to ``idle_wait_ms`` while none do; with a
        ``doorbell``, the idle wait is a pause it ends (``memstream.kafka.doorbell``). A forget
        this worker publishes or consumes is recorded at once besides (``ledger_of``), so
        following the topic matters for the forgets other workers took.
        """
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=fetch_max_wait_ms,
            **(security or {}),
        )
        await consumer.start()
        wait = FetchWait(fetch_max_wait_ms, idle_wait_ms, wakeable=doorbell is not None)
        adapt_fetch_wait(consumer, wait, doorbell)
        try:
            partitions = consumer.partitions_for_topic(topic)
            while not partitions:
                await consumer._client.force_metadata_update()
                partitions = consumer.partitions_for_topic(topic)
                if not partitions:
                    await asyncio.sleep(1.0)
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                batch = await consumer.getmany(*tps, timeout_ms=POLL_MS)
                for records in batch.values():
                    for record in records:
                        try:
                            op = decode(record.value) if record.value else None
                        except ValueError:
                            log.warning("undecodable record on %s at offset %d", topic, record.offset)
                            continue
                        if isinstance(op, ForgetScope):
                            self.record(op)
        finally:
            await consumer.stop()


def stale_window(updated_at: datetime | None, forgotten_at: datetime | None) -> bool:
    """Was a session's window last written no later than a forget of its project or user?

    A window of unknown age (written before its time was kept) counts as stale once its scope
    was forgotten: better to start a window afresh than to carry forgotten words into it.
    """
    if forgotten_at is None:
        return False
    return updated_at is None or updated_at <= forgotten_at

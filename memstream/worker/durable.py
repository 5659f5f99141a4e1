"""The turn log's two sides in `memstream up` (memstream.intake.turnlog): recovery on start, done by sweep.

**Recovery.** Before the worker reads anything, :func:`recover` publishes every unfinished turn of the
log again, in log order (each session's order), to the fresh broker: what the broker held in memory
when `up` died comes back, ahead of any new turn. A turn that had been stored already is stored again
under the same content-derived id, so it lands once.

**Done means stored.** :class:`DoneSweep` marks turns done outside the agents' hot path: every
:data:`SWEEP_SECONDS` it reads the highest turn the broker acknowledged, then looks whether the
pipeline holds anything unprocessed (every partition of every topic read to its end, nothing read
but unacked, no stage busy). When two looks in a row find it so, with the topics' ends and the events
handled unchanged between them, every stage has finished every record written before the first
look, so the turns published before it reached the store (raw mode: its exchange's memory; LLM mode:
its snapshot's facts decided, since a parked snapshot is a record not finished yet). A session's
trailing turns after its last answer wait in the snapshot stage's window, so they stay unfinished
until MEMSTREAM_PHASE1_IDLE_SECONDS have passed (its timer stores them). Under a steady stream of
turns no look finds the pipeline idle: turns are marked at the next pause, and a crash before it
only makes the next start publish more turns again. The sweep also applies the log's retention.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.intake.turnlog import TurnLog
from memstream.kafka import offsets
from memstream.settings import Settings
from memstream.telemetry import metrics
from memstream.topics import ALL_TOPICS, TURNS, topic_name

log = logging.getLogger(__name__)

#: How often `up` looks whether the pipeline is idle, to mark turns done.
SWEEP_SECONDS = 2.0
#: How often the sweep deletes the done turns past MEMSTREAM_TURN_LOG_RETENTION_DAYS.
EXPIRE_SECONDS = 3600.0
#: Turns sent per round on recovery.
RECOVER_BATCH = 2_000


async def recover(settings: Settings, bootstrap: str) -> int:
    """Publish the log's unfinished turns again, in order; how many. Nothing where the log is off."""
    turnlog = TurnLog.for_settings(settings)
    if turnlog is None:
        return 0
    try:
        pending = await asyncio.to_thread(lambda: list(turnlog.unfinished()))
        if not pending:
            return 0
        topic = topic_name(settings.topic_prefix, TURNS)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{settings.topic_prefix}-recover")
        await producer.start()
        try:
            for start in range(0, len(pending), RECOVER_BATCH):
                batch = pending[start : start + RECOVER_BATCH]
                sent = [await producer.send(topic, item.event, key=item.key.encode()) for item in batch]
                for delivery in sent:
                    await delivery
                await asyncio.to_thread(turnlog.published, [item.seq for item in batch])
        finally:
            await producer.stop()
        log.warning(
            "the turn log held %d turns whose memory was not stored yet: published again (%d sessions)",
            len(pending),
            len({item.key for item in pending}),
        )
        return len(pending)
    finally:
        turnlog.close()


@dataclass(frozen=True)
class _Look:
    through: int
    ends: dict[TopicPartition, int]
    handled: float


class DoneSweep:
    """Marks the log's turns done when the pipeline is seen idle twice in a row (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.turnlog = TurnLog.for_settings(settings)
        self._next = 0.0
        self._next_expiry = 0.0
        self._last: _Look | None = None
        self._probe: AIOKafkaConsumer | None = None
        self._probe_of = ""
        #: Seconds of this process's time spent sweeping, and turns marked (what durability costs).
        self.spent = 0.0
        self.marked = 0

    async def tick(self, app: Any, bootstrap: str) -> int:
        """One look, at most every :data:`SWEEP_SECONDS`; the turns marked done by it."""
        if self.turnlog is None or time.monotonic() < self._next:
            return 0
        self._next = time.monotonic() + SWEEP_SECONDS
        began = time.process_time()
        try:
            return await self._look(app, bootstrap)
        except Exception:  # the broker is away a moment (a fresh start): the next look tries again
            log.debug("turn log: could not look at the pipeline", exc_info=True)
            self._last = None
            return 0
        finally:
            # The WAL's checkpoint is done here, not in the commits that accept turns (turnlog.BACKSTOP_PAGES).
            try:
                await asyncio.to_thread(self.turnlog.checkpoint)
            except sqlite3.Error:  # busy a moment: the next tick checkpoints
                log.debug("turn log: no checkpoint this time", exc_info=True)
            self.spent += time.process_time() - began

    async def _look(self, app: Any, bootstrap: str) -> int:
        assert self.turnlog is not None
        through = await asyncio.to_thread(self.turnlog.last_published)
        consumer = app.consumer
        sources = {topic_name(self.settings.topic_prefix, spec) for spec in ALL_TOPICS}
        tps = sorted(TopicPartition(tp.topic, tp.partition) for tp in consumer.assignment() if tp.topic in sources)
        probe = await self._probe_for(bootstrap)
        ends = await offsets.end_offsets(probe, tps) if tps else {}
        handled = sum(s.value for family in metrics.EVENTS_PROCESSED.collect() for s in family.samples)
        look = _Look(through, dict(ends), handled)
        previous, self._last = self._last, (look if tps and _idle(consumer, ends, sources) else None)
        marked = 0
        if (
            previous is not None
            and self._last is not None
            and previous.ends == look.ends
            and previous.handled == look.handled
        ):
            open_before = time.time() - 2 * self.settings.phase1_idle_seconds - 2 * SWEEP_SECONDS
            marked = await asyncio.to_thread(self.turnlog.mark_done, previous.through, open_before=open_before)
            self.marked += marked
        if time.monotonic() >= self._next_expiry:
            self._next_expiry = time.monotonic() + EXPIRE_SECONDS
            cutoff = time.time() - self.settings.turn_log_retention_days * 86_400
            if expired := await asyncio.to_thread(self.turnlog.expire, cutoff):
                log.info("turn log: %d stored turns past MEMSTREAM_TURN_LOG_RETENTION_DAYS deleted", expired)
        return marked

    async def _probe_for(self, bootstrap: str) -> AIOKafkaConsumer:
        """A consumer that only asks for the topics' ends, kept open (again after a broker fresh start)."""
        if self._probe is not None and self._probe_of != bootstrap:
            await self._probe.stop()
            self._probe = None
        if self._probe is None:
            probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await probe.start()
            self._probe, self._probe_of = probe, bootstrap
        return self._probe

    async def close(self) -> None:
        if self._probe is not None:
            await self._probe.stop()
            self._probe = None
        if self.turnlog is not None:
            self.turnlog.close()


def _idle(consumer: Any, ends: dict[TopicPartition, int], sources: set[str]) -> bool:
    """Is every partition read to its end, every event read acked, and no stage busy?"""
    for tp, end in ends.items():
        read = consumer._read_offset.get(tp)  # Faust keeps no public position
        if end > (read + 1 if read is not None else 0):
            return False
    if any(not m.acked and m.topic in sources for m in list(consumer.unacked)):
        return False
    return sum(s.value for family in metrics.IN_FLIGHT.collect() for s in family.samples) == 0

"""Bounds the embedded broker's memory (issue 29): start it afresh, carrying over what it still holds.

Tansu 0.6's memory engine keeps every record it is sent and frees nothing short of deleting a
topic: it applies no ``retention.ms`` and no compaction, and ``DeleteRecords`` is ``todo!()``
(``tansu-storage/src/dynostore.rs``). A turn costs it ~139 KB, so a `memstream up` left running
for a week of work grows by gigabytes. Its topics die with the process anyway (memory only): the
pipeline keeps what matters in the store and the data dir.

So once the broker holds more than ``MEMSTREAM_BROKER_MAX_MB``, `up` waits for a quiet moment
(no stage handled an event for :data:`QUIET_SECONDS`), stops the worker, and starts the broker and
the worker afresh on the same port, carrying over:

- what no stage had finished yet, record for record (:func:`unprocessed`: a turn that came in while
  the worker stopped is read in the fresh broker, in its place, before anything newer);
- the session windows and the Phase 1 progress (``snapshot-sessions``, ``rollout-state``) of the
  sessions that spoke within the Phase 1 age (:func:`recent`): a session in the middle of an
  exchange goes on with its question, and a session not distilled yet still is (the stages adopt
  them, ``agents.base.StateTable.adopt``);
- the ledger of forgotten scopes, and the dead letters not re-driven yet.

What a fresh broker does not have, as after any restart: the other tables (extract's done
snapshots, decide's recent memories: the store answers for them), the counters of `memstream
stats`, the memory-updated events a consumer other than the worker had not read, and the turns
topic's history, so `memstream replay` reaches back to the last fresh start only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.kafka import offsets
from memstream.kafka.broker import BrokerError
from memstream.kafka.records import read_records
from memstream.ops.redrive import Letter, dead_letters, redriven
from memstream.rules.snapshot import carried_over
from memstream.schemas import encode
from memstream.telemetry import metrics
from memstream.topics import DEAD_LETTERS, FORGOTTEN, topic_name
from memstream.worker import runner
from memstream.worker.replay import replays_running

log = logging.getLogger(__name__)

#: How often an idle `up` looks at the broker's size: one read of /proc, nothing sent to the broker.
CHECK_SECONDS = 60.0
#: How long no stage may have handled an event before the broker is started afresh: it is then
#: between turns (a developer's come every ten seconds or so, and take well under one to handle),
#: where the ~7 s the API's requests wait for the fresh worker (memstream.worker.api_thread) are least
#: likely to be felt. Nothing depends on it for correctness: whatever is still under way is carried over.
QUIET_SECONDS = 5.0
#: The tables carried over to the fresh broker.
CARRIED_TABLES = ("snapshot-sessions", "rollout-state")


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def events_handled() -> float:
    """Events every stage has handled so far (the metrics' own counter)."""
    return sum(sample.value for family in metrics.EVENTS_PROCESSED.collect() for sample in family.samples)


def _committed(consumer: Any, tp: TopicPartition) -> int:
    """The offset a partition is committed to, or where this assignment began reading it."""
    committed = consumer._committed_offset.get(tp)  # Faust keeps no public view of it
    start = committed if committed is not None else consumer._floors.get(tp, 0)
    return start or 0


def recent(states: Iterable[tuple[str, Any]], now: datetime, max_age: timedelta) -> dict[str, Any]:
    """The session states (``SessionState`` or ``RolloutState``) whose session spoke within ``max_age``
    (MEMSTREAM_PHASE1_MAX_AGE_DAYS, past which Phase 1 never distills it either): the only ones a
    fresh broker is given, so what is carried stays bounded by the sessions of a month, not of all
    time. A session that comes back later starts a new window; its ids stay apart (its lineage)."""
    kept = {}
    for key, state in states:
        if state is None:
            continue
        seen = datetime.fromtimestamp(state.last_seen, UTC) if getattr(state, "last_seen", 0) else state.last_ts
        if seen is not None and now - seen <= max_age:
            kept[key] = state
    return kept


def unprocessed(
    consumer: Any, tps: list[TopicPartition], ends: dict[TopicPartition, int]
) -> dict[TopicPartition, set[int]]:
    """Offsets below ``ends`` that no stage finished, per partition: from where the partition is
    committed on, less what the stages finished past it (a record some of its readers finished
    is read again by all: every stage is idempotent)."""
    found = {}
    for tp in tps:
        start = _committed(consumer, tp)
        finished = consumer._finished.get(tp, set())
        left = {offset for offset in range(start, ends.get(tp, 0)) if offset not in finished}
        if left:
            found[tp] = left
    return found


@dataclass
class Carried:
    """What the broker still held that the fresh one must be given."""

    #: Raw records, in their partition's order: (topic, partition, key, value, headers).
    records: list[tuple[str, int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = field(default_factory=list)
    letters: list[Letter] = field(default_factory=list)
    #: Per carried table, its states by key.
    states: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> str:
        return f"{len(self.records)} records, {len(self.letters)} dead letters, " + ", ".join(
            f"{len(states)} {name} states" for name, states in self.states.items()
        )


async def pending_dead_letters(bootstrap: str, prefix: str) -> list[Letter]:
    """Dead letters not re-driven yet: what a fresh broker must be given again."""
    done = await redriven(bootstrap, prefix)
    return [item for item in await dead_letters(bootstrap, prefix) if item.id not in done]


async def give(bootstrap: str, prefix: str, carried: Carried) -> None:
    """Write what was carried to the fresh broker: each record to its own partition, in order."""
    if not carried.records and not carried.letters:
        return
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, client_id=f"{prefix}-recycle", acks="all", max_request_size=64 * 1024 * 1024
    )
    await producer.start()
    try:
        for topic, partition, key, value, headers in carried.records:
            await producer.send(topic, value, key=key, partition=partition, headers=headers)
        for item in carried.letters:
            await producer.send(topic_name(prefix, DEAD_LETTERS), encode(item.letter), key=item.letter.stage.encode())
        await producer.flush()
    finally:
        await producer.stop()


class Recycler:
    """Decides, about every :data:`CHECK_SECONDS`, whether `up` starts its embedded broker afresh."""

    def __init__(self, max_mb: int, *, check_seconds: float = CHECK_SECONDS) -> None:
        self.max_mb = max_mb
        self.check_seconds = check_seconds
        self._next_check = time.monotonic() + check_seconds
        self._handled, self._since = events_handled(), time.monotonic()
        #: The reasons last logged, so a broker kept for the same reasons is not logged every minute.
        self._told: list[str] = []

    def quiet_for(self) -> float:
        """Seconds since a stage last handled an event (as far as this recycler has looked)."""
        handled = events_handled()
        if handled != self._handled:
            self._handled, self._since = handled, time.monotonic()
        return time.monotonic() - self._since

    async def due(self, running: runner.Running) -> bool:
        """Is the broker over its bound, at a quiet moment?"""
        if running.broker is None or running.broker.pid is None or self.max_mb <= 0:
            return False  # nothing to bound: on Kafka `up` asks every second, for nothing
        quiet_for = self.quiet_for()
        if time.monotonic() < self._next_check:
            return False
        self._next_check = time.monotonic() + self.check_seconds
        held = rss_mb(running.broker.pid)
        if held <= self.max_mb:
            return False
        reasons = [f"a stage handled an event {quiet_for:.1f}s ago"] if quiet_for < QUIET_SECONDS else []
        if replays := replays_running(running.settings):
            reasons.append(f"memstream replay {', '.join(replays)} reads this broker")
        if not reasons:
            letters = await pending_dead_letters(running.bootstrap, running.settings.topic_prefix)
            if truncated := sum(item.letter.truncated for item in letters):
                # Their whole record is only at its offset on this broker: not carried.
                reasons = [f"{truncated} dead letters keep only the head of their record: re-drive them first"]
        if reasons != self._told:
            self._told = reasons
            if reasons:
                log.info(
                    "the embedded broker holds %.0f MB (bound %d MB, MEMSTREAM_BROKER_MAX_MB); "
                    "it is started afresh at a quiet moment: %s",
                    held,
                    self.max_mb,
                    "; ".join(reasons[:5]),
                )
        return not reasons

    async def recycle(self, running: runner.Running) -> runner.Running:
        """Stop the worker, carry over what the broker holds that is still wanted, and start the
        broker and the worker afresh on the same port; the new ``Running``."""
        broker = running.broker
        assert broker is not None and broker.pid is not None, "only the embedded broker is started afresh"
        settings, bootstrap, prefix = running.settings, running.bootstrap, running.settings.topic_prefix
        held, began = rss_mb(broker.pid), time.monotonic()
        app: Any = running.pipeline.app
        consumer = app._consumer
        # aiokafka's own type (Faust's TP is a namedtuple of the same fields: the same dict key).
        tps = sorted(TopicPartition(tp.topic, tp.partition) for tp in consumer.assignment())
        tps = [tp for tp in tps if not tp.topic.endswith("-changelog")]
        providers = running.providers  # the store, embedder and clients stay open: only Kafka starts afresh
        # Nothing is processed from here on; the API's socket stays open, its requests wait for the next worker.
        await running.stop(keep_broker=True, keep_providers=True, keep_api=True)
        carried = await self.carry(app, consumer, tps, bootstrap, prefix, timedelta(days=settings.phase1_max_age_days))
        broker.stop()

        async def start(port: int | None) -> runner.Running:
            return await runner.start(
                settings,
                providers,
                broker_port=port,
                carried_states=carried.states,
                before_worker=lambda fresh_bootstrap: give(fresh_bootstrap, prefix, carried),
                web=running.api is not None,
                api=running.api,
            )

        try:
            fresh = await start(broker.port)
        except BrokerError as exc:  # its port was taken meanwhile: clients find the new one in runtime.json
            log.warning("the embedded broker could not start afresh on port %d (%s); on a free port", broker.port, exc)
            fresh = await start(None)
        fresh.owns_api = running.owns_api
        log.warning(
            "the embedded broker held %.0f MB (bound %d MB): started afresh in %.1fs, carrying %s; "
            "memstream replay now reaches turns from here on",
            held,
            self.max_mb,
            time.monotonic() - began,
            carried.summary(),
        )
        self._told, self._handled, self._since = [], events_handled(), time.monotonic()
        return fresh

    @staticmethod
    async def carry(
        app: Any, consumer: Any, tps: list[TopicPartition], bootstrap: str, prefix: str, max_age: timedelta
    ) -> Carried:
        """What the stopped worker's broker holds that the fresh one must be given."""
        probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await probe.start()
        try:
            ends = await offsets.end_offsets(probe, tps)
            ledger = [
                TopicPartition(topic_name(prefix, FORGOTTEN), p) for p in sorted(await _partitions(probe, prefix))
            ]
        finally:
            await probe.stop()
        wanted: dict[TopicPartition, set[int] | None] = {tp: None for tp in ledger}
        wanted.update(unprocessed(consumer, tps, ends))
        states = {name: recent(app.tables[name].items(), datetime.now(UTC), max_age) for name in CARRIED_TABLES}
        states["snapshot-sessions"] = {key: carried_over(state) for key, state in states["snapshot-sessions"].items()}
        records = await read_records(bootstrap, wanted, max_fetch_bytes=64 * 1024 * 1024)
        return Carried(
            records=[(r.topic, r.partition, r.key, r.value, list(r.headers or ())) for r in records],
            letters=await pending_dead_letters(bootstrap, prefix),
            states=states,
        )


async def _partitions(consumer: AIOKafkaConsumer, prefix: str) -> set[int]:
    await consumer.topics()  # loads the cluster's metadata
    return consumer.partitions_for_topic(topic_name(prefix, FORGOTTEN)) or set()

"""``GET /events``: memory-updated events as Server-Sent Events, each caller seeing only its scopes.

One :class:`EventHub` per API process tails the memory-updated topic with one consumer (no
group: it takes no partitions from the workers), keeps the newest events in a ring, and hands
each event to every subscriber whose principal may read its scope. A subscriber has a bounded
queue: when it is full the subscriber is dropped (its stream ends with an ``event: dropped``),
so a slow client never slows the hub, the other clients or the pipeline.

Resume: every event's SSE ``id`` is the caller's position in the topic, ``partition:next
offset`` for each partition (``0:12,1:7``). A client that reconnects sends it back as
``Last-Event-ID`` and gets every event after it: from the ring when it still holds them,
else read from the topic first (the topic keeps 30 days), then the ring, then live ones.

The hub starts with the first subscriber, so a process nobody follows pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import msgspec

from memstream.auth import Principal, may_read_memory
from memstream.schemas import MemoryUpdated, decode

log = logging.getLogger(__name__)
_ENCODER = msgspec.json.Encoder()

#: Events the hub keeps for resuming clients without reading the topic again.
RING_EVENTS = 10_000
#: Events one client may have waiting before it is dropped as too slow.
CLIENT_BUFFER = 1_000
#: Seconds between heartbeats (an SSE comment) on a quiet stream, so proxies keep it open.
HEARTBEAT_S = 15.0
#: What a browser waits before reconnecting after the stream ends (the SSE ``retry`` field).
RETRY_MS = 2_000
#: The most waiting events one write to a client carries.
WRITE_BATCH = 100
#: The longest a resume reads the topic for the events the ring no longer holds.
CATCH_UP_S = 10.0
#: The most events a resume reads back from the topic.
CATCH_UP_MAX = 100_000

#: Partition -> the next offset to deliver.
Positions = dict[int, int]


class Record(NamedTuple):
    partition: int
    offset: int
    event: MemoryUpdated
    #: The event as an SSE ``data`` line's JSON, encoded once for every client (empty: not yet).
    data: bytes = b""

    def encoded(self) -> Record:
        return self if self.data else self._replace(data=_ENCODER.encode(msgspec.to_builtins(self.event)))


class EventSource(Protocol):
    """Where the hub reads memory-updated events: the topic, or a fake in tests."""

    async def start(self) -> Positions:
        """Open the source; the position each partition's live tail begins at."""

    def live(self) -> AsyncIterator[Record]:
        """Records from the positions ``start`` returned on, in each partition's order, forever."""

    async def read_range(self, starts: Positions, ends: Positions) -> list[Record]:
        """Records from ``starts`` up to (not including) ``ends``, per partition."""

    async def stop(self) -> None: ...


def format_id(positions: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def parse_id(text: str) -> Positions | None:
    """Positions from a ``Last-Event-ID``; None when it is not one of ours (then the stream starts live)."""
    positions: Positions = {}
    for part in text.strip().split(","):
        partition, sep, offset = part.partition(":")
        if not sep or not partition.isdigit() or not offset.isdigit() or len(part) > 40:
            return None
        positions[int(partition)] = int(offset)
    return positions or None


def _shares_nothing(project: str) -> bool:
    return False


def visible(principal: Principal, event: MemoryUpdated, shares: Callable[[str], bool] = _shares_nothing) -> bool:
    """May this subscriber read the event's memory: its scope, and its speaker unless the project
    ``shares`` its members' conversations."""
    memory = event.memory
    return may_read_memory(principal, memory.scope_key, memory.speaker, shared=shares(memory.scope_key))


def frame(record: Record, event_id: str) -> bytes:
    """One SSE message: its id (the resume position), type and JSON data (one line)."""
    return b"id: " + event_id.encode() + b"\nevent: memory-updated\ndata: " + record.encoded().data + b"\n\n"


@dataclass(eq=False)
class Subscription:
    principal: Principal
    queue: asyncio.Queue[Record]
    shares: Callable[[str], bool] = _shares_nothing
    dropped: asyncio.Event = field(default_factory=asyncio.Event)


class EventHub:
    """Tails the topic once and fans its events out to subscribers (see the module docstring)."""

    def __init__(
        self,
        source: EventSource,
        *,
        ring: int = RING_EVENTS,
        client_buffer: int = CLIENT_BUFFER,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.source = source
        self.client_buffer = client_buffer
        self.heartbeat_s = heartbeat_s
        self._ring: deque[Record] = deque(maxlen=ring)
        #: Per partition, the lowest offset from which the ring holds every event.
        self._floor: Positions = {}
        #: Per partition, the next offset the hub will see.
        self._cursor: Positions = {}
        self._subscribers: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        #: Subscribers dropped as too slow since the hub started (for tests and the pipeline view).
        self.dropped = 0

    @property
    def clients(self) -> int:
        return len(self._subscribers)

    @property
    def held(self) -> int:
        """Events in the ring (what a resume can get without reading the topic)."""
        return len(self._ring)

    async def ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(), name="memstream-events-hub")
        await asyncio.shield(self._started)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._started = None
        for sub in self._subscribers:
            sub.dropped.set()
        self._subscribers.clear()

    async def _run(self) -> None:
        assert self._started is not None
        try:
            start = await self.source.start()
        except BaseException as exc:
            self._started.set_exception(exc)
            self._started = None
            raise
        self._floor = dict(start)
        self._cursor = dict(start)
        self._started.set_result(None)
        try:
            async for record in self.source.live():
                self._publish(record)
        finally:
            with contextlib.suppress(Exception):
                await self.source.stop()

    def _publish(self, record: Record) -> None:
        # Encoded here, once: a hundred clients then cost a hundred concatenations, not a hundred encodings.
        record = record.encoded()
        if len(self._ring) == self._ring.maxlen:
            oldest = self._ring[0]
            self._floor[oldest.partition] = oldest.offset + 1
        self._ring.append(record)
        self._cursor[record.partition] = record.offset + 1
        self._floor.setdefault(record.partition, record.offset)
        for sub in list(self._subscribers):
            if not visible(sub.principal, record.event, sub.shares):
                continue
            try:
                sub.queue.put_nowait(record)
            except asyncio.QueueFull:
                # Too slow: drop it rather than wait for it or grow without bound.
                self._subscribers.discard(sub)
                sub.dropped.set()
                self.dropped += 1
                log.info("dropped a slow /events client (%d events waiting)", sub.queue.qsize())

    async def open_stream(
        self, principal: Principal, last_event_id: str | None, shares: Callable[[str], bool] = _shares_nothing
    ) -> AsyncGenerator[bytes]:
        """The caller's SSE stream, subscribed before this returns (so a response that has started
        misses nothing published after): a resume's missed events first, then live ones, with heartbeats."""
        await self.ensure_started()
        since = parse_id(last_event_id) if last_event_id else None
        # Registered and the ring copied in one step (no await between): nothing is missed or sent twice.
        sub = Subscription(principal, asyncio.Queue(maxsize=self.client_buffer), shares=shares)
        self._subscribers.add(sub)
        return self._stream(sub, since, list(self._ring), dict(self._floor), dict(self._cursor))

    async def _stream(
        self, sub: Subscription, since: Positions | None, ring: list[Record], floor: Positions, cursor: Positions
    ) -> AsyncGenerator[bytes]:
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            if since is None:
                position = cursor
                backlog: list[Record] = []
            else:
                position = {p: since.get(p, floor.get(p, o)) for p, o in cursor.items()}
                position.update({p: o for p, o in since.items() if p not in position})
                backlog = await self._catch_up(position, floor) + [
                    r for r in ring if r.offset >= position.get(r.partition, 0)
                ]
            for record in backlog:
                if record.offset < position.get(record.partition, 0):
                    continue
                position[record.partition] = record.offset + 1
                if visible(sub.principal, record.event, sub.shares):
                    yield frame(record, format_id(position))
            async for chunk in self._follow(sub, position):
                yield chunk
        finally:
            self._subscribers.discard(sub)

    async def _catch_up(self, position: Positions, floor: Positions) -> list[Record]:
        """What the ring no longer holds: read from the topic, from ``position`` up to the ring's floor."""
        starts = {p: o for p, o in position.items() if p in floor and o < floor[p]}
        if not starts:
            return []
        ends = {p: floor[p] for p in starts}
        if sum(ends[p] - starts[p] for p in starts) > CATCH_UP_MAX:
            # Further back than a stream should replay: start at the newest CATCH_UP_MAX per partition.
            starts = {p: max(starts[p], ends[p] - CATCH_UP_MAX // len(starts)) for p in starts}
            position.update(starts)
        records = await asyncio.wait_for(self.source.read_range(starts, ends), CATCH_UP_S)
        return sorted(records, key=lambda r: (r.event.ts, r.partition, r.offset))

    async def _follow(self, sub: Subscription, position: Positions) -> AsyncIterator[bytes]:
        while True:
            if sub.dropped.is_set() and sub.queue.empty():
                yield b"event: dropped\ndata: {}\n\n"
                return
            try:
                first = await asyncio.wait_for(sub.queue.get(), self.heartbeat_s)
            except TimeoutError:
                if sub.dropped.is_set():
                    continue
                yield b": heartbeat\n\n"
                continue
            # What else is waiting goes out in the same write: the store emits in bursts, and one
            # write per burst rather than per event is most of what a client costs the server.
            records = [first]
            while len(records) < WRITE_BATCH and not sub.queue.empty():
                records.append(sub.queue.get_nowait())
            chunk = []
            for record in records:
                if record.offset < position.get(record.partition, 0):
                    continue  # already sent from the backlog
                position[record.partition] = record.offset + 1
                chunk.append(frame(record, format_id(position)))
            if chunk:
                yield b"".join(chunk)


class KafkaEventSource:
    """The memory-updated topic, read without a consumer group (no partitions taken from the workers)."""

    def __init__(self, bootstrap: str, topic: str, *, client_id: str, options: Mapping[str, Any] | None = None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.options = dict(options or {})
        self._consumer: Any = None

    def _new_consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            enable_auto_commit=False,
            group_id=None,
            **self.options,
        )

    async def _assign(self, consumer: Any) -> list[Any]:
        from aiokafka import TopicPartition

        partitions: set[int] | None = None
        for _ in range(50):  # the topic's metadata may take a moment on a fresh broker
            partitions = consumer.partitions_for_topic(self.topic) or await _refresh(consumer, self.topic)
            if partitions:
                break
            await asyncio.sleep(0.1)
        if not partitions:
            raise RuntimeError(f"the topic {self.topic} has no partitions (is the pipeline running?)")
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        return tps

    async def start(self) -> Positions:
        consumer = self._new_consumer()
        await consumer.start()
        self._consumer = consumer
        tps = await self._assign(consumer)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, ends[tp])
        return {tp.partition: ends[tp] for tp in tps}

    async def live(self) -> AsyncIterator[Record]:
        consumer = self._consumer
        while True:
            batch = await consumer.getmany(timeout_ms=500, max_records=500)
            for messages in _in_order(batch):
                for record in _decoded(messages):
                    yield record

    async def read_range(self, starts: Positions, ends: Positions) -> list[Record]:
        from aiokafka import TopicPartition

        consumer = self._new_consumer()
        await consumer.start()
        try:
            tps = [TopicPartition(self.topic, p) for p in starts]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, starts[tp.partition])
            out: list[Record] = []
            pending = {tp for tp in tps if starts[tp.partition] < ends[tp.partition]}
            while pending:
                batch = await consumer.getmany(*pending, timeout_ms=500)
                for messages in _in_order(batch):
                    out.extend(r for r in _decoded(messages) if r.offset < ends[r.partition])
                pending = {tp for tp in pending if await consumer.position(tp) < ends[tp.partition]}
            return out
        finally:
            await consumer.stop()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None


async def _refresh(consumer: Any, topic: str) -> set[int] | None:
    with contextlib.suppress(Exception):
        await consumer._client.force_metadata_update()  # aiokafka has no public refresh for an assign
    found: set[int] | None = consumer.partitions_for_topic(topic)
    return found


def _in_order(batch: Mapping[Any, Sequence[Any]]) -> list[Sequence[Any]]:
    return [batch[tp] for tp in sorted(batch, key=lambda tp: tp.partition)]


def _decoded(messages: Sequence[Any]) -> list[Record]:
    out = []
    for message in messages:
        try:
            event = decode(message.value)
        except Exception:  # a record we cannot read is skipped here; the pipeline dead-letters its own
            log.warning("skipped an undecodable record at %s:%s", message.partition, message.offset)
            continue
        if isinstance(event, MemoryUpdated):
            out.append(Record(message.partition, message.offset, event))
    return out

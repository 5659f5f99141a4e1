"""What every agent shares: the per-event guard that dead-letters instead of crashing, and batching."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import faust
import msgspec
from aiokafka.partitioner import murmur2
from faust.types import EventT, Message
from opentelemetry import trace

from memstream.kafka.codec import CODEC_NAME
from memstream.limits import DEAD_LETTER_PAYLOAD_MAX_BYTES, DEAD_LETTER_REASON_MAX_CHARS
from memstream.schemas import DeadLetter
from memstream.telemetry import metrics
from memstream.topics.headers import ATTEMPTS_HEADER, REDRIVEN_FROM_HEADER, header

log = logging.getLogger("memstream.agents")

T = TypeVar("T")


class DeadLetters:
    """Sends events a stage could not process to the dead-letter topic, with the reason.

    Never raises: the decode-error hook calls it from inside Faust's fetcher, where an
    exception would stop every stage. The payload is cut to fit a record (the record's
    topic, partition and offset point at the whole); if even that cannot be sent, the
    pointer alone is, and if that fails too, the pointer is logged as an error.
    """

    def __init__(self, topic: faust.TopicT):
        self.topic = topic
        self.count = 0

    async def dead_letter(self, stage: str, reason: str, message: Message | None) -> None:
        self.count += 1
        metrics.DEAD_LETTERS.labels(stage).inc()
        where = f"{message.topic}[{message.partition}]@{message.offset}" if message else "-"
        log.warning("dead-lettered by %s at %s: %s", stage, where, reason[:500])
        original = message.value if message and isinstance(message.value, bytes) else b""
        key = message.key if message and isinstance(message.key, bytes) else None
        # A re-driven event carries how often it was dead-lettered before, and from where.
        try:
            headers = message.headers if message else None
            previous = header(headers, ATTEMPTS_HEADER)
            redriven_from = (header(headers, REDRIVEN_FROM_HEADER) or b"").decode(errors="replace")
        except Exception:  # a poison record's headers too: never let them stop dead-lettering
            previous, redriven_from = None, ""
        record = DeadLetter(
            stage=stage,
            reason=reason[:DEAD_LETTER_REASON_MAX_CHARS],
            topic=message.topic if message else "",
            partition=message.partition if message else -1,
            offset=message.offset if message else -1,
            key=key[:DEAD_LETTER_PAYLOAD_MAX_BYTES] if key else key,
            payload=original[:DEAD_LETTER_PAYLOAD_MAX_BYTES],
            payload_bytes=len(original),
            truncated=len(original) > DEAD_LETTER_PAYLOAD_MAX_BYTES,
            ts=datetime.now(UTC),
            attempts=int(previous) + 1 if previous and previous.isdigit() else 1,
            redriven_from=redriven_from,
        )
        for attempt in (record, msgspec.structs.replace(record, payload=b"", key=None, truncated=bool(original))):
            try:
                await self.topic.send(key=stage.encode(), value=attempt)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("could not send the dead letter for %s", where, exc_info=True)
        log.error("LOST POINTER: dead letter for %s by %s could not be sent: %s", where, stage, reason[:500])


async def delivered(sent: list[Awaitable[Any]]) -> None:
    """Wait until the broker has every record in ``sent`` (what ``topic.send`` returned).

    ``topic.send`` returns once the producer has taken the record; the broker may get it
    later, or never, if the worker dies first. A table write is a record too, on the table's
    changelog, and it can reach the broker before an output sent earlier (that output's batch
    waits behind another request, or is retried). So a stage that writes "this event is done"
    to its table -- extract's done snapshots, decide's recent memories -- waits here first:
    otherwise a kill in between leaves the table saying done and the output gone, and the
    redelivered event is skipped (``tests/faults/test_held_outputs.py``). Raises what a
    failed delivery raised: the event is then not done, and is dead-lettered or redelivered.
    """
    if sent:
        await asyncio.gather(*sent)


def finished(event: EventT, stage: str) -> None:
    """``stage`` is done with ``event`` (handled, or dead-lettered): tell the worker's consumer, which
    commits only past offsets every stage reading the topic finished (memstream.kafka.transport).
    A consumer without that rule (not memstream's transport) keeps Faust's own acks."""
    mark = getattr(event.app.consumer, "finished", None)
    if mark is not None:
        mark(event.message, stage)


async def in_order(events: AsyncIterable[EventT], stage: str, *, ack_passed: bool) -> AsyncIterator[EventT]:
    """The events ``stage`` may handle now: per partition in offset order, none missing between two it
    handles (memstream.kafka.order). One it may not is passed over, and comes again if it must. A
    ``noack`` stream's passed events are acked here (``ack_passed``); Faust acks the others."""
    async for event in events:
        take = getattr(event.app.consumer, "take", None)
        if take is None or await take(event.message, stage):
            yield event
        elif ack_passed:
            event.ack()
            # Faust's sensor ends the process span on a stream ack, which noack never does.
            trace.get_current_span().end()


def expect(value: Any, kind: type[T] | tuple[type, ...]) -> T:
    """The event as the type this stage consumes, or a TypeError naming what arrived."""
    if not isinstance(value, kind):
        raise TypeError(f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value  # type: ignore[return-value]


async def guarded(
    stream: faust.StreamT,
    stage: str,
    sink: DeadLetters,
    handle: Callable[[Any, EventT], Awaitable[None]],
) -> None:
    """Run ``handle`` on every event; a failure dead-letters that event and the partition moves on."""
    processed = metrics.EVENTS_PROCESSED.labels(stage)
    failed = metrics.EVENTS_FAILED.labels(stage)
    seconds = metrics.STAGE_SECONDS.labels(stage)
    async for event in in_order(stream.events(), stage, ack_passed=False):
        started = time.perf_counter()
        try:
            await handle(event.value, event)
            processed.inc()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failed.inc()
            log.debug("%s failed", stage, exc_info=True)
            await sink.dead_letter(stage, f"{type(exc).__name__}: {exc}", event.message)
        finally:
            seconds.observe(time.perf_counter() - started)
        finished(event, stage)


def key_partition(key: str | bytes, partitions: int) -> int:
    """The partition a record keyed ``key`` goes to: Kafka's default partitioner (murmur2 of the
    key's bytes), the one every producer of memstream's topics uses (the CLI, the API, hooks, a
    stage re-keying a turn, and a host's own Kafka client)."""
    raw = key if isinstance(key, bytes) else key.encode()
    return (murmur2(raw) & 0x7FFFFFFF) % partitions


class StateTable(faust.Table):
    """A table whose values are schemas Structs, changelogged through the memstream codec.

    ``app.Table`` takes no serializer: Faust derives it from ``value_type`` (a Faust
    Model's own, else JSON), so the codec is chosen here before the changelog topic exists.

    A key's changelog partition is the one its input records have (Faust hands a worker
    partition N of the input and of the changelog together): the current event's, or, for a
    table written outside events too (``use_partitioner``), the partition of the key's own bytes
    (:func:`key_partition`). Faust's partitioner hashed the JSON-encoded key (quotes included)
    instead, so a worker sharing its group with another (a restarted one, until the killed one's
    session expires) read turns whose session state another member held, and started their
    sessions over. A ``versioned`` table counts each value's writes in its ``version`` field, and
    recovery keeps the higher of two records of a key: the records of one key written before this
    partitioning (version 0) stay in their old partition, which recovery may read last.
    """

    def __init__(self, *args: Any, versioned: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.versioned = versioned

    def adopt(self, key: str) -> Any:
        """The state this table was carried over for ``key`` from the broker before a fresh one
        (``app.carried_states``, memstream.worker.recycle), written here now; None if there is none."""
        value = self._carried().pop(key, None)
        if value is None or key in self:
            return None
        self[key] = value
        return value

    def adopt_all(self) -> None:
        """Write every state still carried over (a stage's timer calls it: its scans see them all)."""
        carried = self._carried()
        while carried:
            key, value = carried.popitem()
            if key not in self:
                self[key] = value

    def _carried(self) -> dict[str, Any]:
        states: dict[str, dict[str, Any]] = getattr(self.app, "carried_states", {})
        return states.get(self.name, {})

    def _serializer_from_type(self, typ: Any) -> Any:
        return CODEC_NAME if typ is None else super()._serializer_from_type(typ)

    def partition_for_key(self, key: Any) -> int | None:
        if not self.use_partitioner:
            return super().partition_for_key(key)
        return key_partition(key, self.partitions or self.app.conf.topic_partitions)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.versioned and value is not None:
            held = self.get(key)
            version = max(value.version, held.version if held is not None else 0) + 1
            value = msgspec.structs.replace(value, version=version)
        super().__setitem__(key, value)

    def apply_changelog_batch(self, batch: Any) -> None:
        if not self.versioned:
            return super().apply_changelog_batch(batch)
        latest: dict[Any, Any] = {}
        kept = []
        for event in batch:
            if event.message.value is not None:
                key, value = self._to_key(event.key), self._to_value(event.value)
                held = latest[key] if key in latest else self.data.get(key)
                if held is not None and held.version > value.version:
                    continue  # an older write, read after a newer one from another partition
                latest[key] = value
            kept.append(event)
        return super().apply_changelog_batch(kept)


def state_table(
    app: faust.App, name: str, partitions: int, *, use_partitioner: bool = False, versioned: bool = False
) -> StateTable:
    """Declare an agent's state table: str keys, schemas.State values, default None (see
    :class:`StateTable` for ``use_partitioner`` and ``versioned``)."""
    table = StateTable(
        app,
        name=name,
        default=None,
        beacon=app.tables.beacon,
        partitions=partitions,
        key_type=str,
        use_partitioner=use_partitioner,
        versioned=versioned,
    )
    return app.tables.add(table)  # type: ignore[return-value]


async def batches(
    stream: faust.StreamT, max_size: int, *, stage: str, linger: float = 0.0
) -> AsyncIterator[list[EventT]]:
    """Batches of the events that have arrived: wait for one, then take what is already
    waiting, up to ``max_size``; with ``linger`` > 0, wait that long at most for more.

    With no linger a lone event goes at once, and under load batches grow by themselves:
    events arrive while the previous batch is processed. Faust's ``take_events`` instead
    waits out its whole window whenever a batch is not full, which is pure latency when
    the stage is idle. Events are acked once their batch is processed (the consumer side
    of the generator resumes), so a crash redelivers the batch in flight.
    """
    waiting: asyncio.Queue[tuple[EventT, trace.Span] | BaseException] = asyncio.Queue(maxsize=max_size)

    async def read() -> None:
        try:
            # Faust's StreamT declares no noack(), which its Stream (what an agent is given) has.
            events = stream.noack().events()  # type: ignore[attr-defined]
            async for event in in_order(events, stage, ack_passed=True):
                await waiting.put((event, trace.get_current_span()))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # surfaces in the consuming loop rather than hanging it
            await waiting.put(exc)

    def take(item: tuple[EventT, trace.Span] | BaseException, into: list[tuple[EventT, trace.Span]]) -> None:
        if isinstance(item, BaseException):
            raise item
        into.append(item)

    reader = asyncio.create_task(read())
    try:
        while True:
            batch: list[tuple[EventT, trace.Span]] = []
            take(await waiting.get(), batch)
            deadline = time.monotonic() + linger
            while len(batch) < max_size:
                if not waiting.empty():
                    take(waiting.get_nowait(), batch)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    take(await asyncio.wait_for(waiting.get(), left), batch)
                except TimeoutError:
                    break
            try:
                yield [event for event, _ in batch]
                # Resumed: the batch is processed. A stop or crash in between acks nothing.
                for event, _ in batch:
                    finished(event, stage)
                    event.ack()
            finally:
                for _, process_span in batch:
                    # Faust's OpenTelemetry sensor ends its span on an ack by the stream,
                    # which a noack stream never makes.
                    process_span.end()
    finally:
        reader.cancel()


async def guarded_by_key(
    stream: faust.StreamT,
    stage: str,
    sink: DeadLetters,
    handle: Callable[[Any, EventT], Awaitable[None]],
    *,
    limit: int,
) -> None:
    """Like :func:`guarded`, but events of different keys run concurrently (at most ``limit``
    at a time) while events of one key still run one after another, in order.

    For stages that wait on an LLM: one session's snapshots stay in order, and a slow call
    no longer holds up every other session on the partition. Each event is acked only when
    its handling is done, so a crash redelivers what was in flight (Faust commits only the
    contiguous acked prefix of a partition).
    """
    processed = metrics.EVENTS_PROCESSED.labels(stage)
    failed = metrics.EVENTS_FAILED.labels(stage)
    seconds = metrics.STAGE_SECONDS.labels(stage)
    in_flight = metrics.IN_FLIGHT.labels(stage)
    slots = asyncio.Semaphore(limit)
    tails: dict[Any, asyncio.Task[None]] = {}

    async def run(event: EventT, previous: asyncio.Task[None] | None, process_span: trace.Span) -> None:
        try:
            if previous is not None:
                await asyncio.wait([previous])  # order within a key; its outcome is its own
            started = time.perf_counter()
            try:
                await handle(event.value, event)
                processed.inc()
            except Exception as exc:
                failed.inc()
                log.debug("%s failed", stage, exc_info=True)
                await sink.dead_letter(stage, f"{type(exc).__name__}: {exc}", event.message)
            finally:
                seconds.observe(time.perf_counter() - started)
            finished(event, stage)  # not when cancelled: then it is read again
        finally:
            event.ack()
            in_flight.dec()
            slots.release()
            # Faust's OpenTelemetry sensor ends its "{topic} process" span only when the
            # stream acks, which a noack stream never does: end it when the work is done.
            process_span.end()

    def forget(key: Any, task: asyncio.Task[None]) -> None:
        if tails.get(key) is task:
            del tails[key]

    try:
        # Faust's StreamT declares no noack(), which its Stream (what an agent is given) has.
        async for event in in_order(stream.noack().events(), stage, ack_passed=True):  # type: ignore[attr-defined]
            await slots.acquire()
            in_flight.inc()
            key = event.message.key
            # The task copies this context: Faust's current event (which table writes use)
            # and the trace span of this event.
            task = asyncio.create_task(run(event, tails.get(key), trace.get_current_span()))
            tails[key] = task
            task.add_done_callback(functools.partial(forget, key))
    finally:
        for task in list(tails.values()):
            task.cancel()

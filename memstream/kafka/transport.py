"""Faust's aiokafka transport, with the fetch wait and prefetch backoff memstream needs.

Faust's driver hard-codes ``fetch_max_wait_ms=1500``. Kafka answers a waiting fetch as
soon as data arrives, so there that only bounds idle polling; Tansu (0.6) holds every
fetch for the full wait, which cost ~650 ms per stage (measured: a plain aiokafka
consumer saw a median 656 ms per message at 1500 ms and 3.7 ms at 100 ms).

aiokafka's fetcher also stops fetching from a broker for up to ``prefetch_backoff``
(0.1 s, no setting in aiokafka's consumer nor in Faust) while any partition it serves
has records the application has not taken yet. With one broker, one busy stage holds
every other stage's next fetch: the ~100 ms spikes ``bench.perf.hops`` shows on every hop,
and one-turn latencies of 300-500 ms among 80 ms ones. memstream's default is 10 ms.

Tansu 0.6's fetch handler (``tansu-storage/src/service/fetch.rs``) sleeps out the wait
even when the first pass found data (below 250 ms it sleeps the whole remainder), so a
fetch always costs about ``fetch_max_wait_ms``; only 0 avoids it, by polling. Lower waits
buy latency with idle CPU: 11% of a core idle at 20 ms, 33% at 5 ms, 44% at 2 ms.

So the wait adapts (:class:`memstream.kafka.fetch_wait.FetchWait`): the short one while records flow, doubling
after a few empty fetches up to an idle wait. Measured idle, worker and Tansu together: 31% of a core at
a fixed 20 ms, 9% at 200 ms. On the embedded broker the idle wait is spent between fetches on the
worker's side and a doorbell (:mod:`memstream.kafka.doorbell`) ends it when a record is published: the
worker's producer rings it at each acknowledged send, other processes by a datagram. So the idle wait
can be seconds long without the first hop after a quiet spell waiting it out.

Faust's table recovery reads each changelog up to ``consumer.highwaters()``, which its
driver answers with ListOffsets; Tansu 0.6 answers that with the last batch's base offset
+ 1, so recovery stopped short and a restarted worker lost the last writes of its tables.
Here it is the true end (:mod:`memstream.kafka.offsets`).

Faust's commit rule let a commit pass events no stage had processed (a worker killed then
lost them for good); the consumer here commits by :func:`memstream.kafka.commits.committable`
over the offsets the stages marked finished (Faust's acks count for nothing), counts none of
Faust's "gaps", and reads again an event the commit is held at that no stage will process
(:mod:`memstream.kafka.commits`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiokafka
import faust
from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as driver
from faust.types import TP, Message
from faust.types.tuples import ack_lock

from memstream.kafka import offsets
from memstream.kafka.commits import committable
from memstream.kafka.doorbell import Doorbell
from memstream.kafka.fetch_wait import FetchWait, adapt_fetch_wait
from memstream.kafka.ledger import ForgottenLedger
from memstream.kafka.order import Order, Take

log = logging.getLogger(__name__)
#: Commit rounds (each ``broker_commit_interval``, 2.8 s) a partition's commit is held at one
#: offset, while later events are processed and no stage holds that one, before it is read again.
HELD_ROUNDS = 2


def waited_long_enough(rounds: int, times: int) -> bool:
    """Has a partition waited ``rounds`` commit rounds at an offset read again ``times`` times
    from already? Two rounds the first time, twice as many each time after (at most 2**10 times)."""
    return rounds >= HELD_ROUNDS << min(times, 10)


@dataclass(frozen=True)
class FetchTuning:
    """How a :class:`Transport`'s worker consumer fetches: it waits ``fetch_max_wait_ms`` per fetch while
    records come (up to ``idle_wait_ms`` when they do not, :class:`FetchWait`) and backs off
    ``prefetch_backoff_ms`` while fetched records wait to be taken. With a ``doorbell``, the idle wait
    beyond the short one is a pause the doorbell ends, and the producer rings it at each record the
    broker acknowledged."""

    fetch_max_wait_ms: int
    prefetch_backoff_ms: int
    idle_wait_ms: int = 0
    doorbell: Doorbell | None = None


class ConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, its worker consumer fetching as its transport's :class:`FetchTuning` says."""

    #: The worker consumer's fetch wait, once started.
    fetch_wait: FetchWait | None = None

    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka reads this when start() builds its fetcher; Faust offers no setting.
        consumer._fetch_max_wait_ms = transport.tuning.fetch_max_wait_ms
        return consumer

    async def on_start(self) -> None:
        await super().on_start()
        tuning = cast(Transport, self.transport).tuning
        # The fetcher exists once the consumer started; aiokafka passes it no backoff.
        consumer = self._ensure_consumer()
        consumer._fetcher._prefetch_backoff = tuning.prefetch_backoff_ms / 1000
        doorbell = tuning.doorbell
        self.fetch_wait = FetchWait(tuning.fetch_max_wait_ms, tuning.idle_wait_ms, wakeable=doorbell is not None)
        adapt_fetch_wait(consumer, self.fetch_wait, doorbell)

    async def _highwaters(self, partitions: list[TopicPartition]) -> Mapping[TopicPartition, int]:
        consumer = self._ensure_consumer()
        if self.consumer.in_transaction:  # exactly-once: Faust reads the last stable offset
            return await super()._highwaters(partitions)
        return await offsets.end_offsets(consumer, partitions)


class Consumer(driver.Consumer):
    """Faust's consumer, committing only past processed events (:mod:`memstream.kafka.commits`),
    and reading again an event its commit is held at that no stage will process."""

    #: Per partition, the first offset this assignment reads when the group has committed
    #: none there: Faust keeps no committed offset for it (nor for a committed 0).
    _floors: dict[TP, int]
    #: Per partition, the offset its commit is held at while later ones are processed, and
    #: for how many commit rounds in a row (:meth:`_read_passed_over_again`).
    _held: dict[TP, tuple[int, int]]
    #: Per partition, the offset it was last read again from, and how many times.
    _read_again: dict[TP, tuple[int, int]]
    #: Per partition, the offset a stage waits for while the fetch is past it: commit rounds in
    #: a row, and how many times it was read again from there (:meth:`_read_awaited_again`).
    _stalled: dict[TP, tuple[int, int, int]]
    #: ``Order.taken`` at the last commit round: stalls count only while it stands still.
    _taken_before_round: int
    #: Per partition, the offsets every stage reading its topic finished (:meth:`finished`):
    #: the only offsets a commit passes. Faust's own acks are not: an exchange was still lost
    #: with every commit fault above fixed, its turns acked though no stage had applied them.
    _finished: dict[TP, set[int]]
    #: Per partition and offset, the stages that finished it, while fewer than read its topic.
    _finishing: dict[tuple[TP, int], set[str]]
    #: Per topic, how many stages read it (each must finish an event before it counts).
    _readers: dict[str, int]

    #: Per partition, how many seeks have begun or ended on it (two a seek): a record handed on
    #: after one that its batch came before is not the record the seek reads next.
    _epochs: dict[TP, int]
    #: The epochs as the batch being handed on arrived from aiokafka, and as each partition's
    #: last record handed on was (:class:`ReadOffsets` reads them).
    _batch_epochs: dict[TP, int]
    _handed_epochs: dict[TP, int]
    _read_offsets: ReadOffsets
    #: Each message handed on, with its partition's epoch then: one sought since is read again.
    _message_epochs: weakref.WeakKeyDictionary[Message, int]
    #: Where each stage is on each partition: it takes events in offset order (:meth:`take`).
    _order: Order

    def __post_init__(self) -> None:
        super().__post_init__()
        self._floors = {}
        self._held = {}
        self._read_again = {}
        self._stalled = {}
        self._taken_before_round = 0
        self._finished = {}
        self._finishing = {}
        self._readers = {}
        self._epochs = {}
        self._batch_epochs = {}
        self._handed_epochs = {}
        self._read_offset = self._read_offsets = ReadOffsets(self)
        self._message_epochs = weakref.WeakKeyDictionary()
        self._order = Order()

    def _bump(self, tps: Any) -> None:
        for tp in tps:
            self._epochs[tp] = self._epochs.get(tp, 0) + 1

    async def seek(self, partition: TP, offset: int) -> None:
        # Faust's, with the epoch bumped as the seek begins and once it is done: a batch that
        # arrived in between came from where the partition was before.
        tp = TP(partition.topic, partition.partition)
        self._bump([tp])
        self._order.sought(tp, offset)
        await self._seek(tp, offset)
        self._read_offsets.sought(tp, offset if offset else None)
        self._bump([tp])

    async def seek_to_committed(self) -> Mapping[TP, int]:
        # aiokafka seeks only the partitions with a committed offset above 0. Faust counts on
        # this seek to read again what it dropped: the events handed on while flow control was
        # off, which resuming it clears from the streams' queues (a worker's recovery resumes the
        # stream partitions before it seeks). A stream partition the group never committed was
        # left past them, and they never came again: a worker restarted before its first
        # commit lost every event already on the broker. It is sought to its beginning, as
        # auto_offset_reset="earliest" starts it (the tables' changelogs are left to recovery).
        committed = await super().seek_to_committed()
        sought = [tp for tp, offset in committed.items() if offset and offset > 0]
        acks_enabled_for = self.app.topics.acks_enabled_for
        unsought = [tp for tp in committed if tp not in sought and acks_enabled_for(tp.topic)]
        if unsought:
            await self._thread.seek_to_beginning(*unsought)
        self._bump(TP(tp.topic, tp.partition) for tp in [*sought, *unsought])
        for tp in sought:
            self._order.start(TP(tp.topic, tp.partition), committed[tp])
        for tp in unsought:
            self._order.start(TP(tp.topic, tp.partition), None)
        return committed

    async def _wait_next_records(self, timeout: float) -> Any:
        result = await super()._wait_next_records(timeout)
        self._batch_epochs = dict(self._epochs)
        return result

    async def getmany(self, timeout: float) -> Any:
        """Faust's, less the records of a partition sought since their batch arrived: the seek
        put aiokafka's position at or before them, so they come again, in order. Handed on,
        they were applied ahead of the records the seek reads again (a rebalance's, or a
        passed-over offset read again), and Faust's fetch loop then dropped those as read."""
        async for tp, message in super().getmany(timeout):
            epoch = self._epochs.get(tp, 0)
            if epoch != self._batch_epochs.get(tp, 0):
                continue
            self._handed_epochs[tp] = epoch
            self._message_epochs[message] = epoch
            yield tp, message

    async def take(self, message: Message, stage: str) -> bool:
        """May ``stage`` handle ``message`` now (:mod:`memstream.kafka.order`)? If it missed the
        offsets before it, its partition is sought back to the first it missed, and it is not."""
        tp = message.tp
        handed = self._message_epochs.get(message)
        before_a_seek = handed is not None and handed != self._epochs.get(tp, 0)
        decision = self._order.take(stage, tp, message.offset, handed_before_a_seek=before_a_seek)
        if decision is Take.SEEK and tp in self.assignment():
            missed = self._order.next_offset(stage, tp)
            if missed is not None:
                await self.seek(tp, missed)
        return decision is Take.TAKE

    def finished(self, message: Message, stage: str) -> None:
        """``stage`` is done with ``message``: its outputs are sent (the commit flushes them first)."""
        tp = TP(message.topic, message.partition)
        readers = self._readers.get(message.topic)
        if readers is None:
            agents = self.app.agents.values()
            readers = max(1, sum(1 for agent in agents if message.topic in agent.get_topic_names()))
            self._readers[message.topic] = readers
        if readers > 1:
            done = self._finishing.setdefault((tp, message.offset), set())
            done.add(stage)
            if len(done) < readers:
                return
            del self._finishing[(tp, message.offset)]
        self._finished.setdefault(tp, set()).add(message.offset)

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def ack(self, message: Message) -> bool:
        app = self.app
        if message.generation_id != app.consumer_generation_id or not app.flow_control.is_active():
            # A stream acks the events it skips -- fetched before a rebalance, or met while
            # flow control is off -- though no stage processed them; they are fetched again
            # after the seek, and only that delivery's ack may move the commit. (An event a
            # stage did finish meanwhile is processed again: every stage is idempotent.)
            with ack_lock:
                message.acked = True
                self._unacked_messages.discard(message)
            return False
        return super().ack(message)

    def _filter_tps_with_pending_acks(self, topics: Any = None) -> Iterator[TP]:
        return (tp for tp in list(self._finished) if topics is None or tp in topics or tp.topic in topics)

    def _new_offset(self, tp: TP) -> int | None:
        finished = self._finished.get(tp)
        if not finished:
            self._held.pop(tp, None)
            return None
        floor = self._committed_offset[tp]
        if floor is None:
            floor = self._floors.get(tp)
        new = committable(finished, floor)
        # The offset the commit stops at, while events after it are finished already.
        stop = new if new is not None else floor
        if stop is not None and max(finished) > stop:
            held, rounds = self._held.get(tp, (stop, 0))
            self._held[tp] = (stop, rounds + 1 if held == stop else 1)
        else:
            self._held.pop(tp, None)
        if new is None:
            return None
        self._finished[tp] = {offset for offset in finished if offset >= new}
        # Faust's own record of acks only tells it which partitions to commit: kept short.
        acked = self._acked[tp]
        acked[:] = [offset for offset in acked if offset >= new]
        index = self._acked_index[tp]
        index.difference_update([offset for offset in index if offset < new])
        return new

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        # Faust records a "gap" when an offset arrives beyond the last one read, and counts it
        # as processed. Its read offsets race with seeks: perform_seek sets them back to the
        # committed offset after the seek began, so events delivered (and skipped) meanwhile
        # look like a hole once the next batch arrives. The commit then passed them and they
        # were lost. No gap is counted here; an offset the commit is held at is read again
        # instead (_read_passed_over_again). (memstream's topics have no holes: it writes no
        # transactions. A transactional producer's markers would hold the commit -- nothing
        # lost, the events after it read again at growing intervals, each time with a warning.)
        return None

    async def _commit_tps(self, tps: Any, start_new_transaction: bool) -> bool:
        committed = await super()._commit_tps(tps, start_new_transaction)
        await self._read_passed_over_again()
        return bool(committed)

    async def _read_passed_over_again(self) -> None:
        """Seek back to an offset the commit has been held at for two rounds while later events
        were processed, when no stage holds its event: it was delivered while no stage could
        take it (skipped in a rebalance, or dropped by Faust's read offsets), and nothing else
        would fetch it again. The same offset held again waits twice as many rounds each time."""
        if self.app.rebalancing or not self.flow_active or not self.app.flow_control.is_active():
            return
        in_flight = {(message.tp, message.offset) for message in list(self._unacked_messages)}
        assignment = self.assignment()
        for tp, (offset, rounds) in list(self._held.items()):
            again, times = self._read_again.get(tp, (offset, 0))
            times = times if again == offset else 0
            if not waited_long_enough(rounds, times) or tp not in assignment or (tp, offset) in in_flight:
                continue
            log.warning("%s: offset %d was passed over unprocessed; reading from it again", tp, offset)
            self._read_again[tp] = (offset, times + 1)
            self._held.pop(tp, None)
            await self.seek(tp, offset)
        # Only while every stage is idle: a stage busy with one partition leaves another's events
        # waiting in its queue, handed on and not taken, and they are not lost.
        taken = self._order.taken
        if taken != self._taken_before_round or in_flight:
            self._taken_before_round = taken
            self._stalled.clear()
            return
        for tp in assignment:
            await self._read_awaited_again(tp)

    async def _read_awaited_again(self, tp: TP) -> None:
        """Seek back to the offset a stage waits for (memstream.kafka.order), when the fetch has
        handed on events at or past it and no stage took any event for two commit rounds, nor
        holds one: they were dropped on the way (a stream skips events while flow control is
        off) and the seek that was to read them again read nothing. Nothing was finished past
        them, so the commit was never held there. The same offset again waits twice as long."""
        awaited = self._order.awaited(tp)
        read = self._read_offset.get(tp)
        if awaited is None or read is None or read < awaited or tp in self._held:
            self._stalled.pop(tp, None)
            return
        at, rounds, times = self._stalled.get(tp, (awaited, 0, 0))
        rounds, times = (rounds + 1, times) if at == awaited else (1, 0)
        if not waited_long_enough(rounds, times):
            self._stalled[tp] = (awaited, rounds, times)
            return
        log.warning("%s: offset %d was handed on but no stage took it; reading from it again", tp, awaited)
        self._stalled[tp] = (awaited, 0, times + 1)
        await self.seek(tp, awaited)

    async def verify_all_partitions_active(self) -> None:
        # Faust's livelock check (every 2.5 commit intervals) yields with mode's Service.sleep(0)
        # between partitions, a task each: ~40 loop callbacks a second on an idle worker of 95
        # partitions, a third of its wake-ups. Each check is a few dict reads; one yield will do.
        now = time.monotonic()
        for tp in self.assignment():
            if self.should_stop:
                return
            self.verify_event_path(now, tp)
        await asyncio.sleep(0)

    async def perform_seek(self) -> None:
        await super().perform_seek()
        acks_enabled_for = self.app.topics.acks_enabled_for
        for tp in self.assignment():
            if acks_enabled_for(tp.topic) and self._committed_offset[tp] is None:
                position = await self.position(tp)
                if position is not None:
                    self._floors[tp] = position

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        for tp in revoked:
            self._floors.pop(tp, None)
            self._held.pop(tp, None)
            self._read_again.pop(tp, None)
            self._stalled.pop(tp, None)
            self._finished.pop(tp, None)
        self._order.revoked(revoked)
        for key in [key for key in self._finishing if key[0] in revoked]:
            del self._finishing[key]
        await super().on_partitions_revoked(revoked)


class ReadOffsets(collections.defaultdict[TP, int | None]):
    """Faust's read offsets (below which its fetch loop drops a record as read already), which
    ignore the fetch loop's write for a record whose partition was sought while a stage took
    it: that write came after the seek's and would drop the records the seek reads again."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(lambda: None)
        self.consumer = consumer

    def __setitem__(self, tp: TP, offset: int | None) -> None:
        consumer = self.consumer
        epoch = consumer._epochs.get(tp, 0)
        if consumer._handed_epochs.get(tp, epoch) != epoch:
            return
        super().__setitem__(tp, offset)

    def sought(self, tp: TP, offset: int | None) -> None:
        """A seek's own write: always taken."""
        super().__setitem__(tp, offset)


class Producer(driver.Producer):
    """Faust's producer, ringing its transport's doorbell (if any) at each record the broker acknowledged."""

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        acked = await super().send(*args, **kwargs)
        doorbell = cast(Transport, self.transport).tuning.doorbell
        # aiokafka's send returns an asyncio future (Faust types it as an awaitable).
        if doorbell is not None and isinstance(acked, asyncio.Future):
            # Once the broker has the record, a consumer pausing between fetches may want it.
            acked.add_done_callback(lambda _: doorbell.ring())
        return acked


class Transport(driver.Transport):
    """Faust's aiokafka transport with memstream's consumer and producer, fetching as ``tuning`` says."""

    Consumer = Consumer
    Producer = Producer

    def __init__(self, url: Any, app: Any, loop: asyncio.AbstractEventLoop | None = None, *, tuning: FetchTuning):
        super().__init__(url, app, loop)
        self.tuning = tuning


class MemstreamApp(faust.App):
    """A Faust app with memstream's transport and a place for the dead-letter sink."""

    fetch_max_wait_ms: int = 1500
    fetch_idle_wait_ms: int = 1500
    prefetch_backoff_ms: int = 10
    dead_letter_sink: Any = None
    #: The forgets this worker knows of: followed from the ledger topic, and recorded at once
    #: when this worker consumes or publishes one (memstream.kafka.ledger.ledger_of).
    forgotten_ledger: ForgottenLedger | None = None
    #: Set by the runner: () -> memstream.telemetry.health.Status, what ``/health`` reports.
    health: Any = None
    #: Ends the consumers' idle pauses when a record is published (memstream.kafka.doorbell); None:
    #: the broker holds the whole idle wait (Kafka answers a waiting fetch when data arrives).
    doorbell: Doorbell | None = None

    def _new_transport(self) -> Any:
        tuning = FetchTuning(self.fetch_max_wait_ms, self.prefetch_backoff_ms, self.fetch_idle_wait_ms, self.doorbell)
        return Transport(self.conf.broker_consumer, self, tuning=tuning)

"""Faust's aiokafka transport, with the fetch wait and prefetch backoff memstream needs.

Faust's driver hard-codes ``fetch_max_wait_ms=1500``. Kafka answers a waiting fetch as
soon as data arrives, so there that only bounds idle polling; Tansu (0.6) holds every
fetch for the full wait, which cost ~650 ms per stage (measured: a plain aiokafka
consumer saw a median 656 ms per message at 1500 ms and 3.7 ms at 100 ms).

aiokafka's fetcher also stops fetching from a broker for up to ``prefetch_backoff``
(0.1 s, no setting in aiokafka's consumer nor in Faust) while any partition it serves
has records the application has not taken yet. With one broker, one busy stage holds
every other stage's next fetch: the ~100 ms spikes ``bench.hops`` shows on every hop,
and one-turn latencies of 300-500 ms among 80 ms ones. memstream's default is 10 ms.

Tansu 0.6's fetch handler (``tansu-storage/src/service/fetch.rs``) sleeps out the wait
even when the first pass found data (below 250 ms it sleeps the whole remainder), so a
fetch always costs about ``fetch_max_wait_ms``; only 0 avoids it, by polling. Lower waits
buy latency with idle CPU: 11% of a core idle at 20 ms, 33% at 5 ms, 44% at 2 ms.

So the wait adapts (:class:`FetchWait`): the short one while records flow, doubling after a few
empty fetches up to an idle wait (200 ms on the embedded broker). Measured idle, worker and
Tansu together: 31% of a core at a fixed 20 ms, 9% at 200 ms. The cost is the first hop after
a quiet spell, which waits out the fetch in flight.

Faust's table recovery reads each changelog up to ``consumer.highwaters()``, which its
driver answers with ListOffsets; Tansu 0.6 answers that with the last batch's base offset
+ 1, so recovery stopped short and a restarted worker lost the last writes of its tables.
Here it is the true end (:mod:`memstream.offsets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiokafka
import faust
from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as driver

from memstream import offsets
from memstream.ledger import ForgottenLedger


class FetchWait:
    """The wait of a consumer's next fetch: ``busy_ms`` while fetches bring records; after
    ``patience`` empty fetches in a row it doubles with each further empty one, up to ``idle_ms``.
    The first fetch with records brings it back to ``busy_ms``."""

    def __init__(self, busy_ms: int, idle_ms: int, patience: int = 3) -> None:
        self.busy_ms = busy_ms
        self.idle_ms = max(idle_ms, busy_ms)
        self.patience = patience
        self.empty = 0

    @property
    def ms(self) -> int:
        doublings = self.empty - self.patience + 1
        if doublings <= 0 or self.busy_ms == self.idle_ms:
            return self.busy_ms
        return min(self.idle_ms, max(1, self.busy_ms) << min(doublings, 16))

    def fetched(self, records: bool) -> int:
        """Counts one fetch's outcome; the wait of the next one."""
        self.empty = 0 if records else self.empty + 1
        return self.ms


def adapt_fetch_wait(consumer: aiokafka.AIOKafkaConsumer, wait: FetchWait) -> None:
    """Has the started ``consumer`` wait ``wait.ms`` in each fetch, told whether each brought records.

    aiokafka's fetcher builds the next request once the previous one's task is done and reads
    ``_fetch_max_wait_ms`` then, so the wait set when a fetch ends is the next one's.
    """
    fetcher = consumer._fetcher
    fetch = fetcher._proc_fetch_request

    async def proc_fetch_request(assignment: Any, node_id: int, request: Any) -> bool:
        records = bool(await fetch(assignment, node_id, request))
        fetcher._fetch_max_wait_ms = wait.fetched(records)
        return records

    fetcher._fetch_max_wait_ms = wait.ms
    fetcher._proc_fetch_request = proc_fetch_request


def transport_class(fetch_max_wait_ms: int, prefetch_backoff_ms: int, idle_wait_ms: int = 0) -> type[driver.Transport]:
    """A Faust transport whose worker consumer waits ``fetch_max_wait_ms`` per fetch while records
    come (up to ``idle_wait_ms`` when they do not, :class:`FetchWait`) and backs off
    ``prefetch_backoff_ms`` while fetched records wait to be taken."""

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
            consumer = super()._create_worker_consumer(transport)
            # aiokafka reads this when start() builds its fetcher; Faust offers no setting.
            consumer._fetch_max_wait_ms = fetch_max_wait_ms
            return consumer

        async def on_start(self) -> None:
            await super().on_start()
            # The fetcher exists once the consumer started; aiokafka passes it no backoff.
            consumer = self._ensure_consumer()
            consumer._fetcher._prefetch_backoff = prefetch_backoff_ms / 1000
            adapt_fetch_wait(consumer, FetchWait(fetch_max_wait_ms, idle_wait_ms))

        async def _highwaters(self, partitions: list[TopicPartition]) -> Mapping[TopicPartition, int]:
            consumer = self._ensure_consumer()
            if self.consumer.in_transaction:  # exactly-once: Faust reads the last stable offset
                return await super()._highwaters(partitions)
            return await offsets.end_offsets(consumer, partitions)

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(driver.Transport):
        pass

    Transport.Consumer = Consumer
    return Transport


class MemstreamApp(faust.App):
    """A Faust app with memstream's transport and a place for the dead-letter sink."""

    fetch_max_wait_ms: int = 1500
    fetch_idle_wait_ms: int = 1500
    prefetch_backoff_ms: int = 10
    dead_letter_sink: Any = None
    #: The forgets this worker knows of: followed from the ledger topic, and recorded at once
    #: when this worker starts or publishes one (memstream.ledger).
    forgotten_ledger: ForgottenLedger | None = None
    #: Set by the runner: () -> memstream.health.Status, what ``/health`` reports.
    health: Any = None

    def _new_transport(self) -> Any:
        transport = transport_class(self.fetch_max_wait_ms, self.prefetch_backoff_ms, self.fetch_idle_wait_ms)
        return transport(self.conf.broker_consumer, self)

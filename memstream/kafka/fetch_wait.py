"""How long a consumer's next fetch waits: short while records come, growing while none do.

The embedded broker (Tansu 0.6) holds every fetch for its whole wait, so a fixed short wait
polls it many times a second whether or not records come (``memstream.kafka.transport`` has the
measurements). The worker's Faust consumer and the forget ledger's consumer both adapt.

A wait the broker holds cannot be cut short when a turn arrives, so on the embedded broker the
part of an idle wait beyond the short one is spent on the consumer's side instead: a pause
between fetches that a :class:`memstream.kafka.doorbell.Doorbell` ends at once when a record is
published. That lets an idle worker fetch every few seconds and still take a new turn at once.
The policy is plain counting, testable without a broker; aiokafka is only a type here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiokafka

    from memstream.kafka.doorbell import Doorbell


#: A wakeable consumer's waits up to this are held by the broker, as they were before the pause:
#: the gaps between a busy pipeline's hops, where a pause ended by every ring would fetch once per
#: record published (~20% more CPU per turn, 13.9 against 11.6 ms on a quiet machine). A longer wait
#: is the short fetch and a pause instead: Tansu holding 200 ms of each idle fetch cost it 0.73-0.77%
#: of a core against 0.43-0.47% for the short wait only (interleaved 30 s probes).
HELD_MS = 200


class FetchWait:
    """The wait of a consumer's next fetch: ``busy_ms`` while fetches bring records; after
    ``patience`` empty fetches in a row it doubles with each further empty one, up to ``idle_ms``.
    The first fetch with records brings it back to ``busy_ms``.

    ``wakeable``: a wait up to ``held_ms`` is asked of the broker whole; a longer one is a fetch with
    the short wait (:attr:`request_ms`) and a pause on the consumer's side for the rest
    (:attr:`pause_ms`), which a doorbell can end (:meth:`woken`).
    """

    def __init__(
        self, busy_ms: int, idle_ms: int, patience: int = 3, *, wakeable: bool = False, held_ms: int = HELD_MS
    ) -> None:
        self.busy_ms = busy_ms
        self.idle_ms = max(idle_ms, busy_ms)
        self.patience = patience
        self.wakeable = wakeable
        self.held_ms = max(held_ms, busy_ms)
        self.empty = 0

    @property
    def ms(self) -> int:
        """The whole wait before the next fetch's records can come: held by the broker, paused, or both."""
        doublings = self.empty - self.patience + 1
        if doublings <= 0 or self.busy_ms == self.idle_ms:
            return self.busy_ms
        return min(self.idle_ms, max(1, self.busy_ms) << min(doublings, 16))

    @property
    def request_ms(self) -> int:
        """The wait to ask of the broker in the next fetch."""
        if not self.wakeable or self.ms <= self.held_ms:
            return self.ms
        return self.busy_ms

    @property
    def pause_ms(self) -> int:
        """How long to wait, on the consumer's side, before sending the next fetch."""
        return self.ms - self.request_ms

    def fetched(self, records: bool) -> int:
        """Counts one fetch's outcome; the wait of the next one."""
        self.empty = 0 if records else self.empty + 1
        return self.ms

    def woken(self) -> None:
        """Something was published: the next fetches go out at once, with the short wait."""
        self.empty = 0


def adapt_fetch_wait(consumer: aiokafka.AIOKafkaConsumer, wait: FetchWait, doorbell: Doorbell | None = None) -> None:
    """Has the started ``consumer`` wait ``wait.ms`` in each fetch, told whether each brought records.

    aiokafka's fetcher builds the next request once the previous one's task is done and reads
    ``_fetch_max_wait_ms`` then, so the wait set when a fetch ends is the next one's. A pause
    (``wait.pause_ms``) is taken inside that task, after an empty fetch, so the fetcher sends
    nothing to the broker meanwhile; a ring of ``doorbell`` since the fetch went out ends it.
    Without a doorbell the whole wait is the broker's (``wait`` must not be wakeable).
    """
    if wait.wakeable and doorbell is None:
        raise ValueError("a wakeable fetch wait needs a doorbell to wake it")
    fetcher = consumer._fetcher
    fetch = fetcher._proc_fetch_request
    poll_s = fetcher._fetcher_timeout
    close = fetcher.close
    pauses: set[asyncio.Task[bool]] = set()

    async def proc_fetch_request(assignment: Any, node_id: int, request: Any) -> bool:
        rings = doorbell.rings if doorbell is not None else 0
        records = bool(await fetch(assignment, node_id, request))
        wait.fetched(records)
        if doorbell is not None and wait.pause_ms:
            pause = asyncio.ensure_future(doorbell.wait(rings, wait.pause_ms / 1000))
            pauses.add(pause)
            try:
                if await pause:
                    wait.woken()
            except asyncio.CancelledError:
                # The consumer closed or lost its partitions: this fetch's outcome is moot, as
                # aiokafka's own fetch task says when it is cancelled.
                return False
            finally:
                pauses.discard(pause)
        fetcher._fetch_max_wait_ms = wait.request_ms
        # aiokafka's fetch routine wakes every ``fetcher_timeout`` (0.2 s) to re-plan all its
        # partitions, though it can send nothing while this node's fetch (or its pause) is under
        # way: it sleeps as long as the next one may take. The fetch's end, a consume, or a change
        # of assignment wakes it anyway.
        fetcher._fetcher_timeout = max(poll_s, wait.ms / 1000)
        return records

    async def close_fetcher() -> None:
        # aiokafka cancels its fetch routine on close, not the fetch tasks it started: a pause
        # would otherwise outlive the consumer by up to the idle wait.
        for pause in list(pauses):
            pause.cancel()
        await close()

    fetcher._fetch_max_wait_ms = wait.request_ms
    fetcher._proc_fetch_request = proc_fetch_request
    fetcher.close = close_fetcher

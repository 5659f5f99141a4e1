"""How long a consumer's next fetch waits: short while records come, growing while none do.

The embedded broker (Tansu 0.6) holds every fetch for its whole wait, so a fixed short wait
polls it many times a second whether or not records come (``memstream.kafka.transport`` has the
measurements). The worker's Faust consumer and the forget ledger's consumer both adapt.
The policy is plain counting, testable without a broker; aiokafka is only a type here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiokafka


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

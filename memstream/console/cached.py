"""Slow reads the console shows, kept for a short while and refreshed in the background.

The Pipeline page showed the doctor's report and the dead letters, each a read of the broker or a
maintenance pass taking seconds (3.1 s a load, issue 38). A page now shows the last value read: the
first load waits for it, later ones get it at once, and a value older than its TTL is read again in
the background while the stale one is shown, with its age.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from memstream.store.reader import reader_identity

T = TypeVar("T")
#: The most values a :class:`PerGeneration` keeps (then it starts afresh).
GENERATION_HELD = 512

#: How long the doctor's report and the dead-letter list are shown before they are read again.
PIPELINE_TTL_S = 15.0


@dataclass(frozen=True)
class Read(Generic[T]):
    value: T
    #: Seconds since it was read.
    age_s: float


class Cached(Generic[T]):
    """One value from ``load``, reused for ``ttl_s`` and then refreshed behind the page that asks."""

    def __init__(self, load: Callable[[], Awaitable[T]], ttl_s: float = PIPELINE_TTL_S) -> None:
        self._load = load
        self.ttl_s = ttl_s
        self._value: T | None = None
        self._at = 0.0
        self._loaded = False
        self._refresh: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Read[T]:
        """The value: read now the first time (an error is raised), later the one in hand."""
        if not self._loaded:
            async with self._lock:
                if not self._loaded:
                    await self._read()
        elif time.monotonic() - self._at > self.ttl_s and (self._refresh is None or self._refresh.done()):
            self._refresh = asyncio.create_task(self._read_quietly())
        return Read(self._value, time.monotonic() - self._at)  # type: ignore[arg-type]

    def forget(self) -> None:
        """Read again on the next ``get`` (after an action changed what it shows)."""
        self._loaded = False

    async def _read(self) -> None:
        self._value = await self._load()
        self._at = time.monotonic()
        self._loaded = True

    async def _read_quietly(self) -> None:
        try:
            await self._read()
        except Exception:  # the last value stays shown; the next page asks again
            self._at = time.monotonic() - self.ttl_s / 2


class PerGeneration:
    """Values read from a store, kept while the store's ``generation`` (its count of writes) stays the same.

    A store without one (a Qdrant server, written by other processes too) is read every time. The
    generation is taken before the read: a write landing during it makes the next ask read again.
    """

    def __init__(self, max_age_s: float | None = None) -> None:
        #: Also read again after this long (for values that depend on more than the store: files on disk).
        self.max_age_s = max_age_s
        self._held: dict[Any, tuple[tuple[int, int], float, Any]] = {}

    async def get(self, store: Any, key: Any, load: Callable[[], Awaitable[T]]) -> T:
        generation = getattr(store, "generation", None)
        if not isinstance(generation, int):
            return await load()
        # Whose read it is belongs to the key: a member's listing is not another's.
        store_id, reader = reader_identity(store)
        stamp = (store_id, generation)
        key = (reader, key)
        held = self._held.get(key)
        fresh = held is not None and (self.max_age_s is None or time.monotonic() - held[1] < self.max_age_s)
        if held is not None and held[0] == stamp and fresh:
            return held[2]
        value = await load()
        if len(self._held) >= GENERATION_HELD:
            self._held.clear()
        self._held[key] = (stamp, time.monotonic(), value)
        return value

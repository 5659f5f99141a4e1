"""What the console's pages read, as plain functions of the store and the request's filters.

A list pages through every memory newest first with a cursor (the last row's time and id) and says
how many there are in all; the filters the store cannot apply (session prefix, source CLI as stored,
dates) are applied page by page while the store is read on, so no memory is reachable only through a
filter. Projects are named by their path, counted by their active memories.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from memstream.console.cached import PerGeneration
from memstream.schemas import HistoryRecord, Memory
from memstream.store.base import MemoryStore

#: Rows a list page shows.
PAGE_SIZE = 50
#: Memories read from the store per step while filling a filtered page.
READ_STEP = 200
#: The most memories one filtered page reads before it stops and offers "read on" (a page stays fast).
SCAN_LIMIT = 5_000


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: after the row with this time and id (newest first, ties by id)."""

    updated_at: datetime
    memory_id: str

    def encode(self) -> str:
        raw = f"{self.updated_at.isoformat()}|{self.memory_id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor | None:
        """The cursor in ``text``, None for an empty or malformed one (the list then starts at its top)."""
        if not text:
            return None
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            stamp, _, memory_id = raw.partition("|")
            when = datetime.fromisoformat(stamp)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        return cls(when if when.tzinfo else when.replace(tzinfo=UTC), memory_id)

    def after(self, memory: Memory) -> bool:
        """Does ``memory`` come after this cursor in the newest-first order?"""
        return (memory.updated_at, memory.id) < (self.updated_at, self.memory_id)


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    #: Where the next page starts; None on the last page.
    next: Cursor | None
    #: Memories in the chosen projects, type and status (before the other filters).
    total: int
    #: Memories read to fill this page (more than shown when filters drop some).
    read: int = 0
    #: The page stopped at SCAN_LIMIT before it was full: the next one reads on.
    scan_stopped: bool = False


async def memories_page(
    store: MemoryStore,
    keys: Sequence[str],
    *,
    types: Sequence[str] | None = None,
    include_superseded: bool = False,
    keep: Callable[[Memory], bool] = lambda _: True,
    cursor: Cursor | None = None,
    size: int = PAGE_SIZE,
) -> Page:
    """One page of the memories of ``keys``, newest first, from ``cursor`` on, the ones ``keep`` keeps."""
    if not keys:
        return Page([], None, 0)
    total = await count(store, keys, types=types, include_superseded=include_superseded)
    shown: list[Memory] = []
    read = 0
    position = cursor
    exhausted = False
    while len(shown) < size and read < SCAN_LIMIT and not exhausted:
        limit = max(size + 1, READ_STEP)
        while True:
            before = position.updated_at if position else None
            batch = await store.list(
                keys, types=types, include_superseded=include_superseded, limit=limit, before=before
            )
            fresh = [m for m in batch if position is None or position.after(m)]
            if fresh or len(batch) < limit:
                break
            limit *= 2  # every memory read shares the cursor's time and was shown: read past the ties
        if not fresh:
            exhausted = True
            break
        consumed = 0
        for m in fresh:
            consumed += 1
            read += 1
            position = Cursor(m.updated_at, m.id)
            if keep(m):
                shown.append(m)
                if len(shown) == size:
                    break
        exhausted = len(batch) < limit and consumed == len(fresh)
    if position is None or not read:
        return Page(shown, None, total, read)
    more = not exhausted
    return Page(shown, position if more else None, total, read, scan_stopped=more and len(shown) < size)


async def count(
    store: MemoryStore, keys: Sequence[str], *, types: Sequence[str] | None = None, include_superseded: bool = False
) -> int:
    """Memories in these scopes (of these types): the store's exact count, per type when one is chosen.
    An exact count over 100k memories takes hundreds of ms; it is kept until the store is written to."""
    chosen = (tuple(keys), tuple(types) if types is not None else None, include_superseded)
    return await _counts.get(store, chosen, lambda: _count(store, keys, types, include_superseded))


#: The counts read, per store generation.
_counts = PerGeneration()


async def _count(store: MemoryStore, keys: Sequence[str], types: Sequence[str] | None, include_superseded: bool) -> int:
    if types is None:
        return await store.count(keys, include_superseded=include_superseded)
    from memstream.store.base import memory_select

    counted = getattr(store, "_count", None)
    if counted is None:  # a store without a filtered count: read them
        return len(await store.list(keys, types=types, include_superseded=include_superseded, limit=1_000_000))
    # Through a reader (store.reader.ReadAs), the store's own count is reached past it: its speaker is added here.
    speaker = getattr(store, "speaker", None)
    return int(await counted(memory_select(keys, types, include_superseded, speaker=speaker)))


# -- filters -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """The list's filters the store cannot apply, read from the query string, and what is wrong with them."""

    session: str = ""
    source: str = ""
    since: date | None = None
    until: date | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Filters:
        problems: list[str] = []
        bounds: dict[str, date | None] = {}
        for name, label in (("since", "From"), ("until", "To")):
            text = params.get(name, "").strip()
            bounds[name] = None
            if text:
                try:
                    bounds[name] = date.fromisoformat(text)
                except ValueError:
                    problems.append(f"{label} is not a date (YYYY-MM-DD): {text!r}; it was not applied")
        since, until = bounds["since"], bounds["until"]
        if since and until and since > until:
            problems.append(f"From ({since}) is after To ({until}): no memory can match; swap them")
        return cls(params.get("session", "").strip(), params.get("source", "").strip(), since, until, problems)

    @property
    def active(self) -> bool:
        return bool(self.session or self.source or self.since or self.until)

    def keep(self, memory: Memory) -> bool:
        if self.session and not any(s.startswith(self.session) for s in sessions_of(memory)):
            return False
        if self.source and all(s.source_type != self.source for s in memory.sources):
            return False
        day = memory.updated_at.astimezone(UTC).date()
        if self.since and day < self.since:
            return False
        return not (self.until and day > self.until)


def sessions_of(memory: Memory) -> set[str]:
    return {memory.session_id, *(s.session_id for s in memory.sources)} - {""}


def source_values(memories: Sequence[Memory]) -> list[str]:
    """The source CLIs as stored (``claude-code``, ``cli``, ``publish``, …), for the Source filter."""
    return sorted({s.source_type for m in memories for s in m.sources if s.source_type})


def memory_id_or_none(text: str) -> str | None:
    """The id in a memory URL, or None for one that cannot be a memory's (a 404, never the store's error)."""
    try:
        return str(uuid.UUID(text)) if len(text) <= 40 else None
    except ValueError:
        return None


# -- projects -----------------------------------------------------------------------------------


def project_label(key: str, paths: Mapping[str, str]) -> str:
    """A project as people know it: its path (the key only while no memory of it has been read)."""
    return paths.get(key) or f"project {key}"


def project_choices(active: Mapping[str, int], paths: Mapping[str, str]) -> list[tuple[str, str]]:
    """(key, "path (n)") per project, by path; ``n`` counts active memories only."""
    keys = sorted(active, key=lambda k: project_label(k, paths))
    return [(k, f"{project_label(k, paths)} ({active[k]})") for k in keys]


# -- history ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collapsed:
    """A history record and how many like it followed in a row (same outcome, reason and requester)."""

    record: HistoryRecord
    times: int
    last: datetime


def collapse_history(records: Sequence[HistoryRecord]) -> list[Collapsed]:
    """Runs of the same event (raw mode's 13 "deduped — exchange_extended") as one line with a count."""
    ordered = sorted(records, key=lambda r: r.ts)

    def same(r: HistoryRecord) -> tuple[Any, ...]:
        return (r.outcome, r.reason, r.requested_by, r.target_id)

    collapsed = []
    for _, run in itertools.groupby(ordered, key=same):
        group = list(run)
        collapsed.append(Collapsed(group[0], len(group), group[-1].ts))
    return collapsed

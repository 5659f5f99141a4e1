"""Pipeline v2's retention sweep: what expires, and in which order it is purged.

Superseded memories (memstream's tombstones) are kept for audit, then hard-deleted once
past the tombstone window; audit records go once past the history window. The order keeps
every step referentially safe, since nothing is left pointing at a row already gone:

1. graph links   entity mentions of the expired tombstones (orphaned entities and their
                 relations with them)
2. embeddings    the tombstones' vectors, in every embedding model's collection that
                 holds them (a store keeping the vector on the memory does 2 and 3 at once)
3. tombstones    the memories themselves (recorded as ``purged`` in the history)
4. history       audit records older than the history window

The spec's last two steps, completed and dead job rows, do not apply: memstream keeps no
job table. Their equivalents are the retention of the Kafka topics themselves and of the
dead-letter topic, set on the topics, not swept.

The tombstone window runs from when a memory was superseded (the ``ts`` of the history
record that superseded it), not from its ``updated_at``: a supersede leaves
``updated_at`` as it was, so a memory last edited long ago would otherwise be purged the
moment it is superseded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Final, Literal, NamedTuple, TypeVar

import msgspec

#: Pipeline v2: each step deletes at most this many rows per sweep; the rest wait for the next.
BATCH_LIMIT = 500

#: Pipeline v2: time between two sweeps.
SWEEP_INTERVAL = timedelta(hours=6)

Step = Literal["graph-links", "embeddings", "tombstones", "history"]

#: The purge order; each step runs on its own, never in one long write.
STEPS: Final[tuple[Step, ...]] = ("graph-links", "embeddings", "tombstones", "history")

T = TypeVar("T")


class RetentionWindows(msgspec.Struct, kw_only=True, frozen=True):
    """How long expired data is kept (Pipeline v2's defaults)."""

    #: Days a superseded memory stays stored after it was superseded.
    tombstone_days: float = 30.0
    #: Days an audit record stays in the history store.
    history_days: float = 180.0

    def __post_init__(self) -> None:
        for name in ("tombstone_days", "history_days"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


class Cutoffs(NamedTuple):
    """What happened strictly before these instants has expired."""

    tombstone_before: datetime
    history_before: datetime


def cutoffs(now: datetime, windows: RetentionWindows) -> Cutoffs:
    """The instants before which tombstones and history records expire.

    ``now`` must be timezone-aware: stored timestamps are, and comparing them with a
    naive one would raise (or, worse, silently assume a zone).
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    return Cutoffs(
        tombstone_before=now - timedelta(days=windows.tombstone_days),
        history_before=now - timedelta(days=windows.history_days),
    )


def purge_batch(
    items: Iterable[T], when: Callable[[T], datetime], before: datetime, limit: int = BATCH_LIMIT
) -> list[T]:
    """The items that expired (``when(item) < before``), oldest first, at most ``limit``.

    Oldest first, so that a backlog larger than one batch drains in age order.
    """
    expired = sorted((item for item in items if when(item) < before), key=when)
    return expired[: max(0, limit)]

"""A forgotten speaker, for the stages whose state is keyed by project (issue 41.2).

A user's forget travels the pipeline keyed by the user, so only the worker that owns the user's
partition takes it; their exchanges are keyed by their project, on partitions other workers may
own. Every worker follows the ``forgotten`` ledger (``memstream.kafka.ledger``), so each stage asks
it, by the speaker, whatever partition the event came on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from memstream.schemas.state import RecentMemory

#: When a user key was last forgotten (None: never, as far as this worker knows).
ForgottenAt = Callable[[str], datetime | None]


def said_before_forget(said_at: datetime | None, forgotten_at: datetime | None) -> bool:
    """Was this said no later than its speaker's forget? Of unknown age, it counts as said before."""
    if forgotten_at is None:
        return False
    return said_at is None or said_at <= forgotten_at


def without_forgotten(recent: Sequence[RecentMemory], forgotten_at: ForgottenAt) -> list[RecentMemory]:
    """The recent memories left once every forgotten speaker's exchanges said before their forget go."""
    return [m for m in recent if not (m.speaker and said_before_forget(m.said_at, forgotten_at(m.speaker)))]

"""The timeline: what was stored before and after a memory (in its session), or a session's memories, in order.

An agent that found one memory in a search follows its thread from here without pulling every
record: the rows are the compact index of :mod:`memstream.recall.answers`. Document chunks are left
out (a document is not part of a conversation's thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstream.recall.search import searched_types
from memstream.schemas import Memory

if TYPE_CHECKING:
    from memstream.store.base import MemoryStore

#: Memories shown before and after the anchor when the caller does not say.
AROUND = 5
#: The most memories of one session a timeline shows when the caller does not say.
SESSION_LIMIT = 20
#: The most a caller may ask for on either side, or of a session.
MOST = 100
#: The store lists a scope newest first and its order needs every memory of it: this many at most.
SCAN_LIMIT = 100_000


def _in_order(memories: Sequence[Memory]) -> list[Memory]:
    # Ties (one exchange's facts share a timestamp) go by id, so every read gives one order.
    return sorted(memories, key=lambda m: (m.created_at, m.id))


async def around(
    store: MemoryStore,
    keys: Sequence[str],
    anchor: Memory,
    *,
    before: int = AROUND,
    after: int = AROUND,
    speaker: str | None = None,
) -> list[Memory]:
    """``before`` memories stored before ``anchor``, the anchor, then ``after`` stored after it: in its
    session when it has one (its thread; two sessions of one project interleave in time), else in
    these scopes. ``speaker``: only this reader's conversations (``memstream.auth.read_speaker``)."""
    sessions = [anchor.session_id] if anchor.session_id else None
    listed = await store.list(
        list(keys), types=searched_types("exclude"), limit=SCAN_LIMIT, sessions=sessions, speaker=speaker
    )
    ordered = _in_order([m for m in listed if m.id != anchor.id] + [anchor])
    at = next(i for i, m in enumerate(ordered) if m.id == anchor.id)
    return ordered[max(0, at - before) : at + after + 1]


async def of_session(
    store: MemoryStore, keys: Sequence[str], session: str, *, limit: int = SESSION_LIMIT, speaker: str | None = None
) -> list[Memory]:
    """The first ``limit`` memories of ``session`` in these scopes, in the order they were stored."""
    listed = await store.list(
        list(keys), types=searched_types("exclude"), limit=SCAN_LIMIT, sessions=[session], speaker=speaker
    )
    return _in_order(listed)[:limit]

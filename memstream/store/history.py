"""The audit trail's store (Pipeline v2's ``memory_history``): HistoryRecords, kept per memory.

Written only by the history agent (key: scope), read by the API and ``memstream history``,
purged by age by retention (Pipeline v2 step 4). Two backends, like memories: an embedded
Qdrant Edge shard under the data dir, or a collection on the Qdrant server.

One point per record, its id the record's ``record_id`` (a uuid), so appending a replayed
record overwrites it. Records have no vector: the server collection has an empty vector
config, and since Edge insists on at least one vector kind its shard declares a sparse
vector that no point fills, which stores nothing. ``ts`` has a datetime index: both
libraries range-filter it and order by it at microsecond precision (their order value is
epoch microseconds), and ordering by a field needs a range index on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, Protocol

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import (
    Direction,
    EdgeShard,
    FieldCondition,
    Filter,
    OrderBy,
    Point,
    RangeDateTime,
    ScrollRequest,
    UpdateOperation,
)

from memstream.schemas.history import HistoryRecord
from memstream.store.hosts import (
    EdgeBacked,
    ServerBacked,
    edge_filter,
    edge_pages,
    ensure_payload_collection,
    open_payload_shard,
    server_filter,
)
from memstream.store.points import IndexKind, Select, payload_of

#: The collection (server) or shard directory (Edge) of the audit trail.
COLLECTION: Final = "history"
#: The fields the reads filter on, and ``ts``, which they range over and order by.
INDEXES: Final[dict[str, IndexKind]] = {
    "memory_id": "keyword",
    "target_id": "keyword",
    "scope_key": "keyword",
    "ts": "datetime",
}


class HistoryStore(Protocol):
    """Audit records; appends are idempotent by ``record_id``."""

    async def open(self) -> None:
        """Create the collection and payload indexes if they are missing (idempotent)."""

    async def close(self) -> None: ...

    async def append(self, records: Sequence[HistoryRecord]) -> None:
        """Store records, replacing any with the same ``record_id``."""

    async def for_memory(self, memory_id: str, *, limit: int = 100) -> list[HistoryRecord]:
        """Records about a memory (its ``memory_id`` or ``target_id``), oldest first."""

    async def for_scope(self, scope_key: str, *, limit: int = 100) -> list[HistoryRecord]:
        """The newest ``limit`` records of a scope, newest first."""

    async def purge_scope(self, scope_key: str, *, limit: int = 500) -> int:
        """Delete up to ``limit`` records of a scope (a forget); returns how many. Call until 0."""

    async def purge_memories(self, memory_ids: Sequence[str]) -> int:
        """Delete every record of these memories (a user's exchanges in other scopes, at their forget)."""

    async def purge_before(self, before: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` records older than ``before``, oldest first; how many went."""


def record_to_payload(record: HistoryRecord) -> dict[str, Any]:
    payload: dict[str, Any] = msgspec.to_builtins(record)
    return payload


def record_from_payload(payload: dict[str, Any]) -> HistoryRecord:
    return msgspec.convert(payload, HistoryRecord)


class _QdrantHistory(ABC):
    """The reads both backends share; each supplies the ordered scroll below."""

    @abstractmethod
    async def _by_ts(self, select: Select, *, newest_first: bool, limit: int) -> list[HistoryRecord]:
        """The first ``limit`` records ``select`` keeps, ordered by ``ts``."""

    async def for_memory(self, memory_id: str, *, limit: int = 100) -> list[HistoryRecord]:
        if not memory_id:
            return []  # "" is how records say "no memory"; it must not match them all.
        about = Select(any_of={"memory_id": [memory_id], "target_id": [memory_id]})
        return _chronological(await self._by_ts(about, newest_first=False, limit=limit))

    async def for_scope(self, scope_key: str, *, limit: int = 100) -> list[HistoryRecord]:
        in_scope = Select({"scope_key": [scope_key]})
        return _chronological(await self._by_ts(in_scope, newest_first=True, limit=limit), newest_first=True)


def _chronological(records: list[HistoryRecord], *, newest_first: bool = False) -> list[HistoryRecord]:
    """Both libraries order equal timestamps arbitrarily; the record id settles ties alike."""
    return sorted(records, key=lambda r: (r.ts, r.record_id), reverse=newest_first)


class EdgeHistoryStore(EdgeBacked, _QdrantHistory):
    """The audit trail in an on-disk shard at ``root / collection``.

    Like EdgeStore, every shard call runs on one dedicated thread.
    """

    default_collection = COLLECTION

    def _open_shard(self) -> EdgeShard:
        return open_payload_shard(self.path, INDEXES)

    async def append(self, records: Sequence[HistoryRecord]) -> None:
        if not records:
            return
        points = [Point(r.record_id, {}, record_to_payload(r)) for r in records]
        await self._run(lambda s: s.update(UpdateOperation.upsert_points(points)))

    async def purge_scope(self, scope_key: str, *, limit: int = 500) -> int:
        in_scope = edge_filter(Select({"scope_key": [scope_key]}))

        def _purge(s: EdgeShard) -> int:
            records, _ = s.scroll(ScrollRequest(limit=limit, filter=in_scope, with_payload=False))
            if records:
                s.update(UpdateOperation.delete_points([r.id for r in records]))
            return len(records)

        return await self._run(_purge)

    async def purge_memories(self, memory_ids: Sequence[str]) -> int:
        of_them = edge_filter(Select({"memory_id": list(memory_ids)}))

        def _purge(s: EdgeShard) -> int:
            ids = [r.id for page in edge_pages(s, of_them, with_payload=False) for r in page]
            if ids:
                s.update(UpdateOperation.delete_points(ids))
            return len(ids)

        return await self._run(_purge) if memory_ids else 0

    async def purge_before(self, before: datetime, *, limit: int = 500) -> int:
        # The same text form the records were stored in, so naive means UTC on both sides.
        older = Filter(must=[FieldCondition("ts", range=RangeDateTime(lt=msgspec.to_builtins(before)))])

        def _purge(s: EdgeShard) -> int:
            oldest_first = OrderBy("ts", Direction.Asc)
            request = ScrollRequest(limit=limit, filter=older, with_payload=False, order_by=oldest_first)
            records, _ = s.scroll(request)
            if records:
                s.update(UpdateOperation.delete_points([r.id for r in records]))
            return len(records)

        return await self._run(_purge)

    async def _by_ts(self, select: Select, *, newest_first: bool, limit: int) -> list[HistoryRecord]:
        order = OrderBy("ts", Direction.Desc if newest_first else Direction.Asc)
        request = ScrollRequest(limit=limit, filter=edge_filter(select), with_payload=True, order_by=order)
        records, _ = await self._run(lambda s: s.scroll(request))
        return [record_from_payload(payload_of(r)) for r in records]


class ServerHistoryStore(ServerBacked, _QdrantHistory):
    """The audit trail in the collection ``collection`` of a Qdrant server (or local mode)."""

    default_collection = COLLECTION

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        await ensure_payload_collection(client, self.collection, INDEXES)

    async def append(self, records: Sequence[HistoryRecord]) -> None:
        if not records:
            return
        points = [models.PointStruct(id=r.record_id, vector={}, payload=record_to_payload(r)) for r in records]
        await self._qdrant.upsert(self.collection, points)

    async def purge_scope(self, scope_key: str, *, limit: int = 500) -> int:
        in_scope = server_filter(Select({"scope_key": [scope_key]}))
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=in_scope, limit=limit, with_payload=False)
        if records:
            await self._qdrant.delete(self.collection, points_selector=[r.id for r in records])
        return len(records)

    async def purge_memories(self, memory_ids: Sequence[str]) -> int:
        if not memory_ids:
            return 0
        of_them = models.Filter(
            must=[models.FieldCondition(key="memory_id", match=models.MatchAny(any=list(memory_ids)))]
        )
        count = (await self._qdrant.count(self.collection, count_filter=of_them, exact=True)).count
        if count:
            await self._qdrant.delete(self.collection, points_selector=models.FilterSelector(filter=of_them))
        return count

    async def purge_before(self, before: datetime, *, limit: int = 500) -> int:
        older = models.Filter(must=[models.FieldCondition(key="ts", range=models.DatetimeRange(lt=before))])
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=older,
            limit=limit,
            order_by=models.OrderBy(key="ts", direction=models.Direction.ASC),
            with_payload=False,
        )
        if records:
            await self._qdrant.delete(self.collection, points_selector=[r.id for r in records])
        return len(records)

    async def _by_ts(self, select: Select, *, newest_first: bool, limit: int) -> list[HistoryRecord]:
        direction = models.Direction.DESC if newest_first else models.Direction.ASC
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=server_filter(select),
            limit=limit,
            order_by=models.OrderBy(key="ts", direction=direction),
            with_payload=True,
        )
        return [record_from_payload(payload_of(r)) for r in records]

"""The audit trail's store (seed 003's ``memory_history``): HistoryRecords, kept per memory.

Written only by the history agent (key: scope), read by the API and ``memstream history``,
purged by age by retention (seed 003 step 4). Two backends, like memories: an embedded
Qdrant Edge shard under the data dir, or a collection on the Qdrant server.

One point per record, its id the record's ``record_id`` (a uuid), so appending a replayed
record overwrites it. Records have no vector: the server collection has an empty vector
config, and since Edge insists on at least one vector kind its shard declares a sparse
vector that no point fills, which stores nothing. ``ts`` has a datetime index: both
libraries range-filter it and order by it at microsecond precision (their order value is
epoch microseconds), and ordering by a field needs a range index on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import (
    Direction,
    EdgeShard,
    FieldCondition,
    Filter,
    MatchValue,
    OrderBy,
    PayloadSchemaType,
    Point,
    RangeDateTime,
    ScrollRequest,
    UpdateOperation,
)

from memstream.schemas.history import HistoryRecord
from memstream.store.hosts import ClientHost, ShardHost, ensure_payload_collection, open_payload_shard

#: The collection (server) or shard directory (Edge) of the audit trail.
COLLECTION: Final = "history"
#: Keyword fields the reads filter on.
KEYWORD_FIELDS: Final[tuple[str, ...]] = ("memory_id", "target_id", "scope_key")

T = TypeVar("T")


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

    async def purge_before(self, before: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` records older than ``before``, oldest first; how many went."""


def record_to_payload(record: HistoryRecord) -> dict[str, Any]:
    payload: dict[str, Any] = msgspec.to_builtins(record)
    return payload


def record_from_payload(payload: dict[str, Any]) -> HistoryRecord:
    return msgspec.convert(payload, HistoryRecord)


def _chronological(records: list[HistoryRecord], *, newest_first: bool = False) -> list[HistoryRecord]:
    """Both libraries order equal timestamps arbitrarily; the record id settles ties alike."""
    return sorted(records, key=lambda r: (r.ts, r.record_id), reverse=newest_first)


class EdgeHistoryStore:
    """The audit trail in an on-disk shard at ``root / collection``.

    Like EdgeStore, every shard call runs on one dedicated thread.
    """

    def __init__(self, root: Path, *, collection: str = COLLECTION) -> None:
        self.collection = collection
        self.path = Path(root) / collection
        self._host = ShardHost(self.path, self._open_shard, owner="EdgeHistoryStore")

    async def _run(self, fn: Callable[[EdgeShard], T]) -> T:
        return await self._host.run(fn)

    async def open(self) -> None:
        await self._host.open()

    def _open_shard(self) -> EdgeShard:
        indexes: dict[str, Any] = dict.fromkeys(KEYWORD_FIELDS, PayloadSchemaType.Keyword)
        indexes["ts"] = PayloadSchemaType.Datetime
        return open_payload_shard(self.path, indexes)

    async def close(self) -> None:
        await self._host.close()

    async def append(self, records: Sequence[HistoryRecord]) -> None:
        if not records:
            return
        points = [Point(r.record_id, {}, record_to_payload(r)) for r in records]
        await self._run(lambda s: s.update(UpdateOperation.upsert_points(points)))

    async def for_memory(self, memory_id: str, *, limit: int = 100) -> list[HistoryRecord]:
        if not memory_id:
            return []  # "" is how records say "no memory"; it must not match them all.
        about = Filter(
            should=[
                FieldCondition("memory_id", match=MatchValue(memory_id)),
                FieldCondition("target_id", match=MatchValue(memory_id)),
            ]
        )
        return _chronological(await self._scroll(about, Direction.Asc, limit))

    async def for_scope(self, scope_key: str, *, limit: int = 100) -> list[HistoryRecord]:
        in_scope = Filter(must=[FieldCondition("scope_key", match=MatchValue(scope_key))])
        return _chronological(await self._scroll(in_scope, Direction.Desc, limit), newest_first=True)

    async def purge_scope(self, scope_key: str, *, limit: int = 500) -> int:
        in_scope = Filter(must=[FieldCondition("scope_key", match=MatchValue(scope_key))])

        def _purge(s: EdgeShard) -> int:
            records, _ = s.scroll(ScrollRequest(limit=limit, filter=in_scope, with_payload=False))
            if records:
                s.update(UpdateOperation.delete_points([r.id for r in records]))
            return len(records)

        return await self._run(_purge)

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

    async def _scroll(self, flt: Filter, direction: Direction, limit: int) -> list[HistoryRecord]:
        request = ScrollRequest(limit=limit, filter=flt, with_payload=True, order_by=OrderBy("ts", direction))
        records, _ = await self._run(lambda s: s.scroll(request))
        return [record_from_payload(r.payload or {}) for r in records]


class ServerHistoryStore:
    """The audit trail in the collection ``collection`` of a Qdrant server (or local mode)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        client: AsyncQdrantClient | None = None,
        collection: str = COLLECTION,
    ) -> None:
        """Connect by ``url``/``api_key`` or ``location``, or share an open ``client``.

        A shared client (one connection for every store) is left open by close().
        """
        self.collection = collection
        self._host = ClientHost(
            owner=f"ServerHistoryStore for {self.collection}",
            url=url,
            api_key=api_key,
            location=location,
            client=client,
        )

    @property
    def _qdrant(self) -> AsyncQdrantClient:
        return self._host.client

    async def open(self) -> None:
        await self._host.open(self._ensure_collection)

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        indexes: dict[str, models.PayloadSchemaType | models.KeywordIndexParams] = dict.fromkeys(
            KEYWORD_FIELDS, models.PayloadSchemaType.KEYWORD
        )
        indexes["ts"] = models.PayloadSchemaType.DATETIME
        await ensure_payload_collection(client, self.collection, indexes)

    async def close(self) -> None:
        await self._host.close()

    async def append(self, records: Sequence[HistoryRecord]) -> None:
        if not records:
            return
        points = [models.PointStruct(id=r.record_id, vector={}, payload=record_to_payload(r)) for r in records]
        await self._qdrant.upsert(self.collection, points)

    async def for_memory(self, memory_id: str, *, limit: int = 100) -> list[HistoryRecord]:
        if not memory_id:
            return []  # "" is how records say "no memory"; it must not match them all.
        about = models.Filter(
            should=[
                models.FieldCondition(key="memory_id", match=models.MatchValue(value=memory_id)),
                models.FieldCondition(key="target_id", match=models.MatchValue(value=memory_id)),
            ]
        )
        return _chronological(await self._scroll(about, models.Direction.ASC, limit))

    async def for_scope(self, scope_key: str, *, limit: int = 100) -> list[HistoryRecord]:
        in_scope = models.Filter(
            must=[models.FieldCondition(key="scope_key", match=models.MatchValue(value=scope_key))]
        )
        return _chronological(await self._scroll(in_scope, models.Direction.DESC, limit), newest_first=True)

    async def purge_scope(self, scope_key: str, *, limit: int = 500) -> int:
        in_scope = models.Filter(
            must=[models.FieldCondition(key="scope_key", match=models.MatchValue(value=scope_key))]
        )
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=in_scope, limit=limit, with_payload=False)
        if records:
            await self._qdrant.delete(self.collection, points_selector=[r.id for r in records])
        return len(records)

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

    async def _scroll(self, flt: models.Filter, direction: models.Direction, limit: int) -> list[HistoryRecord]:
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=flt,
            limit=limit,
            order_by=models.OrderBy(key="ts", direction=direction),
            with_payload=True,
        )
        return [record_from_payload(r.payload or {}) for r in records]

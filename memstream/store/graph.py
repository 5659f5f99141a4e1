"""The knowledge graph's store (Pipeline v2, ``graphEnabled``): entities, relations, mentions.

Written only by the graph agent (key: scope) and retention, read by search for the graph
boost. Two backends, like memories: an embedded Qdrant Edge shard under the data dir, or a
collection on the Qdrant server. What to write is decided by ``memstream.rules.graph``;
the walk and the writes are shared here, and each backend only translates reads and writes.

Layout: one collection of payload-only points (no vector, as in ``history``), the three
row kinds told apart by a ``kind`` keyword, each point's id the row's derived uuid. One
collection rather than three because apply and purge read and write all three kinds
together: on Edge that is one shard, one WAL and one thread instead of three, and an
apply's rows go out as one upsert, one WAL entry, so a crash cannot leave an entity
counted without its mention row (a sharded server splits an upsert per shard).

Name matching is ``MatchSubstring`` on ``canonical_name``, the spec's ``LIKE %token%``:
both libraries support it, served by a keyword index with the ``prefix`` option.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple, Protocol

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import Direction, EdgeShard, OrderBy, Point, ScrollRequest, UpdateOperation

from memstream.rules.graph import (
    MAX_BOOST_MEMORIES,
    MAX_ENTITY_HITS,
    MAX_NEIGHBOURS,
    GraphWrite,
    neighbours,
    plan_keys,
    plan_purge,
    plan_upsert,
    query_tokens,
)
from memstream.schemas.events import Entity
from memstream.schemas.graph import GraphEntity, GraphMention, GraphRelation, GraphRow
from memstream.store.hosts import (
    EdgeBacked,
    ServerBacked,
    edge_filter,
    ensure_payload_collection,
    open_payload_shard,
    server_filter,
)
from memstream.store.points import SCROLL_PAGE, IndexKind, Select, payload_of

log = logging.getLogger(__name__)

#: The collection (server) or shard directory (Edge) of the graph.
COLLECTION: Final = "graph"
#: Pipeline v2's graphBoostTimeoutMs (500 ms): the boost returns what it has by then.
BOOST_DEADLINE_S: Final = 0.5
#: Relations read to find neighbours, most mentioned first; bounds the read around hubs.
MAX_RELATIONS_READ: Final = 500
#: The fields the reads filter on (exact, or by substring) and order by.
INDEXES: Final[dict[str, IndexKind]] = {
    "kind": "keyword",
    "scope_key": "keyword",
    "memory_id": "keyword",
    "entity_id": "keyword",
    "source_entity_id": "keyword",
    "target_entity_id": "keyword",
    "canonical_name": "keyword-prefix",
    "mentions": "integer",
}

Kind = Literal["entity", "relation", "mention"]


class GraphAround(NamedTuple):
    """One memory's neighbourhood: its entities (and their neighbours), their relations, and the
    ids of other memories that mention the same entities."""

    entities: list[GraphEntity]
    relations: list[GraphRelation]
    memory_ids: list[str]


class GraphPurged(NamedTuple):
    """Rows retention deleted: mention rows, orphaned entities, and their relations."""

    mentions: int
    entities: int
    relations: int


def _rows(
    kind: Kind,
    all_of: Mapping[str, Collection[str]] | None = None,
    *,
    any_of: Mapping[str, Collection[str]] | None = None,
    name_contains: Collection[str] = (),
) -> Select:
    """Rows of one ``kind`` whose fields hold the values given; ``canonical_name`` containing a token."""
    return Select(
        {"kind": [kind], **(all_of or {})},
        any_of or {},
        {"canonical_name": name_contains} if name_contains else {},
    )


def _id(row: GraphRow) -> str:
    if isinstance(row, GraphEntity):
        return row.entity_id
    if isinstance(row, GraphRelation):
        return row.relation_id
    return row.mention_id


def _kind(row: GraphRow) -> Kind:
    if isinstance(row, GraphEntity):
        return "entity"
    if isinstance(row, GraphRelation):
        return "relation"
    return "mention"


def row_to_payload(row: GraphRow) -> dict[str, Any]:
    payload: dict[str, Any] = msgspec.to_builtins(row)
    payload["kind"] = _kind(row)
    return payload


def row_from_payload(payload: dict[str, Any]) -> GraphRow:
    """The row its ``schema`` tag names; ``kind`` is ignored as an unknown field."""
    row: GraphRow = msgspec.convert(payload, GraphRow)
    return row


class GraphStore(Protocol):
    """The knowledge graph of every scope."""

    async def open(self) -> None:
        """Create the collection and payload indexes if they are missing (idempotent)."""

    async def close(self) -> None: ...

    async def apply(self, memory_id: str, scope_key: str, triples: Sequence[Entity]) -> GraphWrite:
        """Record a memory's triples in its scope's graph; returns the rows written.

        A memory already recorded writes nothing (see ``memstream.rules.graph``).
        """

    async def purge_memory(self, memory_ids: Collection[str]) -> GraphPurged:
        """Retention step 1: unlink memories from the graph, deleting entities left unmentioned.

        Memories of any scope; on a server, purge a scope's memories from the worker that
        owns its key, so the purge cannot race an apply in that scope.
        """

    async def entities(self, scope_key: str, *, limit: int = 1000) -> list[GraphEntity]:
        """A scope's entities, most mentioned first."""

    async def relations(self, scope_key: str, *, limit: int = 1000) -> list[GraphRelation]:
        """A scope's relations, most mentioned first."""

    async def boost_ids(
        self, query: str, scope_keys: Sequence[str], *, deadline_s: float = BOOST_DEADLINE_S
    ) -> tuple[set[str], bool]:
        """Pipeline v2's ``getGraphBoostIds``: memory ids to boost, and whether the deadline cut it."""

    async def around_memory(self, memory_id: str, *, limit: int = MAX_NEIGHBOURS) -> GraphAround:
        """A memory's entities, their relations and the other memories mentioning them (the console's)."""


class _QdrantGraph(ABC):
    """The graph logic both backends share; each supplies the five reads and writes below.

    Writes of one process are serialized by a lock, so apply and purge, which read then
    write, never interleave: on Edge (one process per shard) that makes them atomic; on a
    server, writers of one scope are serialized upstream by the scope key.
    """

    def __init__(self) -> None:
        self._writing = asyncio.Lock()

    @abstractmethod
    async def _get(self, ids: Collection[str]) -> list[dict[str, Any]]:
        """Payloads of the points with these ids that exist."""

    @abstractmethod
    async def _top(self, select: Select, limit: int) -> list[dict[str, Any]]:
        """Payloads of the ``limit`` matching points with the most ``mentions``, most first."""

    @abstractmethod
    async def _page(self, select: Select, offset: Any) -> tuple[list[dict[str, Any]], Any]:
        """One page of matching payloads in id order from ``offset``, and the next offset."""

    @abstractmethod
    async def _put(self, rows: Sequence[GraphRow]) -> None: ...

    @abstractmethod
    async def _drop(self, ids: Collection[str]) -> None: ...

    # -- writes ------------------------------------------------------------------

    async def apply(self, memory_id: str, scope_key: str, triples: Sequence[Entity]) -> GraphWrite:
        keys = plan_keys(scope_key, triples)
        if not keys.entity_ids:
            return GraphWrite([], [], [])
        async with self._writing:
            recorded = _rows("mention", {"memory_id": [memory_id], "scope_key": [scope_key]})
            mentions = await self._all(recorded)
            stored = [row_from_payload(p) for p in await self._get(keys.entity_ids | keys.relation_ids)]
            plan = plan_upsert(
                scope_key,
                memory_id,
                triples,
                entities=[r for r in stored if isinstance(r, GraphEntity)],
                relations=[r for r in stored if isinstance(r, GraphRelation)],
                mentions=[m for m in map(row_from_payload, mentions) if isinstance(m, GraphMention)],
            )
            if plan:
                await self._put([*plan.entities, *plan.relations, *plan.mentions])
        return plan

    async def purge_memory(self, memory_ids: Collection[str]) -> GraphPurged:
        if not memory_ids:
            return GraphPurged(0, 0, 0)
        async with self._writing:
            rows = map(row_from_payload, await self._all(_rows("mention", {"memory_id": memory_ids})))
            mentions = [m for m in rows if isinstance(m, GraphMention)]
            if not mentions:
                return GraphPurged(0, 0, 0)
            stored = map(row_from_payload, await self._get({m.entity_id for m in mentions}))
            plan = plan_purge(mentions, [e for e in stored if isinstance(e, GraphEntity)])
            dangling: list[str] = []
            if plan.orphan_ids:
                ends = {"source_entity_id": plan.orphan_ids, "target_entity_id": plan.orphan_ids}
                dangling = [p["relation_id"] for p in await self._all(_rows("relation", any_of=ends))]
            # Mention rows go first: should the purge stop half-way, an entity keeps too high
            # a count (it lingers, unreachable) instead of being decremented twice on retry.
            await self._drop(plan.mention_ids)
            if plan.entities:
                await self._put(plan.entities)
            if plan.orphan_ids or dangling:
                await self._drop([*plan.orphan_ids, *dangling])
        return GraphPurged(len(plan.mention_ids), len(plan.orphan_ids), len(dangling))

    # -- reads -------------------------------------------------------------------

    async def entities(self, scope_key: str, *, limit: int = 1000) -> list[GraphEntity]:
        rows = await self._top(_rows("entity", {"scope_key": [scope_key]}), limit)
        return [e for e in map(row_from_payload, rows) if isinstance(e, GraphEntity)]

    async def relations(self, scope_key: str, *, limit: int = 1000) -> list[GraphRelation]:
        rows = await self._top(_rows("relation", {"scope_key": [scope_key]}), limit)
        return [r for r in map(row_from_payload, rows) if isinstance(r, GraphRelation)]

    async def around_memory(self, memory_id: str, *, limit: int = MAX_NEIGHBOURS) -> GraphAround:
        """What a memory mentions, the relations of those entities, and the other memories one entity away."""
        mentions = list(map(row_from_payload, await self._all(_rows("mention", {"memory_id": [memory_id]}))))
        entity_ids = {m.entity_id for m in mentions if isinstance(m, GraphMention)}
        if not entity_ids:
            return GraphAround([], [], [])
        ends = {"source_entity_id": entity_ids, "target_entity_id": entity_ids}
        relations = [
            r
            for r in map(row_from_payload, await self._top(_rows("relation", any_of=ends), MAX_RELATIONS_READ))
            if isinstance(r, GraphRelation)
        ]
        named = entity_ids | {r.source_entity_id for r in relations} | {r.target_entity_id for r in relations}
        entities = [e for e in map(row_from_payload, await self._get(named)) if isinstance(e, GraphEntity)]
        page, _ = await self._page(_rows("mention", {"entity_id": entity_ids}), None)
        others = list(dict.fromkeys(p["memory_id"] for p in page if p["memory_id"] != memory_id))[:limit]
        return GraphAround(entities, relations, others)

    async def boost_ids(
        self, query: str, scope_keys: Sequence[str], *, deadline_s: float = BOOST_DEADLINE_S
    ) -> tuple[set[str], bool]:
        """Memories linked to the entities a query names.

        Entities whose canonical name contains a query token (most mentioned first, at most
        20), plus up to 50 entities one relation away, joined through mention rows to at most
        200 memory ids. The deadline is checked after each step and between pages; past it,
        what was found so far comes back with ``timed_out`` True. Boosting is only additive,
        so any failure is logged and gives no ids rather than failing the search. Memory ids
        are not checked against the memory store: the search layer boosts only the
        candidates it found.
        """
        deadline = time.monotonic() + deadline_s
        try:
            return await self._boost(query_tokens(query), scope_keys, deadline)
        except Exception:
            log.warning("graph boost failed; searching without it", exc_info=True)
            return set(), False

    async def _boost(self, tokens: list[str], scope_keys: Sequence[str], deadline: float) -> tuple[set[str], bool]:
        if not tokens or not scope_keys:
            return set(), False
        named = _rows("entity", {"scope_key": scope_keys}, name_contains=tokens)
        hits = [p["entity_id"] for p in await self._top(named, MAX_ENTITY_HITS)]
        if time.monotonic() >= deadline:
            return set(), True
        if not hits:
            return set(), False
        ends = {"source_entity_id": hits, "target_entity_id": hits}
        related = map(row_from_payload, await self._top(_rows("relation", any_of=ends), MAX_RELATIONS_READ))
        near = neighbours(hits, [r for r in related if isinstance(r, GraphRelation)], limit=MAX_NEIGHBOURS)
        memory_ids: set[str] = set()
        # Memories naming a hit come before those naming only a neighbour, should the cap cut.
        for group in (hits, near):
            offset: Any = None
            while group:
                if time.monotonic() >= deadline:
                    return memory_ids, True
                page, offset = await self._page(_rows("mention", {"entity_id": group}), offset)
                for p in page:
                    memory_ids.add(p["memory_id"])
                    if len(memory_ids) >= MAX_BOOST_MEMORIES:
                        return memory_ids, False
                if offset is None:
                    break
        return memory_ids, False

    async def _all(self, select: Select) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        offset: Any = None
        while True:
            page, offset = await self._page(select, offset)
            rows.extend(page)
            if offset is None:
                return rows


# -- Qdrant Edge ---------------------------------------------------------------------


class EdgeGraphStore(EdgeBacked, _QdrantGraph):
    """The graph in an on-disk shard at ``root / collection``; shard calls run on one thread."""

    default_collection = COLLECTION

    def _open_shard(self) -> EdgeShard:
        return open_payload_shard(self.path, INDEXES)

    async def _get(self, ids: Collection[str]) -> list[dict[str, Any]]:
        records = await self._run(lambda s: s.retrieve(list(ids), True, False))
        return [payload_of(r) for r in records]

    async def _top(self, select: Select, limit: int) -> list[dict[str, Any]]:
        request = ScrollRequest(
            limit=limit,
            filter=edge_filter(select),
            with_payload=True,
            order_by=OrderBy("mentions", Direction.Desc),
        )
        records, _ = await self._run(lambda s: s.scroll(request))
        return [payload_of(r) for r in records]

    async def _page(self, select: Select, offset: Any) -> tuple[list[dict[str, Any]], Any]:
        request = ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=edge_filter(select), with_payload=True)
        records, next_offset = await self._run(lambda s: s.scroll(request))
        return [payload_of(r) for r in records], next_offset

    async def _put(self, rows: Sequence[GraphRow]) -> None:
        points = [Point(_id(r), {}, row_to_payload(r)) for r in rows]
        await self._run(lambda s: s.update(UpdateOperation.upsert_points(points)))

    async def _drop(self, ids: Collection[str]) -> None:
        await self._run(lambda s: s.update(UpdateOperation.delete_points(list(ids))))


# -- Qdrant server -------------------------------------------------------------------


class ServerGraphStore(ServerBacked, _QdrantGraph):
    """The graph in the collection ``collection`` of a Qdrant server (or local mode)."""

    default_collection = COLLECTION

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        await ensure_payload_collection(client, self.collection, INDEXES)

    async def _get(self, ids: Collection[str]) -> list[dict[str, Any]]:
        records = await self._qdrant.retrieve(self.collection, list(ids), with_payload=True)
        return [payload_of(r) for r in records]

    async def _top(self, select: Select, limit: int) -> list[dict[str, Any]]:
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=server_filter(select),
            limit=limit,
            order_by=models.OrderBy(key="mentions", direction=models.Direction.DESC),
            with_payload=True,
        )
        return [payload_of(r) for r in records]

    async def _page(self, select: Select, offset: Any) -> tuple[list[dict[str, Any]], Any]:
        records, next_offset = await self._qdrant.scroll(
            self.collection,
            scroll_filter=server_filter(select),
            limit=SCROLL_PAGE,
            offset=offset,
            with_payload=True,
        )
        return [payload_of(r) for r in records], next_offset

    async def _put(self, rows: Sequence[GraphRow]) -> None:
        points = [models.PointStruct(id=_id(r), vector={}, payload=row_to_payload(r)) for r in rows]
        await self._qdrant.upsert(self.collection, points)

    async def _drop(self, ids: Collection[str]) -> None:
        await self._qdrant.delete(self.collection, points_selector=list(ids))

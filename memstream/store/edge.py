"""MemoryStore on an embedded Qdrant Edge shard (``qdrant-edge-py``), one directory per model.

Every shard call blocks, and the shard is not meant to be shared between threads, so all
of them run on one dedicated single-thread executor. That also makes each method's
read-modify-write (refresh, supersede, delete, purge) atomic with respect to the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec
from qdrant_edge import (
    CountRequest,
    Direction,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    HasIdCondition,
    HasVectorCondition,
    IsEmptyCondition,
    MatchAny,
    MatchValue,
    Modifier,
    OrderBy,
    PayloadSchemaType,
    Point,
    PointVectors,
    Query,
    QueryBatchRequest,
    QueryRequest,
    RangeDateTime,
    Record,
    ScrollRequest,
    SparseVector,
    UpdateOperation,
)

from memstream.schemas import Memory, Provenance, ScoredMemory
from memstream.schemas.codec import memory_from_payload, memory_to_payload
from memstream.schemas.memory import HybridHit
from memstream.store.base import (
    BM25_VECTOR,
    HYBRID_POOL_FACTOR,
    collection_name,
    document_terms,
    fuse,
    hybrid_legs,
    oldest_tombstones,
    query_terms,
)
from memstream.store.hosts import SHARD_CONFIG_FILE, ShardHost

VECTOR_NAME: Final = "dense"
#: Payload fields the filters use: keyword indexes keep filtered search exact and fast, the
#: datetime one lets the retention purge find old tombstones without reading every one.
PAYLOAD_INDEXES: Final[dict[str, PayloadSchemaType]] = {
    "scope_key": PayloadSchemaType.Keyword,
    "type": PayloadSchemaType.Keyword,
    "status": PayloadSchemaType.Keyword,
    "superseded_at": PayloadSchemaType.Datetime,
}
#: Points fetched per scroll call when listing; list() sorts in memory, so it reads them all.
SCROLL_PAGE: Final = 256

T = TypeVar("T")


def _filter(
    scope_keys: Sequence[str] | None,
    types: Sequence[str] | None = None,
    include_superseded: bool = True,
    exclude_ids: Sequence[str] = (),
) -> Filter | None:
    must: list[Any] = []
    if scope_keys is not None:
        must.append(FieldCondition("scope_key", match=MatchAny(list(scope_keys))))
    if types is not None:
        must.append(FieldCondition("type", match=MatchAny(list(types))))
    if not include_superseded:
        # A keyword, not the bool: qdrant-edge-py 0.9 turns MatchValue(False) into 0.
        must.append(FieldCondition("status", match=MatchValue("active")))
    # HasIdCondition insists on a set; a list raises TypeError.
    must_not: list[Any] = [HasIdCondition(set(exclude_ids))] if exclude_ids else []
    if not must and not must_not:
        return None
    return Filter(must=must or None, must_not=must_not or None)


def _purgeable(before: datetime) -> Filter:
    """Superseded before ``before``; a tombstone without ``superseded_at`` counts from ``updated_at``."""
    cutoff = before.isoformat()
    legacy = Filter(
        must=[IsEmptyCondition("superseded_at"), FieldCondition("updated_at", range=RangeDateTime(lt=cutoff))]
    )
    return Filter(
        must=[FieldCondition("status", match=MatchValue("superseded"))],
        should=[FieldCondition("superseded_at", range=RangeDateTime(lt=cutoff)), legacy],
    )


def _point(memory: Memory, vector: Sequence[float]) -> Point:
    vectors = {
        VECTOR_NAME: [float(x) for x in vector],
        BM25_VECTOR: SparseVector(*document_terms(memory.text)),
    }
    return Point(memory.id, vectors, memory_to_payload(memory))


class EdgeStore:
    """Memories of one embedding model in an on-disk shard at ``root / collection_name(model)``."""

    def __init__(self, root: Path, embedding_model: str, dim: int, *, collection: str | None = None) -> None:
        self.embedding_model = embedding_model
        self.dim = dim
        self.collection = collection or collection_name(embedding_model)
        self.path = Path(root) / self.collection
        self._host = ShardHost(self.path, self._open_shard, owner="EdgeStore")

    async def _run(self, fn: Callable[[EdgeShard], T]) -> T:
        return await self._host.run(fn)

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        await self._host.open()

    def _open_shard(self) -> EdgeShard:
        config_file = self.path / SHARD_CONFIG_FILE
        if config_file.exists():
            # The shard exposes no config accessor, so the dim is read from its own file
            # before loading: a mismatch must fail loudly, not at the first upsert.
            config = json.loads(config_file.read_text())
            stored = config["vectors"][VECTOR_NAME]["size"]
            if stored != self.dim:
                raise ValueError(
                    f"shard {self.path} holds {stored}-d vectors but {self.embedding_model!r} "
                    f"was configured with dim={self.dim}"
                )
            shard = EdgeShard.load(str(self.path))
            if BM25_VECTOR not in config.get("sparse_vectors", {}):
                # A shard from before hybrid search: the vector is added in place.
                shard.update(UpdateOperation.create_sparse_vector(BM25_VECTOR, modifier=Modifier.Idf))
        else:
            vectors = {VECTOR_NAME: EdgeVectorParams(size=self.dim, distance=Distance.Cosine)}
            # IDF is left to Qdrant, from the shard's own statistics at query time.
            sparse = {BM25_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf)}
            shard = EdgeShard.create(str(self.path), EdgeConfig(vectors=vectors, sparse_vectors=sparse))
        existing = shard.info().payload_schema
        for field, schema in PAYLOAD_INDEXES.items():
            if field not in existing:
                shard.update(UpdateOperation.create_field_index(field, schema))
        _backfill_terms(shard)
        return shard

    async def close(self) -> None:
        await self._host.close()

    # -- writes ------------------------------------------------------------------

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        point = _point(memory, vector)
        await self._run(lambda s: s.update(UpdateOperation.upsert_points([point])))

    async def refresh(
        self,
        memory_id: str,
        *,
        text: str,
        updated_at: datetime,
        source_chunk: str | None = None,
        vector: Sequence[float] | None = None,
        session_id: str | None = None,
        sources: Sequence[Provenance] | None = None,
    ) -> Memory | None:
        changes: dict[str, Any] = {"text": text, "updated_at": updated_at}
        if source_chunk is not None:
            changes["source_chunk"] = source_chunk
        if session_id is not None:
            changes["session_id"] = session_id
        if sources is not None:
            changes["sources"] = list(sources)
        new_vector = None if vector is None else [float(x) for x in vector]
        return await self._run(lambda s: _replace(s, memory_id, changes, new_vector))

    async def supersede(self, memory_id: str, superseded_by: str, *, at: datetime | None = None) -> Memory | None:
        changes = {"superseded_by": superseded_by, "superseded_at": at or datetime.now(UTC)}
        return await self._run(lambda s: _replace(s, memory_id, changes, None))

    async def delete(self, memory_id: str) -> Memory | None:
        def _delete(s: EdgeShard) -> Memory | None:
            old = _get(s, memory_id)
            if old is not None:
                s.update(UpdateOperation.delete_points([memory_id]))
            return old

        return await self._run(_delete)

    async def purge_superseded(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        purgeable = _purgeable(before)

        def _purge(s: EdgeShard) -> list[Memory]:
            records, _ = s.scroll(ScrollRequest(limit=limit, filter=purgeable, with_payload=True))
            if records:
                s.update(UpdateOperation.delete_points([r.id for r in records]))
            return [memory_from_payload(r.payload or {}) for r in records]

        return await self._run(_purge)

    # -- reads -------------------------------------------------------------------

    async def tombstones(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        purgeable = _purgeable(before)
        # The dated ones come oldest first from the superseded_at index. Those from before the
        # field existed cannot be ordered there: no supersede adds to them, so they are few
        # and read whole.
        dated = Filter(must=[purgeable], must_not=[IsEmptyCondition("superseded_at")])
        legacy = Filter(must=[purgeable, IsEmptyCondition("superseded_at")])
        oldest = OrderBy("superseded_at", Direction.Asc)

        def _read(s: EdgeShard) -> list[Memory]:
            records, _ = s.scroll(ScrollRequest(limit=limit, filter=dated, with_payload=True, order_by=oldest))
            offset: Any = None
            while True:
                request = ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=legacy, with_payload=True)
                page, offset = s.scroll(request)
                records.extend(page)
                if offset is None:
                    return [memory_from_payload(r.payload or {}) for r in records]

        return oldest_tombstones(await self._run(_read), limit)

    async def get(self, memory_id: str) -> Memory | None:
        return await self._run(lambda s: _get(s, memory_id))

    async def vector(self, memory_id: str) -> list[float] | None:
        def _vector(s: EdgeShard) -> list[float] | None:
            records = s.retrieve([memory_id], False, [VECTOR_NAME])
            return _dense(records[0]) if records else None

        return await self._run(_vector)

    async def search(
        self,
        vector: Sequence[float],
        scope_keys: Sequence[str],
        *,
        limit: int = 10,
        types: Sequence[str] | None = None,
        max_distance: float | None = None,
        include_superseded: bool = False,
        exclude_ids: Sequence[str] = (),
    ) -> list[ScoredMemory]:
        request = QueryRequest(
            limit=limit,
            query=Query.Nearest([float(x) for x in vector], using=VECTOR_NAME),
            filter=_filter(scope_keys, types, include_superseded, exclude_ids),
            # Cosine in Qdrant is a similarity; the store speaks distance = 1 - score.
            score_threshold=None if max_distance is None else 1.0 - max_distance,
            with_payload=True,
            with_vector=False,
        )
        points = await self._run(lambda s: s.query(request))
        return [
            # float32 rounding can push an identical vector's score just past 1.
            ScoredMemory(memory_from_payload(p.payload or {}), max(0.0, 1.0 - p.score))
            for p in points
        ]

    async def hybrid_search(
        self,
        text: str,
        vector: Sequence[float],
        scope_keys: Sequence[str],
        *,
        limit: int = 5,
        alpha: float = 0.7,
        min_score: float = 0.3,
        types: Sequence[str] | None = None,
        exclude_ids: Sequence[str] = (),
    ) -> list[HybridHit]:
        run_dense, run_bm25 = hybrid_legs(alpha)
        flt = _filter(scope_keys, types, include_superseded=False, exclude_ids=exclude_ids)
        pool = limit * HYBRID_POOL_FACTOR
        legs: dict[str, QueryRequest] = {}
        if run_dense:
            nearest = Query.Nearest([float(x) for x in vector], using=VECTOR_NAME)
            legs[VECTOR_NAME] = QueryRequest(limit=pool, query=nearest, filter=flt, with_payload=True)
        terms = query_terms(text)
        if run_bm25 and terms.indices:  # a text of stopwords alone has no terms to match
            lexical = Query.Nearest(SparseVector(*terms), using=BM25_VECTOR)
            legs[BM25_VECTOR] = QueryRequest(limit=pool, query=lexical, filter=flt, with_payload=True)
        if not legs:
            return []
        # One batch: both legs share a single pass over the segments and one executor hop.
        batch = QueryBatchRequest(list(legs.values()))
        results = dict(zip(legs, await self._run(lambda s: s.query_batch(batch))))

        def scored(leg: str) -> list[tuple[Memory, float]]:
            return [(memory_from_payload(p.payload or {}), p.score) for p in results.get(leg, [])]

        return fuse(scored(VECTOR_NAME), scored(BM25_VECTOR), alpha=alpha, min_score=min_score, limit=limit)

    async def list(
        self,
        scope_keys: Sequence[str],
        *,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        limit: int = 1000,
    ) -> list[Memory]:
        flt = _filter(scope_keys, types, include_superseded)

        def _scroll_all(s: EdgeShard) -> list[Memory]:
            # Scroll walks id order; recency needs every match before sorting.
            memories: list[Memory] = []
            offset: Any = None
            while True:
                request = ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=flt, with_payload=True)
                records, offset = s.scroll(request)
                memories.extend(memory_from_payload(r.payload or {}) for r in records)
                if offset is None:
                    return memories

        memories = await self._run(_scroll_all)
        memories.sort(key=lambda m: m.updated_at, reverse=True)
        return memories[:limit]

    async def count(self, scope_keys: Sequence[str] | None = None, *, include_superseded: bool = True) -> int:
        request = CountRequest(exact=True, filter=_filter(scope_keys, include_superseded=include_superseded))
        return await self._run(lambda s: s.count(request))


def _get(shard: EdgeShard, memory_id: str) -> Memory | None:
    # with_payload is positional and required at runtime, despite the stub's default.
    records = shard.retrieve([memory_id], True, False)
    return memory_from_payload(records[0].payload or {}) if records else None


def _dense(record: Record) -> list[float]:
    vectors = record.vector
    if not isinstance(vectors, dict):
        raise ValueError(f"point {record.id} was read without its vectors")
    return [float(x) for x in vectors[VECTOR_NAME]]


def _replace(shard: EdgeShard, memory_id: str, changes: dict[str, Any], vector: list[float] | None) -> Memory | None:
    records = shard.retrieve([memory_id], True, [VECTOR_NAME])
    if not records:
        return None
    old = memory_from_payload(records[0].payload or {})
    new = msgspec.structs.replace(old, **changes)
    if vector is None and new.text == old.text:
        shard.update(UpdateOperation.overwrite_payload([memory_id], memory_to_payload(new)))
    else:
        # The BM25 terms follow the text: one upsert rewrites payload and both vectors, so
        # they never disagree, even after a crash between two writes.
        dense = vector if vector is not None else _dense(records[0])
        shard.update(UpdateOperation.upsert_points([_point(new, dense)]))
    return new


def _backfill_terms(shard: EdgeShard) -> None:
    """Give BM25 terms to every point without them: those written before the vector existed.

    Runs at every open, where it finds nothing once done, so a backfill cut short resumes.
    """
    lacking = Filter(must_not=[HasVectorCondition(BM25_VECTOR)])
    offset: Any = None
    while True:
        request = ScrollRequest(offset=offset, limit=SCROLL_PAGE, filter=lacking, with_payload=["text"])
        records, offset = shard.scroll(request)
        if records:
            texts = [(r.id, (r.payload or {}).get("text", "")) for r in records]
            terms = [PointVectors(i, {BM25_VECTOR: SparseVector(*document_terms(t))}) for i, t in texts]
            shard.update(UpdateOperation.update_vectors(terms))
        if offset is None:
            return

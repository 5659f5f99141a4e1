"""MemoryStore on an embedded Qdrant Edge shard (``qdrant-edge-py``), one directory per model.

Every shard call blocks, and the shard is not meant to be shared between threads, so all
of them run on one dedicated single-thread executor. That also makes each method's
read-modify-write (refresh, supersede, delete, purge) atomic with respect to the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

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
    HasVectorCondition,
    IsEmptyCondition,
    MatchValue,
    Modifier,
    OrderBy,
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

from memstream.schemas import Memory
from memstream.schemas.codec import memory_from_payload, memory_to_payload
from memstream.store.base import (
    BM25_VECTOR,
    DENSE_VECTOR,
    MEMORY_INDEXES,
    Leg,
    LegHits,
    QdrantMemories,
    Terms,
    collection_name,
    dense_of,
    document_terms,
    oldest_tombstones,
    rewrite,
)
from memstream.store.hosts import SHARD_CONFIG_FILE, EdgeBacked, edge_filter, edge_pages, ensure_edge_indexes
from memstream.store.points import Select, payload_of


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
    dense, terms = [float(x) for x in vector], SparseVector(*document_terms(memory.text))
    return Point(memory.id, {DENSE_VECTOR: dense, BM25_VECTOR: terms}, memory_to_payload(memory))


def _nearest(leg: Leg) -> QueryRequest:
    query = SparseVector(*leg.query) if isinstance(leg.query, Terms) else leg.query
    return QueryRequest(
        limit=leg.limit,
        query=Query.Nearest(query, using=leg.using),
        filter=edge_filter(leg.select),
        score_threshold=leg.score_threshold,
        with_payload=True,
        with_vector=False,
    )


class EdgeStore(EdgeBacked, QdrantMemories):
    """Memories of one embedding model in an on-disk shard at ``root / collection_name(model)``."""

    def __init__(self, root: Path, embedding_model: str, dim: int, *, collection: str | None = None) -> None:
        self.embedding_model = embedding_model
        self.dim = dim
        super().__init__(root, collection=collection or collection_name(embedding_model))

    # -- lifecycle ---------------------------------------------------------------

    def _open_shard(self) -> EdgeShard:
        config_file = self.path / SHARD_CONFIG_FILE
        if config_file.exists():
            # The shard exposes no config accessor, so the dim is read from its own file
            # before loading: a mismatch must fail loudly, not at the first upsert.
            config = json.loads(config_file.read_text())
            stored = config["vectors"][DENSE_VECTOR]["size"]
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
            vectors = {DENSE_VECTOR: EdgeVectorParams(size=self.dim, distance=Distance.Cosine)}
            # IDF is left to Qdrant, from the shard's own statistics at query time.
            sparse = {BM25_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf)}
            shard = EdgeShard.create(str(self.path), EdgeConfig(vectors=vectors, sparse_vectors=sparse))
        ensure_edge_indexes(shard, MEMORY_INDEXES)
        _backfill_terms(shard)
        return shard

    # -- writes ------------------------------------------------------------------

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        point = _point(memory, vector)
        await self._run(lambda s: s.update(UpdateOperation.upsert_points([point])))

    async def _replace(self, memory_id: str, changes: dict[str, Any], vector: list[float] | None) -> Memory | None:
        return await self._run(lambda s: _replace(s, memory_id, changes, vector))

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
            return [memory_from_payload(payload_of(r)) for r in records]

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
            for page in edge_pages(s, legacy):
                records.extend(page)
            return [memory_from_payload(payload_of(r)) for r in records]

        return oldest_tombstones(await self._run(_read), limit)

    async def get(self, memory_id: str) -> Memory | None:
        return await self._run(lambda s: _get(s, memory_id))

    async def vector(self, memory_id: str) -> list[float] | None:
        def _vector(s: EdgeShard) -> list[float] | None:
            records = s.retrieve([memory_id], False, [DENSE_VECTOR])
            return dense_of(records[0]) if records else None

        return await self._run(_vector)

    async def _query(self, legs: Sequence[Leg]) -> list[LegHits]:
        # One batch: the legs share a single pass over the segments and one executor hop.
        batch = QueryBatchRequest([_nearest(leg) for leg in legs])
        results = await self._run(lambda s: s.query_batch(batch))
        return [[(payload_of(p), p.score) for p in points] for points in results]

    async def _scroll_all(self, select: Select) -> list[dict[str, Any]]:
        flt = edge_filter(select)
        # One executor hop: every page is read from the same state of the shard.
        return await self._run(lambda s: [payload_of(r) for page in edge_pages(s, flt) for r in page])

    async def _count(self, select: Select) -> int:
        request = CountRequest(exact=True, filter=edge_filter(select))
        return await self._run(lambda s: s.count(request))

    # -- repairs -----------------------------------------------------------------

    async def _count_lacking(self, vector_name: str) -> int:
        request = CountRequest(exact=True, filter=Filter(must_not=[HasVectorCondition(vector_name)]))
        return await self._run(lambda s: s.count(request))

    async def _missing_indexes(self) -> tuple[str, ...]:
        existing = await self._run(lambda s: s.info().payload_schema)
        return tuple(field for field in MEMORY_INDEXES if field not in existing)

    async def repair_sparse_vectors(self, *, limit: int = 500) -> int:
        lacking = Filter(must_not=[HasVectorCondition(BM25_VECTOR)])

        def _repair(s: EdgeShard) -> int:
            records, _ = s.scroll(ScrollRequest(limit=limit, filter=lacking, with_payload=["text"]))
            if records:
                s.update(UpdateOperation.update_vectors(_terms_of(records)))
            return len(records)

        return await self._run(_repair)

    async def repair_indexes(self) -> list[str]:
        missing = await self._missing_indexes()
        await self._run(lambda s: ensure_edge_indexes(s, MEMORY_INDEXES))
        return list(missing)

    async def lacking_dense(self, *, limit: int = 100) -> list[Memory]:
        request = ScrollRequest(
            limit=limit, filter=Filter(must_not=[HasVectorCondition(DENSE_VECTOR)]), with_payload=True
        )
        records, _ = await self._run(lambda s: s.scroll(request))
        return [memory_from_payload(payload_of(r)) for r in records]


def _get(shard: EdgeShard, memory_id: str) -> Memory | None:
    # with_payload is positional and required at runtime, despite the stub's default.
    records = shard.retrieve([memory_id], True, False)
    return memory_from_payload(payload_of(records[0])) if records else None


def _replace(shard: EdgeShard, memory_id: str, changes: dict[str, Any], vector: list[float] | None) -> Memory | None:
    records = shard.retrieve([memory_id], True, [DENSE_VECTOR])
    if not records:
        return None
    new, vectors = rewrite(memory_from_payload(payload_of(records[0])), changes, vector)
    if vectors:
        dense = vector if vector is not None else dense_of(records[0])
        shard.update(UpdateOperation.upsert_points([_point(new, dense)]))
    else:
        shard.update(UpdateOperation.overwrite_payload([memory_id], memory_to_payload(new)))
    return new


def _backfill_terms(shard: EdgeShard) -> None:
    """Give BM25 terms to every point without them: those written before the vector existed.

    Runs at every open, where it finds nothing once done, so a backfill cut short resumes.
    """
    lacking = Filter(must_not=[HasVectorCondition(BM25_VECTOR)])
    for page in edge_pages(shard, lacking, with_payload=["text"]):
        if page:
            shard.update(UpdateOperation.update_vectors(_terms_of(page)))


def _terms_of(records: Sequence[Record]) -> list[PointVectors]:
    """The BM25 terms of each point's text, as a vector update."""
    return [
        PointVectors(r.id, {BM25_VECTOR: SparseVector(*document_terms(payload_of(r).get("text", "")))}) for r in records
    ]

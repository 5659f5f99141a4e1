"""MemoryStore on a Qdrant server (or the client's in-memory local mode), one collection per model."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from memstream.schemas import Memory, Provenance, ScoredMemory
from memstream.schemas.codec import memory_from_payload, memory_to_payload
from memstream.schemas.memory import HybridHit
from memstream.store.base import (
    BM25_VECTOR,
    HYBRID_POOL_FACTOR,
    Terms,
    collection_name,
    document_terms,
    fuse,
    hybrid_legs,
    oldest_tombstones,
    query_terms,
)
from memstream.store.hosts import ClientHost, create_collection, is_local

log = logging.getLogger(__name__)

VECTOR_NAME: Final = "dense"
#: Payload fields the filters use: keyword indexes keep filtered search exact and fast, the
#: datetime one lets the retention purge find old tombstones without reading every one.
PAYLOAD_INDEXES: Final[dict[str, models.PayloadSchemaType]] = {
    "scope_key": models.PayloadSchemaType.KEYWORD,
    "type": models.PayloadSchemaType.KEYWORD,
    "status": models.PayloadSchemaType.KEYWORD,
    "superseded_at": models.PayloadSchemaType.DATETIME,
}
#: Points fetched per scroll call when listing; list() sorts in memory, so it reads them all.
SCROLL_PAGE: Final = 256
#: IDF is left to Qdrant, from the collection's own statistics at query time.
BM25_PARAMS: Final = models.SparseVectorParams(modifier=models.Modifier.IDF)


def _filter(
    scope_keys: Sequence[str] | None,
    types: Sequence[str] | None = None,
    include_superseded: bool = True,
    exclude_ids: Sequence[str] = (),
) -> models.Filter | None:
    must: list[models.Condition] = []
    if scope_keys is not None:
        must.append(models.FieldCondition(key="scope_key", match=models.MatchAny(any=list(scope_keys))))
    if types is not None:
        must.append(models.FieldCondition(key="type", match=models.MatchAny(any=list(types))))
    if not include_superseded:
        # The keyword, like the Edge backend (whose bool match is broken), so both agree.
        must.append(models.FieldCondition(key="status", match=models.MatchValue(value="active")))
    must_not: list[models.Condition] = []
    if exclude_ids:
        must_not.append(models.HasIdCondition(has_id=list(exclude_ids)))
    if not must and not must_not:
        return None
    return models.Filter(must=must or None, must_not=must_not or None)


def _purgeable(before: datetime) -> models.Filter:
    """Superseded before ``before``; a tombstone without ``superseded_at`` counts from ``updated_at``."""
    legacy = models.Filter(
        must=[
            models.IsEmptyCondition(is_empty=models.PayloadField(key="superseded_at")),
            models.FieldCondition(key="updated_at", range=models.DatetimeRange(lt=before)),
        ]
    )
    return models.Filter(
        must=[models.FieldCondition(key="status", match=models.MatchValue(value="superseded"))],
        should=[models.FieldCondition(key="superseded_at", range=models.DatetimeRange(lt=before)), legacy],
    )


def _sparse(terms: Terms) -> models.SparseVector:
    return models.SparseVector(indices=terms.indices, values=terms.values)


class QdrantServerStore:
    """Memories of one embedding model in the collection ``collection_name(model)``."""

    def __init__(
        self,
        embedding_model: str,
        dim: int,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        client: AsyncQdrantClient | None = None,
        collection: str | None = None,
    ) -> None:
        """Connect by ``url``/``api_key`` or ``location``, or share an open ``client``.

        A shared client (one connection for every model's store) is left open by close().
        """
        self.embedding_model = embedding_model
        self.dim = dim
        self.collection = collection or collection_name(embedding_model)
        self._host = ClientHost(
            owner=f"QdrantServerStore for {self.collection}", url=url, api_key=api_key, location=location, client=client
        )
        #: False on a collection that predates the ``bm25`` vector on a server too old to
        #: add it: its points carry no terms and hybrid search runs the vector leg alone.
        self._bm25 = True

    @property
    def _qdrant(self) -> AsyncQdrantClient:
        return self._host.client

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        await self._host.open(self._ensure_collection)

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        vectors = {VECTOR_NAME: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)}
        await create_collection(
            client,
            self.collection,
            lambda: client.create_collection(
                self.collection, vectors_config=vectors, sparse_vectors_config={BM25_VECTOR: BM25_PARAMS}
            ),
        )
        info = await client.get_collection(self.collection)
        vectors_config = info.config.params.vectors
        stored = vectors_config.get(VECTOR_NAME) if isinstance(vectors_config, dict) else None
        if stored is None or stored.size != self.dim:
            found = "no 'dense' vector" if stored is None else f"{stored.size}-d vectors"
            raise ValueError(
                f"collection {self.collection} holds {found} but {self.embedding_model!r} "
                f"was configured with dim={self.dim}"
            )
        self._bm25 = BM25_VECTOR in (info.config.params.sparse_vectors or {}) or await self._add_bm25(client)
        if self._bm25:
            await self._backfill_terms(client)
        if is_local(client):
            return  # Local mode ignores payload indexes and warns on every create.
        for field, schema in PAYLOAD_INDEXES.items():
            if field not in info.payload_schema:
                await client.create_payload_index(self.collection, field, field_schema=schema)

    async def _add_bm25(self, client: AsyncQdrantClient) -> bool:
        """Add the ``bm25`` vector to a collection from before hybrid search; False if the server can't."""
        config = models.SparseVectorNameConfig(sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF))
        try:
            await client.create_vector_name(self.collection, BM25_VECTOR, config)
        except UnexpectedResponse as exc:
            # Adding a named vector needs a newer server than the compose file's 1.15; the
            # collection keeps working, with hybrid search reduced to its vector leg.
            log.warning(
                "collection %s has no %r vector and the server cannot add it (HTTP %s): "
                "hybrid search will use the dense vector alone",
                self.collection,
                BM25_VECTOR,
                exc.status_code,
            )
            return False
        return True

    async def _backfill_terms(self, client: AsyncQdrantClient) -> None:
        """Give BM25 terms to every point without them: those written before the vector existed.

        Runs at every open, where it finds nothing once done, so a backfill cut short resumes.
        """
        lacking = models.Filter(must_not=[models.HasVectorCondition(has_vector=BM25_VECTOR)])
        offset: Any = None
        while True:
            records, offset = await client.scroll(
                self.collection, scroll_filter=lacking, limit=SCROLL_PAGE, offset=offset, with_payload=["text"]
            )
            if records:
                texts = [(r.id, (r.payload or {}).get("text", "")) for r in records]
                terms = [models.PointVectors(id=i, vector={BM25_VECTOR: _sparse(document_terms(t))}) for i, t in texts]
                await client.update_vectors(self.collection, terms)
            if offset is None:
                return

    async def close(self) -> None:
        await self._host.close()

    # -- writes ------------------------------------------------------------------

    def _point(self, memory: Memory, vector: Sequence[float]) -> models.PointStruct:
        vectors: dict[str, Any] = {VECTOR_NAME: [float(x) for x in vector]}
        if self._bm25:
            vectors[BM25_VECTOR] = _sparse(document_terms(memory.text))
        return models.PointStruct(id=memory.id, vector=vectors, payload=memory_to_payload(memory))

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        await self._qdrant.upsert(self.collection, [self._point(memory, vector)])

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
        return await self._replace(memory_id, changes, vector)

    async def supersede(self, memory_id: str, superseded_by: str, *, at: datetime | None = None) -> Memory | None:
        changes = {"superseded_by": superseded_by, "superseded_at": at or datetime.now(UTC)}
        return await self._replace(memory_id, changes, None)

    async def _replace(self, memory_id: str, changes: dict[str, Any], vector: Sequence[float] | None) -> Memory | None:
        # Read-modify-write is not atomic on a server; writers of one memory are serialized
        # upstream by its partition key, so last-writer-wins is acceptable here.
        records = await self._qdrant.retrieve(
            self.collection, [memory_id], with_payload=True, with_vectors=[VECTOR_NAME]
        )
        if not records:
            return None
        old = memory_from_payload(records[0].payload or {})
        new = msgspec.structs.replace(old, **changes)
        if vector is None and new.text == old.text:
            await self._qdrant.overwrite_payload(self.collection, memory_to_payload(new), points=[memory_id])
        else:
            # The BM25 terms follow the text: one upsert rewrites payload and both vectors.
            dense = vector if vector is not None else _dense(records[0])
            await self._qdrant.upsert(self.collection, [self._point(new, dense)])
        return new

    async def delete(self, memory_id: str) -> Memory | None:
        old = await self.get(memory_id)
        if old is not None:
            await self._qdrant.delete(self.collection, points_selector=[memory_id])
        return old

    async def purge_superseded(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        purgeable = _purgeable(before)
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=purgeable, limit=limit, with_payload=True)
        if records:
            # Deleted by id and still purgeable, so a memory re-created active under the same
            # id between the scroll and the delete survives.
            found = models.HasIdCondition(has_id=[r.id for r in records])
            selected = models.Filter(must=[found, purgeable])
            await self._qdrant.delete(self.collection, points_selector=models.FilterSelector(filter=selected))
        return [memory_from_payload(r.payload or {}) for r in records]

    # -- reads -------------------------------------------------------------------

    async def tombstones(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        purgeable = _purgeable(before)
        undated = models.IsEmptyCondition(is_empty=models.PayloadField(key="superseded_at"))
        # The dated ones come oldest first from the superseded_at index. Those from before the
        # field existed cannot be ordered there: no supersede adds to them, so they are few
        # and read whole.
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=models.Filter(must=[purgeable], must_not=[undated]),
            limit=limit,
            order_by=models.OrderBy(key="superseded_at", direction=models.Direction.ASC),
            with_payload=True,
        )
        legacy = models.Filter(must=[purgeable, undated])
        offset: Any = None
        while True:
            page, offset = await self._qdrant.scroll(
                self.collection, scroll_filter=legacy, limit=SCROLL_PAGE, offset=offset, with_payload=True
            )
            records.extend(page)
            if offset is None:
                break
        return oldest_tombstones((memory_from_payload(r.payload or {}) for r in records), limit)

    async def get(self, memory_id: str) -> Memory | None:
        records = await self._qdrant.retrieve(self.collection, [memory_id], with_payload=True)
        return memory_from_payload(records[0].payload or {}) if records else None

    async def vector(self, memory_id: str) -> list[float] | None:
        records = await self._qdrant.retrieve(
            self.collection, [memory_id], with_payload=False, with_vectors=[VECTOR_NAME]
        )
        return _dense(records[0]) if records else None

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
        response = await self._qdrant.query_points(
            self.collection,
            query=[float(x) for x in vector],
            using=VECTOR_NAME,
            query_filter=_filter(scope_keys, types, include_superseded, exclude_ids),
            limit=limit,
            # Cosine in Qdrant is a similarity; the store speaks distance = 1 - score.
            score_threshold=None if max_distance is None else 1.0 - max_distance,
            with_payload=True,
        )
        return [
            # float32 rounding can push an identical vector's score just past 1.
            ScoredMemory(memory_from_payload(p.payload or {}), max(0.0, 1.0 - p.score))
            for p in response.points
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
        legs: dict[str, models.QueryRequest] = {}
        if run_dense:
            dense = [float(x) for x in vector]
            legs[VECTOR_NAME] = models.QueryRequest(
                query=dense, using=VECTOR_NAME, filter=flt, limit=pool, with_payload=True
            )
        terms = query_terms(text)
        if run_bm25 and self._bm25 and terms.indices:  # a text of stopwords alone has no terms
            legs[BM25_VECTOR] = models.QueryRequest(
                query=_sparse(terms), using=BM25_VECTOR, filter=flt, limit=pool, with_payload=True
            )
        if not legs:
            return []
        # Both legs in one round trip.
        responses = await self._qdrant.query_batch_points(self.collection, list(legs.values()))
        results = dict(zip(legs, responses))

        def scored(leg: str) -> list[tuple[Memory, float]]:
            points = results[leg].points if leg in results else []
            return [(memory_from_payload(p.payload or {}), p.score) for p in points]

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
        # Scroll walks id order; recency needs every match before sorting.
        memories: list[Memory] = []
        offset: Any = None
        while True:
            records, offset = await self._qdrant.scroll(
                self.collection, scroll_filter=flt, limit=SCROLL_PAGE, offset=offset, with_payload=True
            )
            memories.extend(memory_from_payload(r.payload or {}) for r in records)
            if offset is None:
                break
        memories.sort(key=lambda m: m.updated_at, reverse=True)
        return memories[:limit]

    async def count(self, scope_keys: Sequence[str] | None = None, *, include_superseded: bool = True) -> int:
        flt = _filter(scope_keys, include_superseded=include_superseded)
        result = await self._qdrant.count(self.collection, count_filter=flt, exact=True)
        return result.count


def _dense(record: models.Record) -> list[float]:
    vectors = record.vector
    if not isinstance(vectors, dict):
        raise ValueError(f"point {record.id} was read without its vectors")
    return [float(x) for x in vectors[VECTOR_NAME]]

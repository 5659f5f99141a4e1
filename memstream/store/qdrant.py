"""MemoryStore on a Qdrant server (or the client's in-memory local mode), one collection per model."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

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
from memstream.store.hosts import (
    ServerBacked,
    create_collection,
    ensure_server_indexes,
    is_local,
    server_filter,
    server_pages,
)
from memstream.store.points import Select, payload_of

log = logging.getLogger(__name__)

#: IDF is left to Qdrant, from the collection's own statistics at query time.
BM25_PARAMS: Final = models.SparseVectorParams(modifier=models.Modifier.IDF)


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


def _terms_of(records: Sequence[models.Record]) -> list[models.PointVectors]:
    """The BM25 terms of each point's text, as a vector update."""
    return [
        models.PointVectors(id=r.id, vector={BM25_VECTOR: _sparse(document_terms(payload_of(r).get("text", "")))})
        for r in records
    ]


def _sparse(terms: Terms) -> models.SparseVector:
    return models.SparseVector(indices=terms.indices, values=terms.values)


def _nearest(leg: Leg) -> models.QueryRequest:
    return models.QueryRequest(
        query=_sparse(leg.query) if isinstance(leg.query, Terms) else leg.query,
        using=leg.using,
        filter=server_filter(leg.select),
        limit=leg.limit,
        score_threshold=leg.score_threshold,
        with_payload=leg.with_payload,
    )


class QdrantServerStore(ServerBacked, QdrantMemories):
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
        name = collection or collection_name(embedding_model)
        super().__init__(url=url, api_key=api_key, location=location, client=client, collection=name)

    # -- lifecycle ---------------------------------------------------------------

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        vectors = {DENSE_VECTOR: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)}
        await create_collection(
            client,
            self.collection,
            lambda: client.create_collection(
                self.collection, vectors_config=vectors, sparse_vectors_config={BM25_VECTOR: BM25_PARAMS}
            ),
        )
        info = await client.get_collection(self.collection)
        vectors_config = info.config.params.vectors
        stored = vectors_config.get(DENSE_VECTOR) if isinstance(vectors_config, dict) else None
        if stored is None or stored.size != self.dim:
            found = "no 'dense' vector" if stored is None else f"{stored.size}-d vectors"
            raise ValueError(
                f"collection {self.collection} holds {found} but {self.embedding_model!r} "
                f"was configured with dim={self.dim}"
            )
        self._bm25 = BM25_VECTOR in (info.config.params.sparse_vectors or {}) or await self._add_bm25(client)
        if self._bm25:
            await self._backfill_terms(client)
        await ensure_server_indexes(client, self.collection, MEMORY_INDEXES)

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
        async for page in server_pages(client, self.collection, lacking, with_payload=["text"]):
            if page:
                await client.update_vectors(self.collection, _terms_of(page))

    # -- writes ------------------------------------------------------------------

    def _point(self, memory: Memory, vector: Sequence[float]) -> models.PointStruct:
        vectors: dict[str, Any] = {DENSE_VECTOR: [float(x) for x in vector]}
        if self._bm25:
            vectors[BM25_VECTOR] = _sparse(document_terms(memory.text))
        return models.PointStruct(id=memory.id, vector=vectors, payload=memory_to_payload(memory))

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        await self._qdrant.upsert(self.collection, [self._point(memory, vector)])

    async def _replace(self, memory_id: str, changes: dict[str, Any], vector: list[float] | None) -> Memory | None:
        # Read-modify-write is not atomic on a server; writers of one memory are serialized
        # upstream by its partition key, so last-writer-wins is acceptable here.
        records = await self._qdrant.retrieve(
            self.collection, [memory_id], with_payload=True, with_vectors=[DENSE_VECTOR]
        )
        if not records:
            return None
        new, vectors = rewrite(memory_from_payload(payload_of(records[0])), changes, vector)
        if vectors:
            dense = vector if vector is not None else dense_of(records[0])
            await self._qdrant.upsert(self.collection, [self._point(new, dense)])
        else:
            await self._qdrant.overwrite_payload(self.collection, memory_to_payload(new), points=[memory_id])
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
        return [memory_from_payload(payload_of(r)) for r in records]

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
        async for page in server_pages(self._qdrant, self.collection, legacy):
            records.extend(page)
        return oldest_tombstones((memory_from_payload(payload_of(r)) for r in records), limit)

    async def get(self, memory_id: str) -> Memory | None:
        records = await self._qdrant.retrieve(self.collection, [memory_id], with_payload=True)
        return memory_from_payload(payload_of(records[0])) if records else None

    async def vector(self, memory_id: str) -> list[float] | None:
        records = await self._qdrant.retrieve(
            self.collection, [memory_id], with_payload=False, with_vectors=[DENSE_VECTOR]
        )
        return dense_of(records[0]) if records else None

    async def _query(self, legs: Sequence[Leg]) -> list[LegHits]:
        # Every leg in one round trip.
        responses = await self._qdrant.query_batch_points(self.collection, [_nearest(leg) for leg in legs])
        return [[(str(p.id), payload_of(p), p.score) for p in r.points] for r in responses]

    async def _payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        records = await self._qdrant.retrieve(self.collection, list(ids), with_payload=True, with_vectors=False)
        return {str(r.id): payload_of(r) for r in records}

    async def _newest(self, select: Select, limit: int, before: datetime | None = None) -> list[dict[str, Any]]:
        records, _ = await self._qdrant.scroll(
            self.collection,
            scroll_filter=server_filter(select),
            limit=limit,
            order_by=models.OrderBy(key="updated_at", direction=models.Direction.DESC, start_from=before),
            with_payload=True,
        )
        return [payload_of(r) for r in records]

    async def _count(self, select: Select) -> int:
        result = await self._qdrant.count(self.collection, count_filter=server_filter(select), exact=True)
        return result.count

    async def _facet(self, key: str, limit: int) -> dict[str, int]:
        result = await self._qdrant.facet(self.collection, key, limit=limit, exact=True)
        return {str(hit.value): int(hit.count) for hit in result.hits}

    # -- repairs -----------------------------------------------------------------

    async def _count_lacking(self, vector_name: str) -> int:
        lacking = models.Filter(must_not=[models.HasVectorCondition(has_vector=vector_name)])
        result = await self._qdrant.count(self.collection, count_filter=lacking, exact=True)
        return result.count

    async def _missing_indexes(self) -> tuple[str, ...]:
        if is_local(self._qdrant):
            return ()  # Local mode keeps no payload indexes: none can be missing.
        existing = (await self._qdrant.get_collection(self.collection)).payload_schema
        return tuple(field for field in MEMORY_INDEXES if field not in existing)

    async def repair_sparse_vectors(self, *, limit: int = 500) -> int:
        if not self._bm25:
            return 0
        lacking = models.Filter(must_not=[models.HasVectorCondition(has_vector=BM25_VECTOR)])
        records, _ = await self._qdrant.scroll(
            self.collection, scroll_filter=lacking, limit=limit, with_payload=["text"]
        )
        if records:
            await self._qdrant.update_vectors(self.collection, _terms_of(records))
        return len(records)

    async def repair_indexes(self) -> list[str]:
        missing = await self._missing_indexes()
        await ensure_server_indexes(self._qdrant, self.collection, MEMORY_INDEXES)
        return list(missing)

    async def lacking_dense(self, *, limit: int = 100) -> list[Memory]:
        lacking = models.Filter(must_not=[models.HasVectorCondition(has_vector=DENSE_VECTOR)])
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=lacking, limit=limit, with_payload=True)
        return [memory_from_payload(payload_of(r)) for r in records]

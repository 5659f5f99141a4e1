"""MemoryStore on a Qdrant server (or the client's in-memory local mode), one collection per model."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import msgspec
from qdrant_client import AsyncQdrantClient, models

from memstream.store.base import collection_name
from schemas import Memory, ScoredMemory
from schemas.codec import memory_from_payload, memory_to_payload

VECTOR_NAME: Final = "dense"
#: Payload fields every filter uses; keyword indexes keep filtered search exact and fast.
INDEXED_FIELDS: Final[tuple[str, ...]] = ("scope_key", "type", "status")
#: Points fetched per scroll call when listing; list() sorts in memory, so it reads them all.
SCROLL_PAGE: Final = 256


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


def _is_local(client: AsyncQdrantClient) -> bool:
    """True for the client's in-process mode (``:memory:`` or a ``path``), not a server."""
    options = client.init_options
    return options.get("location") == ":memory:" or options.get("path") is not None


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
        self._url, self._api_key, self._location = url, api_key, location
        self._shared = client
        self._client: AsyncQdrantClient | None = None

    @property
    def _qdrant(self) -> AsyncQdrantClient:
        if self._client is None:
            raise RuntimeError(f"QdrantServerStore for {self.collection} is not open")
        return self._client

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        if self._client is not None:
            return
        client = self._shared or AsyncQdrantClient(
            location=self._location, url=self._url, api_key=self._api_key
        )
        try:
            await self._ensure_collection(client)
        except BaseException:
            if client is not self._shared:
                await client.close()
            raise
        self._client = client

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        if not await client.collection_exists(self.collection):
            vectors = {VECTOR_NAME: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)}
            try:
                await client.create_collection(self.collection, vectors_config=vectors)
            except Exception:
                # Another worker may have created it between our check and create.
                if not await client.collection_exists(self.collection):
                    raise
        info = await client.get_collection(self.collection)
        vectors_config = info.config.params.vectors
        stored = vectors_config.get(VECTOR_NAME) if isinstance(vectors_config, dict) else None
        if stored is None or stored.size != self.dim:
            found = "no 'dense' vector" if stored is None else f"{stored.size}-d vectors"
            raise ValueError(
                f"collection {self.collection} holds {found} but {self.embedding_model!r} "
                f"was configured with dim={self.dim}"
            )
        if _is_local(client):
            return  # Local mode ignores payload indexes and warns on every create.
        for field in INDEXED_FIELDS:
            if field not in info.payload_schema:
                await client.create_payload_index(
                    self.collection, field, field_schema=models.PayloadSchemaType.KEYWORD
                )

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            if client is not self._shared:
                await client.close()

    # -- writes ------------------------------------------------------------------

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        point = models.PointStruct(
            id=memory.id, vector={VECTOR_NAME: [float(x) for x in vector]}, payload=memory_to_payload(memory)
        )
        await self._qdrant.upsert(self.collection, [point])

    async def refresh(
        self,
        memory_id: str,
        *,
        text: str,
        updated_at: datetime,
        source_chunk: str | None = None,
        vector: Sequence[float] | None = None,
    ) -> Memory | None:
        changes: dict[str, Any] = {"text": text, "updated_at": updated_at}
        if source_chunk is not None:
            changes["source_chunk"] = source_chunk
        return await self._replace(memory_id, changes, vector)

    async def supersede(self, memory_id: str, superseded_by: str) -> Memory | None:
        return await self._replace(memory_id, {"superseded_by": superseded_by}, None)

    async def _replace(
        self, memory_id: str, changes: dict[str, Any], vector: Sequence[float] | None
    ) -> Memory | None:
        # Read-modify-write is not atomic on a server; writers of one memory are serialized
        # upstream by its partition key, so last-writer-wins is acceptable here.
        old = await self.get(memory_id)
        if old is None:
            return None
        new = msgspec.structs.replace(old, **changes)
        if vector is None:
            await self._qdrant.overwrite_payload(self.collection, memory_to_payload(new), points=[memory_id])
        else:
            await self.upsert(new, vector)
        return new

    async def delete(self, memory_id: str) -> Memory | None:
        old = await self.get(memory_id)
        if old is not None:
            await self._qdrant.delete(self.collection, points_selector=[memory_id])
        return old

    # -- reads -------------------------------------------------------------------

    async def get(self, memory_id: str) -> Memory | None:
        records = await self._qdrant.retrieve(self.collection, [memory_id], with_payload=True)
        return memory_from_payload(records[0].payload or {}) if records else None

    async def vector(self, memory_id: str) -> list[float] | None:
        records = await self._qdrant.retrieve(self.collection, [memory_id], with_payload=False, with_vectors=True)
        vectors = records[0].vector if records else None
        return [float(x) for x in vectors[VECTOR_NAME]] if isinstance(vectors, dict) else None

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

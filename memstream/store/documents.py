"""The documents' store (seed 003's ``documents`` and ``document_memories`` tables): one
Document record per ingested document, with its status trail and its chunk links.

Written only by the document agent (key: document id), read by the API and ``memstream doc``.
Two backends, like the audit history: a payload-only Qdrant Edge shard under the data dir, or
a payload-only collection on the Qdrant server. One point per document, its id the document's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import EdgeShard, FieldCondition, Filter, MatchValue, PayloadSchemaType, Point, ScrollRequest
from qdrant_edge import UpdateOperation as EdgeUpdate

from memstream.schemas import Document
from memstream.store.hosts import ClientHost, ShardHost, ensure_payload_collection, open_payload_shard

#: The collection (server) or shard directory (Edge) of the documents.
COLLECTION: Final = "documents"
#: Most documents one listing returns.
LIST_LIMIT: Final = 1000

T = TypeVar("T")


class DocumentStore(Protocol):
    async def open(self) -> None:
        """Create the collection and its ``scope_key`` index if they are missing (idempotent)."""

    async def close(self) -> None: ...

    async def put(self, document: Document) -> None:
        """Store the document, replacing the record of the same id."""

    async def get(self, document_id: str) -> Document | None: ...

    async def list(self, scope_key: str | None = None, *, limit: int = LIST_LIMIT) -> list[Document]:
        """The documents of a scope (None: every scope), newest ``updated_at`` first."""

    async def delete(self, document_id: str) -> bool:
        """Delete the record; False if there was none."""


def to_payload(document: Document) -> dict[str, Any]:
    payload: dict[str, Any] = msgspec.to_builtins(document)
    return payload


def from_payload(payload: dict[str, Any]) -> Document:
    return msgspec.convert(payload, Document)


def _newest_first(documents: list[Document], limit: int) -> list[Document]:
    return sorted(documents, key=lambda d: (d.updated_at, d.id), reverse=True)[:limit]


class EdgeDocumentStore:
    """Documents in an on-disk shard at ``root / collection``, every call on the shard's own thread."""

    def __init__(self, root: Path, *, collection: str = COLLECTION) -> None:
        self.collection = collection
        self.path = Path(root) / collection
        self._host = ShardHost(self.path, self._open_shard, owner="EdgeDocumentStore")

    async def _run(self, fn: Callable[[EdgeShard], T]) -> T:
        return await self._host.run(fn)

    def _open_shard(self) -> EdgeShard:
        return open_payload_shard(self.path, {"scope_key": PayloadSchemaType.Keyword})

    async def open(self) -> None:
        await self._host.open()

    async def close(self) -> None:
        await self._host.close()

    async def put(self, document: Document) -> None:
        point = Point(document.id, {}, to_payload(document))
        await self._run(lambda s: s.update(EdgeUpdate.upsert_points([point])))

    async def get(self, document_id: str) -> Document | None:
        try:
            records = await self._run(lambda s: s.retrieve([document_id], with_payload=True, with_vector=False))
        except Exception:  # an id that is not a uuid names no document
            return None
        return from_payload(records[0].payload or {}) if records else None

    async def list(self, scope_key: str | None = None, *, limit: int = LIST_LIMIT) -> list[Document]:
        flt = Filter(must=[FieldCondition("scope_key", match=MatchValue(scope_key))]) if scope_key else None
        request = ScrollRequest(limit=LIST_LIMIT, filter=flt, with_payload=True)
        records, _ = await self._run(lambda s: s.scroll(request))
        return _newest_first([from_payload(r.payload or {}) for r in records], limit)

    async def delete(self, document_id: str) -> bool:
        if await self.get(document_id) is None:
            return False
        await self._run(lambda s: s.update(EdgeUpdate.delete_points([document_id])))
        return True


class ServerDocumentStore:
    """Documents in the collection ``collection`` of a Qdrant server (or the client's local mode)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        client: AsyncQdrantClient | None = None,
        collection: str = COLLECTION,
    ) -> None:
        self.collection = collection
        self._host = ClientHost(
            owner=f"ServerDocumentStore for {collection}", url=url, api_key=api_key, location=location, client=client
        )

    @property
    def _qdrant(self) -> AsyncQdrantClient:
        return self._host.client

    async def open(self) -> None:
        await self._host.open(
            lambda client: ensure_payload_collection(
                client, self.collection, {"scope_key": models.PayloadSchemaType.KEYWORD}
            )
        )

    async def close(self) -> None:
        await self._host.close()

    async def put(self, document: Document) -> None:
        point = models.PointStruct(id=document.id, vector={}, payload=to_payload(document))
        await self._qdrant.upsert(self.collection, [point])

    async def get(self, document_id: str) -> Document | None:
        try:
            records = await self._qdrant.retrieve(self.collection, [document_id], with_payload=True)
        except Exception:  # an id that is not a uuid names no document
            return None
        return from_payload(records[0].payload or {}) if records else None

    async def list(self, scope_key: str | None = None, *, limit: int = LIST_LIMIT) -> list[Document]:
        flt = (
            models.Filter(must=[models.FieldCondition(key="scope_key", match=models.MatchValue(value=scope_key))])
            if scope_key
            else None
        )
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=flt, limit=LIST_LIMIT, with_payload=True)
        return _newest_first([from_payload(r.payload or {}) for r in records], limit)

    async def delete(self, document_id: str) -> bool:
        if await self.get(document_id) is None:
            return False
        await self._qdrant.delete(self.collection, points_selector=[document_id])
        return True

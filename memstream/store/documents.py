"""The documents' store (Pipeline v2's ``documents`` and ``document_memories`` tables): one
Document record per ingested document, with its status trail and its chunk links.

Written only by the document agent (key: document id), read by the API and ``memstream doc``.
Two backends, like the audit history: a payload-only Qdrant Edge shard under the data dir, or
a payload-only collection on the Qdrant server. One point per document, its id the document's.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import msgspec
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import EdgeShard, Point, ScrollRequest
from qdrant_edge import UpdateOperation as EdgeUpdate

from memstream.schemas import Document
from memstream.store.hosts import (
    EdgeBacked,
    ServerBacked,
    edge_filter,
    ensure_payload_collection,
    open_payload_shard,
    server_filter,
)
from memstream.store.points import IndexKind, Select, payload_of

#: The collection (server) or shard directory (Edge) of the documents.
COLLECTION: Final = "documents"
#: Most documents one listing returns.
LIST_LIMIT: Final = 1000
INDEXES: Final[dict[str, IndexKind]] = {"scope_key": "keyword"}


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


def _in_scope(scope_key: str | None) -> Select:
    return Select(all_of={"scope_key": [scope_key]}) if scope_key else Select()


class EdgeDocumentStore(EdgeBacked):
    """Documents in an on-disk shard at ``root / collection``, every call on the shard's own thread."""

    default_collection = COLLECTION

    def _open_shard(self) -> EdgeShard:
        return open_payload_shard(self.path, INDEXES)

    async def put(self, document: Document) -> None:
        point = Point(document.id, {}, to_payload(document))
        await self._run(lambda s: s.update(EdgeUpdate.upsert_points([point])))

    async def get(self, document_id: str) -> Document | None:
        try:
            records = await self._run(lambda s: s.retrieve([document_id], True, False))
        except Exception:  # an id that is not a uuid names no document
            return None
        return from_payload(payload_of(records[0])) if records else None

    async def list(self, scope_key: str | None = None, *, limit: int = LIST_LIMIT) -> list[Document]:
        request = ScrollRequest(limit=LIST_LIMIT, filter=edge_filter(_in_scope(scope_key)), with_payload=True)
        records, _ = await self._run(lambda s: s.scroll(request))
        return _newest_first([from_payload(payload_of(r)) for r in records], limit)

    async def delete(self, document_id: str) -> bool:
        if await self.get(document_id) is None:
            return False
        await self._run(lambda s: s.update(EdgeUpdate.delete_points([document_id])))
        return True


class ServerDocumentStore(ServerBacked):
    """Documents in the collection ``collection`` of a Qdrant server (or the client's local mode)."""

    default_collection = COLLECTION

    async def _ensure_collection(self, client: AsyncQdrantClient) -> None:
        await ensure_payload_collection(client, self.collection, INDEXES)

    async def put(self, document: Document) -> None:
        point = models.PointStruct(id=document.id, vector={}, payload=to_payload(document))
        await self._qdrant.upsert(self.collection, [point])

    async def get(self, document_id: str) -> Document | None:
        try:
            records = await self._qdrant.retrieve(self.collection, [document_id], with_payload=True)
        except Exception:  # an id that is not a uuid names no document
            return None
        return from_payload(payload_of(records[0])) if records else None

    async def list(self, scope_key: str | None = None, *, limit: int = LIST_LIMIT) -> list[Document]:
        flt = server_filter(_in_scope(scope_key))
        records, _ = await self._qdrant.scroll(self.collection, scroll_filter=flt, limit=LIST_LIMIT, with_payload=True)
        return _newest_first([from_payload(payload_of(r)) for r in records], limit)

    async def delete(self, document_id: str) -> bool:
        if await self.get(document_id) is None:
            return False
        await self._qdrant.delete(self.collection, points_selector=[document_id])
        return True

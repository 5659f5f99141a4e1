"""The DocumentStore contract, run against EdgeDocumentStore and ServerDocumentStore alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from qdrant_client import AsyncQdrantClient

from memstream.identity import derived_id
from memstream.schemas import ChunkLink, Document, StatusChange
from memstream.store.documents import DocumentStore, EdgeDocumentStore, ServerDocumentStore

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def document(name: str, *, scope_key: str = "p_a", minutes: int = 0) -> Document:
    return Document(
        id=derived_id("document", name),
        source_type="url",
        source=f"http://127.0.0.1/{name}",
        title=name.title(),
        scope_key=scope_key,
        status="done",
        attempts=1,
        chunks=[ChunkLink(index=0, memory_id=derived_id("chunk", name), content_hash="h")],
        trail=[StatusChange(status="extracting", ts=T0), StatusChange(status="done", ts=T0)],
        created_at=T0,
        updated_at=T0 + timedelta(minutes=minutes),
    )


@pytest.fixture(params=["edge", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocumentStore]:
    client = AsyncQdrantClient(location=":memory:")
    made: DocumentStore = EdgeDocumentStore(tmp_path) if request.param == "edge" else ServerDocumentStore(client=client)
    await made.open()
    yield made
    await made.close()
    await client.close()


async def test_put_get_round_trips_and_replaces(store: DocumentStore) -> None:
    first = document("guide")
    await store.put(first)
    assert await store.get(first.id) == first
    failed = msgspec.structs.replace(first, status="failed", error="HTTP 500")
    await store.put(failed)
    assert await store.get(first.id) == failed


async def test_list_by_scope_newest_first(store: DocumentStore) -> None:
    for name, scope, minutes in [("a", "p_a", 1), ("b", "p_a", 3), ("c", "p_b", 2)]:
        await store.put(document(name, scope_key=scope, minutes=minutes))
    assert [d.title for d in await store.list("p_a")] == ["B", "A"]
    assert [d.title for d in await store.list()] == ["B", "C", "A"]
    assert [d.title for d in await store.list(None, limit=1)] == ["B"]


async def test_delete_and_unknown_ids(store: DocumentStore) -> None:
    doc = document("gone")
    await store.put(doc)
    assert await store.delete(doc.id) is True
    assert await store.get(doc.id) is None and await store.delete(doc.id) is False
    assert await store.get("not-a-uuid") is None

"""The maintenance worker's store repairs (Pipeline v2), run against both backends: what
index_health reports of injected damage, and what each repair puts right."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from qdrant_edge import UpdateOperation

from memstream.identity import derived_id
from memstream.schemas import Memory
from memstream.store.base import BM25_VECTOR, DENSE_VECTOR, IndexHealth, MemoryStore, QdrantMemories
from memstream.store.edge import EdgeStore

from .conftest import DIM, MODEL

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def memory(n: int) -> Memory:
    return Memory(
        id=derived_id("repair", str(n)),
        text=f"The deploy script number {n} pushes images to the registry",
        type="tech-context",
        scope="project",
        scope_key="p_repair",
        created_at=T0,
        updated_at=T0,
        content_hash=f"h{n}",
        embedding_model=MODEL,
    )


def vector(n: int) -> list[float]:
    return [float((n + i) % 5) + 0.5 for i in range(DIM)]


async def drop_vector(store: MemoryStore, memory_id: str, name: str) -> None:
    """Damage injected as a crash or an old writer would leave it: one vector of a point gone."""
    target: Any = store
    if isinstance(store, EdgeStore):
        await target._run(lambda s: s.update(UpdateOperation.delete_vectors([memory_id], [name])))
    else:
        await target._qdrant.delete_vectors(target.collection, vectors=[name], points=[memory_id])


async def test_a_healthy_store_reports_nothing_missing(store: MemoryStore) -> None:
    for n in range(3):
        await store.upsert(memory(n), vector(n))
    await store.supersede(memory(0).id, memory(1).id)
    assert await store.index_health() == IndexHealth(
        memories=3, superseded=1, missing_sparse=0, missing_dense=0, missing_indexes=()
    )
    assert await store.repair_sparse_vectors() == 0 and await store.lacking_dense() == []


async def test_missing_sparse_vectors_are_found_and_repaired(store: MemoryStore) -> None:
    for n in range(4):
        await store.upsert(memory(n), vector(n))
    await drop_vector(store, memory(1).id, BM25_VECTOR)
    await drop_vector(store, memory(2).id, BM25_VECTOR)
    assert (await store.index_health()).missing_sparse == 2
    # BM25 no longer finds them...
    hits = await store.hybrid_search("deploy script number 1", vector(1), ["p_repair"], alpha=0.0, min_score=0.0)
    assert memory(1).id not in {h.memory.id for h in hits}
    assert await store.repair_sparse_vectors(limit=1) == 1
    assert await store.repair_sparse_vectors() == 1
    assert (await store.index_health()).missing_sparse == 0
    # ...and finds them again once repaired.
    hits = await store.hybrid_search("deploy script number 1", vector(1), ["p_repair"], alpha=0.0, min_score=0.0)
    assert hits[0].memory.id == memory(1).id


async def test_memories_without_their_embedding_are_listed_for_re_embedding(store: MemoryStore) -> None:
    for n in range(2):
        await store.upsert(memory(n), vector(n))
    await drop_vector(store, memory(0).id, DENSE_VECTOR)
    assert (await store.index_health()).missing_dense == 1
    (lacking,) = await store.lacking_dense()
    assert lacking == memory(0)
    await store.upsert(lacking, vector(0))
    assert (await store.index_health()).missing_dense == 0 and await store.vector(memory(0).id) is not None


async def test_a_dropped_payload_index_is_recreated(tmp_path: Any) -> None:
    # Only Edge keeps payload indexes in tests: the server client's local mode has none.
    store = EdgeStore(tmp_path, MODEL, DIM)
    await store.open()
    try:
        await store._run(lambda s: s.update(UpdateOperation.delete_field_index("type")))
        assert (await store.index_health()).missing_indexes == ("type",)
        assert await store.repair_indexes() == ["type"]
        assert (await store.index_health()).missing_indexes == ()
    finally:
        await store.close()


async def test_superseded_is_counted_itself_not_told_from_two_counts(store: MemoryStore, monkeypatch: Any) -> None:
    # A write landing between two counts once made the doctor report -1 superseded memories
    # (all minus active, read at two moments while the pipeline stored a re-driven turn).
    assert isinstance(store, QdrantMemories)
    for n in range(2):
        await store.upsert(memory(n), vector(n))
    counted = store._count
    writes = iter([memory(5)])

    async def count_then_write(select: Any) -> int:
        found = await counted(select)
        for late in writes:
            await store.upsert(late, vector(5))
        return found

    monkeypatch.setattr(store, "_count", count_then_write)
    health = await store.index_health()
    assert health.superseded == 0 and health.memories in (2, 3)

"""Both store backends behind one fixture, so every contract test runs against each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

import pytest
from qdrant_client import AsyncQdrantClient, models
from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeVectorParams,
    PayloadSchemaType,
    Point,
    UpdateOperation,
)

from memstream.schemas import Memory
from memstream.schemas.codec import memory_to_payload
from memstream.store.base import MemoryStore, collection_name
from memstream.store.edge import EdgeStore
from memstream.store.qdrant import QdrantServerStore

MODEL = "test-model/v1"
DIM = 8

StoreFactory = Callable[[str, int], MemoryStore]
LegacyWriter = Callable[[str, int, Sequence[tuple[Memory, Sequence[float]]]], Awaitable[None]]


class _Closable(Protocol):
    async def close(self) -> None: ...


S = TypeVar("S", bound=_Closable)
P = ParamSpec("P")


@asynccontextmanager
async def closing_all(build: Callable[P, S]) -> AsyncIterator[Callable[P, S]]:
    """``build`` as a factory of unopened stores, every one of them closed when the block ends."""
    made: list[S] = []

    def make(*args: P.args, **kwargs: P.kwargs) -> S:
        store = build(*args, **kwargs)
        made.append(store)
        return store

    try:
        yield make
    finally:
        for store in made:
            await store.close()


@pytest.fixture(params=["edge", "qdrant"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def shared_client() -> AsyncIterator[AsyncQdrantClient]:
    """The in-memory Qdrant instance that every Qdrant store of one test shares."""
    client = AsyncQdrantClient(location=":memory:")
    yield client
    await client.close()


@pytest.fixture
async def make_store(backend: str, tmp_path: Path, shared_client: AsyncQdrantClient) -> AsyncIterator[StoreFactory]:
    """Unopened stores that share one root (Edge) or one in-memory instance (Qdrant).

    Sharing is what lets tests reopen a store and put two models side by side; every
    store made here is closed at teardown.
    """

    def build(model: str, dim: int) -> MemoryStore:
        if backend == "edge":
            return EdgeStore(tmp_path, model, dim)
        return QdrantServerStore(model, dim, client=shared_client)

    async with closing_all(build) as make:
        yield make


@pytest.fixture
def write_legacy(backend: str, tmp_path: Path, shared_client: AsyncQdrantClient) -> LegacyWriter:
    """Writes a collection as the stores did before hybrid search, where make_store opens it.

    A dense vector alone, keyword indexes only, and payloads without ``superseded_at`` or ``speaker``.
    """

    async def write(model: str, dim: int, memories: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        points = [(m.id, [float(x) for x in v], _legacy_payload(m)) for m, v in memories]
        name = collection_name(model)
        if backend == "edge":
            vectors = {"dense": EdgeVectorParams(size=dim, distance=Distance.Cosine)}
            shard = EdgeShard.create(str(tmp_path / name), EdgeConfig(vectors=vectors))
            for field in ("scope_key", "type", "status"):
                shard.update(UpdateOperation.create_field_index(field, PayloadSchemaType.Keyword))
            shard.update(UpdateOperation.upsert_points([Point(i, {"dense": v}, p) for i, v, p in points]))
            shard.flush()
            shard.close()
        else:
            params = models.VectorParams(size=dim, distance=models.Distance.COSINE)
            await shared_client.create_collection(name, vectors_config={"dense": params})
            structs = [models.PointStruct(id=i, vector={"dense": v}, payload=p) for i, v, p in points]
            await shared_client.upsert(name, structs)

    return write


def _legacy_payload(memory: Memory) -> dict[str, object]:
    payload = memory_to_payload(memory)
    del payload["superseded_at"]
    del payload["speaker"]
    return payload


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """One open store; the Qdrant one owns its client, as it would in production."""
    opened: MemoryStore
    if backend == "edge":
        opened = EdgeStore(tmp_path, MODEL, DIM)
    else:
        opened = QdrantServerStore(MODEL, DIM, location=":memory:")
    await opened.open()
    yield opened
    await opened.close()

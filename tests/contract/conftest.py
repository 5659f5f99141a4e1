"""Both store backends behind one fixture, so every contract test runs against each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from memstream.store.base import MemoryStore
from memstream.store.edge import EdgeStore
from memstream.store.qdrant import QdrantServerStore

MODEL = "test-model/v1"
DIM = 8

StoreFactory = Callable[[str, int], MemoryStore]


@pytest.fixture(params=["edge", "qdrant"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_store(backend: str, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Unopened stores that share one root (Edge) or one in-memory instance (Qdrant).

    Sharing is what lets tests reopen a store and put two models side by side; every
    store made here is closed at teardown.
    """
    made: list[MemoryStore] = []
    shared = AsyncQdrantClient(location=":memory:")

    def make(model: str, dim: int) -> MemoryStore:
        store: MemoryStore
        if backend == "edge":
            store = EdgeStore(tmp_path, model, dim)
        else:
            store = QdrantServerStore(model, dim, client=shared)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()
    await shared.close()


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

"""EdgeStore builds its vector index in a child process and swaps it in without losing a write."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memstream.schemas import Memory
from memstream.store.edge import EdgeStore, IndexBuildError
from memstream.store.edge_index import build, hnsw_segments
from tests.unit.factories import T0, memory

pytestmark = pytest.mark.asyncio

DIM = 8
#: Enough points for a segment past the child's 1 KB indexing threshold.
SEEDED = 300


def mid(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memory-{i}"))


def vec(i: int) -> list[float]:
    v = np.random.default_rng(i).standard_normal(DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


def mem(i: int, scope: str = "p_a") -> Memory:
    return memory(mid(i), text=f"module m{i} is built with target t{i % 7}", scope_key=scope)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[EdgeStore, EdgeStore]]:
    """The store under test and a reference store that gets the same writes and never builds."""
    built, reference = EdgeStore(tmp_path / "built", "test", DIM), EdgeStore(tmp_path / "ref", "test", DIM)
    await built.open()
    await reference.open()
    for i in range(SEEDED):
        for store in (built, reference):
            await store.upsert(mem(i, "p_a" if i % 2 else "p_b"), vec(i))
    yield built, reference
    await built.close()
    await reference.close()


async def write_a_bit_of_everything(stores: tuple[EdgeStore, EdgeStore], round_: int) -> None:
    """Upsert, refresh (with and without a vector), supersede, delete, purge: on both stores."""
    base = 1000 * (round_ + 1)
    for store in stores:
        for i in range(base, base + 20):
            await store.upsert(mem(i), vec(i))
        at = T0 + timedelta(days=round_ + 1)
        await store.refresh(mid(base), text=f"refreshed in round {round_}", updated_at=at, vector=vec(base + 500))
        await store.refresh(mid(round_ * 3 + 1), text=f"new text {round_}", updated_at=at)
        await store.supersede(mid(base + 1), mid(base + 2), at=T0)
        await store.supersede(mid(round_ * 3 + 2), mid(base + 2), at=T0)
        await store.delete(mid(base + 3))
        await store.delete(mid(round_ * 3 + 5))
        await store.purge_superseded(T0 + timedelta(seconds=1))


async def assert_same(built: EdgeStore, reference: EdgeStore) -> None:
    everything = await reference.list(None, include_superseded=True, limit=100_000)
    assert await built.count() == await reference.count() == len(everything)
    assert await built.list(None, include_superseded=True, limit=100_000) == everything
    for m in everything:
        assert await built.vector(m.id) == await reference.vector(m.id)
    query = vec(4242)
    assert [r.memory.id for r in await built.search(query, ["p_a", "p_b"], limit=10)] == [
        r.memory.id for r in await reference.search(query, ["p_a", "p_b"], limit=10)
    ]


async def test_build_indexes_the_shard_and_keeps_every_memory(stores: tuple[EdgeStore, EdgeStore]) -> None:
    built, reference = stores
    assert hnsw_segments(built.path) == 0

    report = await built.build_index()

    assert report["optimized"] is True
    assert hnsw_segments(built.path) >= 1
    assert not built._indexing.exists() and not built._replaced.exists()
    await assert_same(built, reference)


async def test_writes_made_during_the_build_survive_the_swap_and_a_reopen(
    stores: tuple[EdgeStore, EdgeStore],
) -> None:
    built, reference = stores
    # The build's three steps, with writes between each: after the copy, while the child indexes.
    await built._run(built._begin_build)
    await write_a_bit_of_everything(stores, 0)
    indexing = asyncio.create_task(built._index_copy())
    await write_a_bit_of_everything(stores, 1)
    await indexing
    await write_a_bit_of_everything(stores, 2)
    await built._run(built._swap)

    assert hnsw_segments(built.path) >= 1
    await assert_same(built, reference)
    await built.close()
    await built.open()
    await assert_same(built, reference)


async def test_writes_racing_a_background_build_are_kept(stores: tuple[EdgeStore, EdgeStore]) -> None:
    built, reference = stores
    build = asyncio.create_task(built.build_index())
    round_ = 0
    while not build.done():
        await write_a_bit_of_everything(stores, round_)
        round_ += 1
    await build
    await write_a_bit_of_everything(stores, round_)

    assert hnsw_segments(built.path) >= 1
    await assert_same(built, reference)


async def test_a_build_starts_after_index_every_writes(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "test", DIM, index_every=100)
    await store.open()
    try:
        for i in range(99):
            await store.upsert(mem(i), vec(i))
        assert store._build_task is None
        await store.upsert(mem(99), vec(99))
        assert store._build_task is not None
        await store._build_task
        assert hnsw_segments(store.path) >= 1
        assert await store.count() == 100
    finally:
        await store.close()


async def test_a_failed_build_leaves_the_store_serving(
    stores: tuple[EdgeStore, EdgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    built, reference = stores
    begin = built._begin_build

    def begin_then_break_the_copy(shard: object) -> None:
        begin(shard)  # type: ignore[arg-type]
        (built._indexing / "edge_config.json").write_text("{}")

    monkeypatch.setattr(built, "_begin_build", begin_then_break_the_copy)
    with pytest.raises(IndexBuildError):
        await built.build_index()

    assert built._journal is None and not built._indexing.exists()
    assert hnsw_segments(built.path) == 0
    await write_a_bit_of_everything(stores, 0)
    await assert_same(built, reference)


async def test_a_swap_cut_short_is_undone_at_open(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "test", DIM)
    await store.open()
    for i in range(50):
        await store.upsert(mem(i), vec(i))
    await store.close()
    # A crash between the two renames of a swap, after the copy had been indexed from an older state.
    shutil.copytree(store.path, store._indexing)
    store.path.rename(store._replaced)
    stale = EdgeStore(tmp_path / "stale", "test", DIM)
    await stale.open()
    await stale.upsert(mem(0), vec(0))
    await stale.close()
    stale.path.rename(store.path)

    await store.open()
    try:
        assert await store.count() == 50
        assert not store._replaced.exists() and not store._indexing.exists()
    finally:
        await store.close()


async def test_close_during_a_build_stops_it_and_keeps_the_data(
    stores: tuple[EdgeStore, EdgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    built, reference = stores
    copied = asyncio.Event()
    index_copy = built._index_copy

    async def signalled() -> dict[str, object]:
        copied.set()
        return await index_copy()

    monkeypatch.setattr(built, "_index_copy", signalled)
    build = asyncio.create_task(built.build_index())
    built._build_task = build
    await copied.wait()
    await built.close()

    assert build.done()
    assert not built._indexing.exists() and not built._replaced.exists()
    await built.open()
    await assert_same(built, reference)


async def test_the_child_reports_what_it_built(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "test", DIM)
    await store.open()
    for i in range(SEEDED):
        await store.upsert(mem(i), vec(i))
    await store.close()

    report = await asyncio.to_thread(build, store.path)

    assert report["optimized"] is True and report["points"] == SEEDED
    assert report["hnsw_segments"] == hnsw_segments(store.path) >= 1
    assert json.loads(json.dumps(report)) == report

"""The MemoryStore contract, run against EdgeStore and QdrantServerStore alike."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from memstream.store.base import MemoryStore
from schemas import Memory, ScoredMemory

from .conftest import DIM, MODEL, StoreFactory

T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def memory(
    text: str,
    *,
    type: str = "architecture",
    scope_key: str = "p_alpha",
    minutes: int = 0,
    model: str = MODEL,
) -> Memory:
    """A memory with a uuid5 id, as production derives them, updated ``minutes`` after T0."""
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{scope_key}:{text}")),
        text=text,
        type=type,  # type: ignore[arg-type]
        scope="user" if scope_key.startswith("u_") else "project",
        scope_key=scope_key,
        source_chunk=f"user: tell me about {text}",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=minutes),
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        embedding_model=model,
        session_id="s-1",
        project="alpha",
    )


def unit(angle_deg: float, dim: int = DIM) -> list[float]:
    """A unit vector in the first plane at ``angle_deg`` from e0: cosine distance 1 - cos."""
    rad = math.radians(angle_deg)
    return [math.cos(rad), math.sin(rad)] + [0.0] * (dim - 2)


E0 = unit(0)
#: Vectors whose cosine distance to E0 is exactly round: 0.2, 0.4, 1.0 and 2.0.
AT_02 = [0.8, 0.6] + [0.0] * (DIM - 2)
AT_04 = [0.6, 0.8] + [0.0] * (DIM - 2)
AT_10 = unit(90)
AT_20 = unit(180)


def ids(results: Sequence[ScoredMemory | Memory]) -> list[str]:
    return [r.memory.id if isinstance(r, ScoredMemory) else r.id for r in results]


# -- lifecycle -------------------------------------------------------------------


async def test_open_twice_is_a_no_op(store: MemoryStore) -> None:
    m = memory("uses kafka")
    await store.upsert(m, E0)
    await store.open()
    assert await store.get(m.id) == m
    assert await store.count() == 1


async def test_reopen_keeps_data_and_indexes(make_store: StoreFactory) -> None:
    first = make_store(MODEL, DIM)
    await first.open()
    m = memory("uses kafka")
    await first.upsert(m, AT_02)
    await first.close()

    again = make_store(MODEL, DIM)
    await again.open()
    assert await again.get(m.id) == m
    assert await again.count() == 1
    [hit] = await again.search(E0, ["p_alpha"])
    assert hit.memory == m
    assert hit.distance == pytest.approx(0.2, abs=1e-6)


async def test_reopen_with_another_dim_is_refused(make_store: StoreFactory) -> None:
    first = make_store(MODEL, DIM)
    await first.open()
    await first.close()
    with pytest.raises(ValueError, match=r"8-d vectors .* dim=16"):
        await make_store(MODEL, 16).open()


async def test_store_not_open_raises(make_store: StoreFactory) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await make_store(MODEL, DIM).count()


# -- writes ----------------------------------------------------------------------


async def test_upsert_then_get_round_trips_exactly(store: MemoryStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    m = memory("prefers tabs", type="preference", scope_key="u_dev")
    m = msgspec.structs.replace(m, updated_at=datetime(2025, 5, 1, 9, 0, 0, 1, tzinfo=plus_two))
    await store.upsert(m, E0)
    got = await store.get(m.id)
    assert got == m
    assert got is not None and got.updated_at.utcoffset() == timedelta(hours=2)
    assert got.superseded_by is None and got.active
    assert await store.get(str(uuid.uuid4())) is None


async def test_vector_returns_the_stored_vector(store: MemoryStore) -> None:
    m = memory("uses kafka")
    await store.upsert(m, AT_02)
    got = await store.vector(m.id)
    assert got is not None and len(got) == DIM
    assert got[0] == pytest.approx(0.8, abs=1e-6) and got[1] == pytest.approx(0.6, abs=1e-6)
    assert await store.vector(str(uuid.uuid4())) is None


async def test_upsert_same_id_replaces_the_point(store: MemoryStore) -> None:
    m = memory("uses kafka")
    await store.upsert(m, E0)
    newer = msgspec.structs.replace(m, text="uses redpanda")
    await store.upsert(newer, AT_10)
    assert await store.count() == 1
    assert (await store.get(m.id)) == newer
    [hit] = await store.search(E0, ["p_alpha"])
    assert hit.distance == pytest.approx(1.0, abs=1e-6)


async def test_refresh_changes_text_and_updated_at_only(store: MemoryStore) -> None:
    m = memory("uses kafka")
    await store.upsert(m, AT_04)
    later = T0 + timedelta(days=3)

    refreshed = await store.refresh(m.id, text="uses kafka 3.7", updated_at=later)
    assert refreshed is not None
    assert (refreshed.id, refreshed.created_at, refreshed.text, refreshed.updated_at) == (
        m.id, m.created_at, "uses kafka 3.7", later,
    )
    assert refreshed.source_chunk == m.source_chunk and refreshed.content_hash == m.content_hash
    assert await store.get(m.id) == refreshed
    [hit] = await store.search(E0, ["p_alpha"])  # vector untouched
    assert hit.distance == pytest.approx(0.4, abs=1e-6)

    moved = await store.refresh(m.id, text="t", updated_at=later, source_chunk="new chunk", vector=AT_02)
    assert moved is not None and moved.source_chunk == "new chunk"
    [hit] = await store.search(E0, ["p_alpha"])
    assert hit.memory == moved
    assert hit.distance == pytest.approx(0.2, abs=1e-6)
    assert await store.count() == 1

    assert await store.refresh(str(uuid.uuid4()), text="x", updated_at=later) is None
    assert await store.count() == 1


async def test_delete_returns_what_it_removed(store: MemoryStore) -> None:
    keep, gone = memory("keep me"), memory("forget me")
    await store.upsert(keep, E0)
    await store.upsert(gone, AT_02)
    assert await store.delete(gone.id) == gone
    assert await store.get(gone.id) is None
    assert await store.count() == 1
    assert ids(await store.search(E0, ["p_alpha"])) == [keep.id]
    assert await store.delete(gone.id) is None


# -- supersession ----------------------------------------------------------------


async def test_superseded_memory_leaves_search_and_list_but_stays_stored(store: MemoryStore) -> None:
    old, new = memory("db is postgres 15", minutes=0), memory("db is postgres 16", minutes=5)
    await store.upsert(old, E0)
    await store.upsert(new, AT_02)

    marked = await store.supersede(old.id, new.id)
    assert marked is not None and marked.superseded_by == new.id and not marked.active

    assert ids(await store.search(E0, ["p_alpha"])) == [new.id]
    assert ids(await store.search(E0, ["p_alpha"], include_superseded=True)) == [old.id, new.id]
    assert ids(await store.list(["p_alpha"])) == [new.id]
    assert ids(await store.list(["p_alpha"], include_superseded=True)) == [new.id, old.id]
    assert await store.get(old.id) == marked
    assert await store.count(include_superseded=True) == 2
    assert await store.count() == 2
    assert await store.count(include_superseded=False) == 1
    assert await store.count(["p_alpha"], include_superseded=False) == 1
    assert await store.supersede(str(uuid.uuid4()), new.id) is None


async def test_refresh_keeps_supersession(store: MemoryStore) -> None:
    old = memory("db is postgres 15")
    await store.upsert(old, E0)
    await store.supersede(old.id, "newer-id")
    refreshed = await store.refresh(old.id, text="db is pg 15", updated_at=T0 + timedelta(hours=1))
    assert refreshed is not None and refreshed.superseded_by == "newer-id"
    assert await store.search(E0, ["p_alpha"]) == []


# -- search ----------------------------------------------------------------------


async def _seed_fan(store: MemoryStore) -> list[Memory]:
    """Five memories at cosine distances 0, 0.2, 0.4, 1 and 2 from E0, upserted out of order."""
    fan = [memory(f"fact {i}") for i in range(5)]
    for m, vector in [(fan[3], AT_10), (fan[0], E0), (fan[4], AT_20), (fan[2], AT_04), (fan[1], AT_02)]:
        await store.upsert(m, vector)
    return fan


async def test_search_returns_closest_first_with_cosine_distances(store: MemoryStore) -> None:
    fan = await _seed_fan(store)
    hits = await store.search(E0, ["p_alpha"])
    assert ids(hits) == [m.id for m in fan]
    assert [h.memory for h in hits] == fan
    assert [h.distance for h in hits] == pytest.approx([0.0, 0.2, 0.4, 1.0, 2.0], abs=1e-6)
    assert ids(await store.search(E0, ["p_alpha"], limit=2)) == [fan[0].id, fan[1].id]
    # The query need not be normalized: cosine ignores length.
    assert ids(await store.search([3 * x for x in AT_04], ["p_alpha"], limit=1)) == [fan[2].id]


async def test_search_honours_max_distance_and_exclude_ids(store: MemoryStore) -> None:
    fan = await _seed_fan(store)
    assert ids(await store.search(E0, ["p_alpha"], max_distance=0.3)) == [fan[0].id, fan[1].id]
    assert ids(await store.search(E0, ["p_alpha"], max_distance=1.5)) == [m.id for m in fan[:4]]
    assert ids(await store.search(E0, ["p_alpha"], exclude_ids=[fan[0].id, fan[2].id])) == [
        fan[1].id, fan[3].id, fan[4].id,
    ]
    assert ids(await store.search(E0, ["p_alpha"], max_distance=0.3, exclude_ids=[fan[0].id])) == [fan[1].id]


async def test_search_filters_by_scope_keys_and_types(store: MemoryStore) -> None:
    arch = memory("hexagonal layout")
    other = memory("hexagonal layout", scope_key="p_beta")
    pref = memory("prefers tabs", type="preference", scope_key="u_dev")
    err = memory("fix: pin aiokafka", type="error-solution")
    for m, vector in [(arch, E0), (other, E0), (pref, AT_02), (err, AT_04)]:
        await store.upsert(m, vector)

    assert arch.id != other.id
    assert ids(await store.search(E0, ["p_alpha"])) == [arch.id, err.id]
    assert ids(await store.search(E0, ["p_beta"])) == [other.id]
    assert ids(await store.search(E0, ["p_alpha", "u_dev"])) == [arch.id, pref.id, err.id]
    assert ids(await store.search(E0, ["p_alpha", "u_dev"], types=["preference", "error-solution"])) == [
        pref.id, err.id,
    ]
    assert ids(await store.search(E0, ["p_beta"], types=["preference"])) == []
    assert await store.search(E0, []) == []
    assert await store.count(["p_alpha", "p_beta"]) == 3
    assert await store.count(["u_dev"]) == 1
    assert await store.count([]) == 0


# -- list ------------------------------------------------------------------------


async def test_list_is_newest_updated_first_and_filters_by_type(store: MemoryStore) -> None:
    a = memory("a", minutes=10)
    b = memory("b", minutes=30, type="progress")
    c = memory("c", minutes=20)
    d = memory("d", minutes=40, scope_key="p_beta")
    for m in (a, b, c, d):
        await store.upsert(m, E0)

    assert await store.list(["p_alpha"]) == [b, c, a]
    assert await store.list(["p_alpha"], limit=2) == [b, c]
    assert await store.list(["p_alpha"], types=["architecture"]) == [c, a]
    assert await store.list(["p_alpha", "p_beta"], types=["architecture", "progress"]) == [d, b, c, a]
    assert await store.list([]) == []


async def test_list_reads_past_one_scroll_page(store: MemoryStore) -> None:
    many = [memory(f"fact {i}", minutes=(i * 7919) % 600) for i in range(600)]
    for m in many:
        await store.upsert(m, E0)
    listed = await store.list(["p_alpha"])
    assert len(listed) == 600
    assert listed == sorted(many, key=lambda m: m.updated_at, reverse=True)
    assert await store.list(["p_alpha"], limit=3) == listed[:3]


# -- one collection per model ----------------------------------------------------


async def test_two_models_side_by_side_never_mix(make_store: StoreFactory) -> None:
    small, large = make_store("bge-small-en-v1.5", 384), make_store("voyage-3-large", 1024)
    await small.open()
    await large.open()
    s = memory("uses kafka", model="bge-small-en-v1.5")
    l_ = memory("uses kafka too", model="voyage-3-large")
    await small.upsert(s, unit(0, 384))
    await large.upsert(l_, unit(0, 1024))

    assert (await small.count(), await large.count()) == (1, 1)
    assert await small.get(l_.id) is None and await large.get(s.id) is None
    assert ids(await small.search(unit(0, 384), ["p_alpha"])) == [s.id]
    assert ids(await large.search(unit(0, 1024), ["p_alpha"])) == [l_.id]
    assert await small.list(["p_alpha"]) == [s]
    assert await large.list(["p_alpha"]) == [l_]
    assert await small.delete(l_.id) is None
    assert await large.count() == 1
    with pytest.raises(Exception, match="(?i)dim"):
        await small.upsert(memory("wrong size"), unit(0, 1024))
    assert await small.count() == 1

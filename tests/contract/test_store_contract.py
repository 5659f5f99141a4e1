"""The MemoryStore contract, run against EdgeStore and QdrantServerStore alike."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from httpx import Headers
from qdrant_client import AsyncQdrantClient
from qdrant_client.http.exceptions import UnexpectedResponse

from memstream.schemas import Memory, Provenance, ScoredMemory
from memstream.schemas.memory import HybridHit
from memstream.store.base import MemoryStore

from .conftest import DIM, MODEL, LegacyWriter, StoreFactory

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
#: AT_04 mirrored: just as far from E0, in another direction.
AT_04_MIRRORED = [0.6, -0.8] + [0.0] * (DIM - 2)


def ids(results: Sequence[ScoredMemory | HybridHit | Memory]) -> list[str]:
    return [r.id if isinstance(r, Memory) else r.memory.id for r in results]


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
        m.id,
        m.created_at,
        "uses kafka 3.7",
        later,
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


async def test_supersede_records_when(store: MemoryStore) -> None:
    dated, undated = memory("db is postgres 15"), memory("db is postgres 14")
    await store.upsert(dated, E0)
    await store.upsert(undated, E0)
    at = T0 + timedelta(days=2)
    marked = await store.supersede(dated.id, "newer-id", at=at)
    assert marked is not None and marked.superseded_at == at
    assert await store.get(dated.id) == marked

    before = datetime.now(UTC)
    marked = await store.supersede(undated.id, "newer-id")
    assert marked is not None and marked.superseded_at is not None
    assert before <= marked.superseded_at <= datetime.now(UTC)
    assert await store.get(undated.id) == marked


async def test_refresh_keeps_supersession(store: MemoryStore) -> None:
    old = memory("db is postgres 15")
    await store.upsert(old, E0)
    await store.supersede(old.id, "newer-id")
    refreshed = await store.refresh(old.id, text="db is pg 15", updated_at=T0 + timedelta(hours=1))
    assert refreshed is not None and refreshed.superseded_by == "newer-id"
    assert await store.search(E0, ["p_alpha"]) == []


# -- retention -------------------------------------------------------------------


async def test_purge_superseded_respects_before_and_limit(store: MemoryStore) -> None:
    active = memory("still true")  # updated at T0, older than every cutoff below
    tombstones = [memory(f"was true {i}") for i in range(4)]
    for m in (active, *tombstones):
        await store.upsert(m, E0)
    marked = [await store.supersede(m.id, active.id, at=T0 + timedelta(days=i + 1)) for i, m in enumerate(tombstones)]

    # Superseded exactly at the cutoff is not older than it.
    assert await store.purge_superseded(T0 + timedelta(days=1)) == []
    purged = await store.purge_superseded(T0 + timedelta(days=3))
    assert sorted(ids(purged)) == sorted(ids(tombstones[:2]))
    assert {m.id: m for m in purged} == {m.id: m for m in marked[:2] if m is not None}
    assert await store.get(tombstones[0].id) is None
    assert await store.count() == 3

    first = await store.purge_superseded(T0 + timedelta(days=30), limit=1)
    second = await store.purge_superseded(T0 + timedelta(days=30), limit=1)
    assert len(first) == len(second) == 1
    assert sorted(ids(first + second)) == sorted(ids(tombstones[2:]))
    assert await store.purge_superseded(T0 + timedelta(days=30)) == []
    assert await store.list(["p_alpha"], include_superseded=True) == [active]


async def test_purge_counts_undated_tombstones_from_updated_at(store: MemoryStore) -> None:
    old = msgspec.structs.replace(memory("old tombstone"), superseded_by="newer-id")
    recent = msgspec.structs.replace(memory("recent tombstone", minutes=60), superseded_by="newer-id")
    active = memory("active and old")
    for m in (old, recent, active):
        assert m.superseded_at is None
        await store.upsert(m, E0)
    assert await store.purge_superseded(T0 + timedelta(minutes=30)) == [old]
    assert sorted(ids(await store.list(["p_alpha"], include_superseded=True))) == sorted([recent.id, active.id])


async def test_tombstones_are_what_purge_would_take_oldest_first(store: MemoryStore) -> None:
    active = memory("still true")
    # Superseded on days 3, 1, 2, written in another order than their age.
    dated = [memory(f"was true {i}") for i in range(3)]
    undated = msgspec.structs.replace(memory("old tombstone", minutes=60 * 36), superseded_by=active.id)
    for m in (active, *dated, undated):
        await store.upsert(m, E0)
    for m, day in zip(dated, (3, 1, 2), strict=True):
        await store.supersede(m.id, active.id, at=T0 + timedelta(days=day))
    # The undated one counts from its updated_at, a day and a half after T0.
    oldest_first = [dated[1].id, undated.id, dated[2].id, dated[0].id]

    assert await store.tombstones(T0 + timedelta(days=1)) == []  # at the cutoff is not before it
    assert ids(await store.tombstones(T0 + timedelta(days=30))) == oldest_first
    assert ids(await store.tombstones(T0 + timedelta(days=30), limit=2)) == oldest_first[:2]
    assert ids(await store.tombstones(T0 + timedelta(days=2, minutes=1))) == oldest_first[:3]
    assert await store.count() == 5  # reading deletes nothing

    due = await store.tombstones(T0 + timedelta(days=30))
    assert due == [await store.get(i) for i in oldest_first]
    purged = await store.purge_superseded(T0 + timedelta(days=30))
    assert sorted(ids(purged)) == sorted(ids(due))
    assert await store.tombstones(T0 + timedelta(days=30)) == []
    assert await store.list(["p_alpha"], include_superseded=True) == [active]


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
        fan[1].id,
        fan[3].id,
        fan[4].id,
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
        pref.id,
        err.id,
    ]
    assert ids(await store.search(E0, ["p_beta"], types=["preference"])) == []
    assert await store.search(E0, []) == []
    assert await store.count(["p_alpha", "p_beta"]) == 3
    assert await store.count(["u_dev"]) == 1
    assert await store.count([]) == 0


# -- hybrid search ---------------------------------------------------------------


async def test_hybrid_ranks_an_exact_lexical_match_above_an_unrelated_one(store: MemoryStore) -> None:
    lexical, unrelated = memory("pin aiokafka below 0.13 for faust"), memory("prefers tabs over spaces")
    await store.upsert(lexical, AT_04)
    await store.upsert(unrelated, AT_04_MIRRORED)

    first, second = await store.hybrid_search(lexical.text, E0, ["p_alpha"])
    assert (first.memory, second.memory) == (lexical, unrelated)
    assert first.vector_score == second.vector_score == pytest.approx(0.6, abs=1e-6)
    assert first.bm25_score is not None and 0.0 < first.bm25_score < 1.0
    assert first.vector_score is not None
    assert first.score == pytest.approx(0.7 * first.vector_score + 0.3 * first.bm25_score)
    # Only the vector leg found the unrelated one: its score is that leg's alone.
    assert second.bm25_score is None and second.score == second.vector_score


async def test_normalized_hybrid_scales_each_leg_and_keeps_raw_scores(store: MemoryStore) -> None:
    lexical, unrelated = memory("pin aiokafka below 0.13 for faust"), memory("prefers tabs over spaces")
    await store.upsert(lexical, AT_04)
    await store.upsert(unrelated, AT_02)

    first, second = await store.hybrid_search(lexical.text, E0, ["p_alpha"], alpha=0.5, fusion="normalized")
    # Vector leg: unrelated 0.8 -> 1, lexical 0.6 -> 0; BM25 leg: only lexical -> 1. A tie, broken by id.
    assert first.score == second.score == pytest.approx(0.5)
    assert ids([first, second]) == sorted([lexical.id, unrelated.id])
    by_id = {h.memory.id: h for h in (first, second)}
    assert by_id[lexical.id].vector_score == pytest.approx(0.6, abs=1e-6)
    assert by_id[lexical.id].bm25_score is not None and by_id[unrelated.id].bm25_score is None
    [best] = await store.hybrid_search(lexical.text, E0, ["p_alpha"], alpha=0.4, limit=1, fusion="normalized")
    assert best.memory == lexical


async def test_hybrid_with_alpha_one_is_vector_order(store: MemoryStore) -> None:
    fan = await _seed_fan(store)
    nearest = await store.search(E0, ["p_alpha"])
    hits = await store.hybrid_search("fact 4", E0, ["p_alpha"], alpha=1.0, min_score=0.0)
    assert ids(hits) == ids(nearest) == [m.id for m in fan]
    assert [h.vector_score for h in hits] == pytest.approx([max(0.0, 1.0 - n.distance) for n in nearest])
    assert [h.score for h in hits] == [h.vector_score for h in hits]
    assert all(h.bm25_score is None for h in hits)
    assert ids(await store.hybrid_search("fact 4", E0, ["p_alpha"], alpha=1.0, limit=2)) == ids(fan[:2])


async def test_hybrid_with_alpha_zero_is_bm25_order(store: MemoryStore) -> None:
    fan = await _seed_fan(store)
    hits = await store.hybrid_search("fact 4", E0, ["p_alpha"], alpha=0.0, min_score=0.0)
    assert ids(hits)[0] == fan[4].id and sorted(ids(hits)) == sorted(ids(fan))
    assert all(h.vector_score is None and h.score == h.bm25_score for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # A text of stopwords alone has no terms: nothing for BM25 to find.
    assert await store.hybrid_search("the of and", E0, ["p_alpha"], alpha=0.0, min_score=0.0) == []
    with pytest.raises(ValueError, match="alpha"):
        await store.hybrid_search("fact 4", E0, ["p_alpha"], alpha=1.5)


async def test_hybrid_min_score_drops_weak_hits(store: MemoryStore) -> None:
    fan = await _seed_fan(store)
    assert ids(await store.hybrid_search("fact", E0, ["p_alpha"], alpha=1.0, min_score=0.5)) == ids(fan[:3])
    # "fact" is in every memory, so it weighs little; "4" singles one out.
    assert ids(await store.hybrid_search("fact 4", E0, ["p_alpha"], alpha=0.0)) == [fan[4].id]
    hits = await store.hybrid_search("fact 4", E0, ["p_alpha"], min_score=0.0, limit=10)
    assert all(h.score >= 0.0 for h in hits) and len(hits) == 5
    strong = await store.hybrid_search("fact 4", E0, ["p_alpha"], min_score=0.9, limit=10)
    assert [h.score for h in strong] == [h.score for h in hits if h.score >= 0.9]


async def test_hybrid_returns_active_memories_in_scope_only(store: MemoryStore) -> None:
    arch = memory("hexagonal layout")
    other = memory("hexagonal layout", scope_key="p_beta")
    old = memory("hexagonal layout, version one")
    pref = memory("prefers hexagonal tabs", type="preference", scope_key="u_dev")
    err = memory("fix: pin aiokafka", type="error-solution")
    for m, vector in [(arch, E0), (other, E0), (old, E0), (pref, AT_02), (err, AT_04)]:
        await store.upsert(m, vector)
    await store.supersede(old.id, arch.id)

    text = "hexagonal layout"
    assert ids(await store.hybrid_search(text, E0, ["p_alpha"])) == [arch.id, err.id]
    assert ids(await store.hybrid_search(text, E0, ["p_beta"])) == [other.id]
    assert ids(await store.hybrid_search(text, E0, ["p_alpha", "u_dev"], types=["preference"])) == [pref.id]
    assert ids(await store.hybrid_search(text, E0, ["p_alpha"], exclude_ids=[arch.id])) == [err.id]
    assert await store.hybrid_search(text, E0, []) == []


async def test_hybrid_terms_follow_the_text(store: MemoryStore) -> None:
    async def lexical(text: str) -> list[str]:
        return ids(await store.hybrid_search(text, E0, ["p_alpha"], alpha=0.0, min_score=0.0))

    m = memory("uses kafka")
    await store.upsert(m, E0)
    assert (await lexical("kafka"), await lexical("redpanda")) == ([m.id], [])
    await store.refresh(m.id, text="uses redpanda", updated_at=T0 + timedelta(days=1))
    assert (await lexical("kafka"), await lexical("redpanda")) == ([], [m.id])
    await store.refresh(m.id, text="uses redpanda", updated_at=T0 + timedelta(days=2))
    assert await lexical("redpanda") == [m.id]
    await store.refresh(m.id, text="uses pulsar", updated_at=T0 + timedelta(days=3), vector=AT_02)
    assert (await lexical("redpanda"), await lexical("pulsar")) == ([], [m.id])
    await store.upsert(msgspec.structs.replace(m, text="uses kafka again"), AT_02)
    assert (await lexical("pulsar"), await lexical("kafka")) == ([], [m.id])
    assert await store.vector(m.id) == pytest.approx(AT_02)


# -- collections from before hybrid search ---------------------------------------


async def test_collection_from_before_hybrid_search_opens_and_searches(
    make_store: StoreFactory, write_legacy: LegacyWriter
) -> None:
    lexical, unrelated = memory("pin aiokafka below 0.13 for faust"), memory("prefers tabs over spaces")
    tombstone = msgspec.structs.replace(memory("db is postgres 15"), superseded_by=lexical.id)
    await write_legacy(MODEL, DIM, [(lexical, AT_04), (unrelated, AT_04_MIRRORED), (tombstone, E0)])

    store = make_store(MODEL, DIM)
    await store.open()
    assert await store.get(tombstone.id) == tombstone
    hits = await store.hybrid_search(lexical.text, E0, ["p_alpha"])
    assert ids(hits) == [lexical.id, unrelated.id]
    assert hits[0].bm25_score is not None  # the old memories got their terms at open

    fresh = memory("uses kafka 3.7")
    await store.upsert(fresh, AT_10)
    assert ids(await store.hybrid_search("kafka", E0, ["p_alpha"], alpha=0.0, min_score=0.0)) == [fresh.id]
    assert await store.purge_superseded(T0 + timedelta(minutes=1)) == [tombstone]
    await store.close()

    again = make_store(MODEL, DIM)
    await again.open()
    assert ids(await again.hybrid_search(lexical.text, E0, ["p_alpha"])) == [lexical.id, unrelated.id]


@pytest.mark.parametrize("backend", ["qdrant"])
async def test_server_that_cannot_add_bm25_searches_by_vector_alone(
    make_store: StoreFactory,
    write_legacy: LegacyWriter,
    shared_client: AsyncQdrantClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lexical, unrelated = memory("pin aiokafka below 0.13 for faust"), memory("prefers tabs over spaces")
    await write_legacy(MODEL, DIM, [(lexical, AT_04), (unrelated, AT_10)])

    async def unsupported(*args: object, **kwargs: object) -> None:
        raise UnexpectedResponse(404, "Not Found", b"", Headers())

    monkeypatch.setattr(shared_client, "create_vector_name", unsupported)
    store = make_store(MODEL, DIM)
    await store.open()
    assert "bm25" in caplog.text

    fresh = memory("uses kafka 3.7")
    await store.upsert(fresh, AT_02)
    hits = await store.hybrid_search(lexical.text, E0, ["p_alpha"])
    assert ids(hits) == [fresh.id, lexical.id]
    assert all(h.bm25_score is None and h.score == h.vector_score for h in hits)
    refreshed = await store.refresh(fresh.id, text="uses kafka 3.8", updated_at=T0 + timedelta(days=1))
    assert refreshed is not None and await store.get(fresh.id) == refreshed


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


async def test_list_before_starts_at_a_time_for_the_next_page(store: MemoryStore) -> None:
    # The console pages through every memory (issue 38, point 1): each page starts where the last ended.
    a, b, c = memory("a", minutes=10), memory("b", minutes=20), memory("c", minutes=30)
    for m in (a, b, c):
        await store.upsert(m, E0)
    assert await store.list(["p_alpha"], before=b.updated_at) == [b, a]
    assert await store.list(["p_alpha"], before=b.updated_at - timedelta(seconds=1)) == [a]
    assert await store.list(["p_alpha"], before=T0) == []


async def test_list_filters_by_session(store: MemoryStore) -> None:
    # A timeline follows one session's thread (issue 25): the filter runs in the store, on both backends.
    a, b = memory("a", minutes=10), memory("b", minutes=20)
    other = msgspec.structs.replace(memory("c", minutes=30), session_id="s-2")
    for m in (a, b, other):
        await store.upsert(m, E0)
    assert await store.list(["p_alpha"], sessions=["s-1"]) == [b, a]
    assert await store.list(["p_alpha"], sessions=["s-2"]) == [other]
    assert await store.list(["p_alpha"], sessions=["s-1", "s-2"]) == [other, b, a]
    assert await store.list(["p_alpha"], sessions=["nope"]) == []


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
    with pytest.raises(Exception, match=r"(?i)dim"):
        await small.upsert(memory("wrong size"), unit(0, 1024))
    assert await small.count() == 1


async def test_scopes_counts_every_scope_without_reading_memories(store: MemoryStore) -> None:
    for text, key in [("a one", "p_alpha"), ("a two", "p_alpha"), ("b one", "p_beta"), ("likes tea", "u_dev")]:
        await store.upsert(memory(text, scope_key=key), E0)
    assert await store.scopes() == {"p_alpha": 2, "p_beta": 1, "u_dev": 1}


async def test_set_importance_pins_and_unpins_keeping_the_rest(store: MemoryStore) -> None:
    m = memory("uses kafka")
    await store.upsert(m, E0)
    pinned = await store.set_importance(m.id, 1.0)
    assert pinned == msgspec.structs.replace(m, importance=1.0) == await store.get(m.id)
    assert await store.set_importance(m.id, None) == m
    assert [h.memory.id for h in await store.hybrid_search("kafka", E0, ["p_alpha"], min_score=0.0)] == [m.id]
    assert await store.set_importance(str(uuid.uuid4()), 1.0) is None


async def test_list_keeps_the_sessions_asked_for_newest_first(store: MemoryStore) -> None:
    first = msgspec.structs.replace(memory("one", minutes=1), session_id="s1")
    second = msgspec.structs.replace(memory("two", minutes=2), session_id="s1")
    other = msgspec.structs.replace(memory("three", minutes=3), session_id="s2")
    for m in (first, second, other):
        await store.upsert(m, E0)
    assert ids(await store.list(["p_alpha"], sessions=["s1"])) == [second.id, first.id]
    assert ids(await store.list(["p_alpha"], sessions=["s1", "s2"], limit=2)) == [other.id, second.id]
    assert await store.list(["p_alpha"], sessions=["nope"]) == []


# -- whose conversations a reader sees (issue 41) ------------------------------------


async def test_a_reader_sees_their_own_conversations_and_what_is_shared_on_every_read(
    make_store: StoreFactory, write_legacy: LegacyWriter
) -> None:
    """A member reads their own exchanges, shared memories (speaker "") and memories stored before the
    field (no speaker at all: the documented migration); never another member's exchange. None: all."""
    old = memory("an exchange from before speakers", type="conversation")
    await write_legacy(MODEL, DIM, [(old, AT_04)])
    store = make_store(MODEL, DIM)
    await store.open()
    alice = msgspec.structs.replace(memory("alice said the deploy key rotates", type="conversation"), speaker="u_alice")
    bob = msgspec.structs.replace(memory("bob said the deploy key is in vault", type="conversation"), speaker="u_bob")
    fact = memory("the deploy key rotates monthly")
    for m, v in ((alice, E0), (bob, AT_02), (fact, AT_10)):
        await store.upsert(m, v)
    seen = {alice.id, fact.id, old.id}
    assert set(ids(await store.list(["p_alpha"], speaker="u_alice"))) == seen
    assert set(ids(await store.search(E0, ["p_alpha"], limit=10, speaker="u_alice"))) == seen
    hybrid = await store.hybrid_search("deploy key", E0, ["p_alpha"], limit=10, min_score=0.0, speaker="u_alice")
    assert bob.id not in ids(hybrid) and alice.id in ids(hybrid)
    assert await store.count(["p_alpha"], speaker="u_alice") == 3
    assert set(ids(await store.list(["p_alpha"]))) == seen | {bob.id}
    assert (await store.get(old.id)) == old  # an old payload decodes, speaker ""


async def test_the_memories_a_speakers_turns_are_a_source_of_are_found_in_every_scope(make_store: StoreFactory) -> None:
    """A user's forget finds the facts drawn from their turns (a source of theirs), whoever else's turns
    support them, in any scope; not the facts only others' turns support, nor those with no known speaker."""
    store = make_store(MODEL, DIM)
    await store.open()

    def sourced(text: str, *speakers: str, scope_key: str = "p_alpha") -> Memory:
        sources = [Provenance(source_type="claude", session_id=f"s-{s}", speaker=s) for s in speakers]
        return msgspec.structs.replace(memory(text, scope_key=scope_key), sources=sources)

    only_alice = sourced("the api runs on port 8080", "u_alice")
    both = sourced("the deploy key rotates monthly", "u_bob", "u_alice", scope_key="p_beta")
    only_bob = sourced("the cache is redis", "u_bob")
    unknown = sourced("the queue is kafka")
    for m, v in ((only_alice, E0), (both, AT_02), (only_bob, AT_04), (unknown, AT_10)):
        await store.upsert(m, v)
    assert set(ids(await store.list(None, sourced_by="u_alice"))) == {only_alice.id, both.id}
    assert set(ids(await store.list(None, sourced_by="u_bob"))) == {both.id, only_bob.id}
    assert await store.list(None, sourced_by="u_carol") == []
    assert (await store.get(both.id)) == both  # the speakers round-trip

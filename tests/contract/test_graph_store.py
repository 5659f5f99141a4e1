"""The GraphStore contract, run against EdgeGraphStore and ServerGraphStore alike."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from memstream.identity import derived_id
from memstream.rules.graph import MAX_BOOST_MEMORIES, MAX_ENTITY_HITS, MAX_NEIGHBOURS, canonical_name
from memstream.schemas.events import Entity
from memstream.store.graph import EdgeGraphStore, GraphPurged, GraphStore, ServerGraphStore
from tests.contract.conftest import closing_all

SCOPE = "p_alpha"

GraphFactory = Callable[[], GraphStore]


def mem(name: str) -> str:
    """A memory id, as production derives them (a uuid)."""
    return derived_id("memory", name)


def triple(source: str, relationship: str, target: str, confidence: float = 1.0) -> Entity:
    return Entity(source=source, relationship=relationship, target=target, confidence=confidence)


@pytest.fixture
async def make_graph(backend: str, tmp_path: Path, shared_client: AsyncQdrantClient) -> AsyncIterator[GraphFactory]:
    """Unopened stores over one shard directory (Edge) or one in-memory instance (Qdrant)."""

    def build() -> GraphStore:
        return EdgeGraphStore(tmp_path) if backend == "edge" else ServerGraphStore(client=shared_client)

    async with closing_all(build) as make:
        yield make


@pytest.fixture
async def graph(make_graph: GraphFactory) -> GraphStore:
    store = make_graph()
    await store.open()
    return store


async def mentions_of(graph: GraphStore, name: str, scope_key: str = SCOPE) -> int | None:
    by_name = {e.canonical_name: e.mentions for e in await graph.entities(scope_key)}
    return by_name.get(canonical_name(name))


# -- apply -----------------------------------------------------------------------


async def test_apply_counts_memories_per_canonical_entity(graph: GraphStore) -> None:
    written = await graph.apply(mem("a"), SCOPE, [triple("Redis ", "caches", "Sessions", 0.9)])
    assert len(written.entities) == 2 and len(written.relations) == 1 and len(written.mentions) == 2
    await graph.apply(mem("b"), SCOPE, [triple("redis", "stores", "queues")])
    entities = await graph.entities(SCOPE)
    assert (entities[0].canonical_name, entities[0].mentions) == ("redis", 2)
    names = {e.canonical_name: e.name for e in entities}
    assert names == {"redis": "Redis", "sessions": "Sessions", "queues": "queues"}


async def test_relation_confidence_averages_over_three_memories(graph: GraphStore) -> None:
    for name, confidence in (("a", 0.9), ("b", 0.6), ("c", 0.3)):
        await graph.apply(mem(name), SCOPE, [triple("api", "depends on", "postgres", confidence)])
    [rel] = await graph.relations(SCOPE)
    assert rel.mentions == 3
    assert rel.confidence == pytest.approx(0.6)
    assert rel.relation_type == "depends on"


async def test_reapplying_a_memory_writes_nothing(graph: GraphStore) -> None:
    triples = [triple("api", "uses", "redis", 0.9)]
    await graph.apply(mem("a"), SCOPE, triples)
    assert not await graph.apply(mem("a"), SCOPE, triples)
    assert await mentions_of(graph, "redis") == 1
    [rel] = await graph.relations(SCOPE)
    assert rel.mentions == 1


async def test_apply_without_usable_triples_writes_nothing(graph: GraphStore) -> None:
    assert not await graph.apply(mem("a"), SCOPE, [])
    assert not await graph.apply(mem("a"), SCOPE, [triple(" ", "uses", "redis")])
    assert await graph.entities(SCOPE) == []


async def test_reopen_keeps_the_graph(make_graph: GraphFactory) -> None:
    first = make_graph()
    await first.open()
    await first.apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])
    await first.close()
    again = make_graph()
    await again.open()
    await again.open()
    assert await mentions_of(again, "redis") == 1
    assert await again.boost_ids("redis", [SCOPE]) == ({mem("a")}, False)


async def test_store_not_open_raises(make_graph: GraphFactory) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await make_graph().apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])


# -- boost -----------------------------------------------------------------------


async def test_boost_matches_substrings_of_canonical_names(graph: GraphStore) -> None:
    await graph.apply(mem("cluster"), SCOPE, [triple("Redis Cluster", "runs on", "k8s")])
    await graph.apply(mem("pg"), SCOPE, [triple("postgres", "stores", "orders")])
    # Pipeline v2's LIKE %token%: "edi" is inside "redis cluster", whole words are not needed.
    assert await graph.boost_ids("EDI?", [SCOPE]) == ({mem("cluster")}, False)
    assert await graph.boost_ids("what about REDIS", [SCOPE]) == ({mem("cluster")}, False)
    assert await graph.boost_ids("mongo", [SCOPE]) == (set(), False)
    assert await graph.boost_ids("? !", [SCOPE]) == (set(), False)


async def test_boost_stays_in_the_given_scopes(graph: GraphStore) -> None:
    await graph.apply(mem("alpha"), SCOPE, [triple("redis", "caches", "sessions")])
    await graph.apply(mem("beta"), "p_beta", [triple("redis", "caches", "tokens")])
    assert await graph.boost_ids("redis", [SCOPE]) == ({mem("alpha")}, False)
    assert await graph.boost_ids("redis", [SCOPE, "p_beta"]) == ({mem("alpha"), mem("beta")}, False)
    assert await graph.boost_ids("redis", []) == (set(), False)


async def test_boost_expands_one_hop_in_both_directions(graph: GraphStore) -> None:
    await graph.apply(mem("hit"), SCOPE, [triple("api", "uses", "redis")])
    await graph.apply(mem("downstream"), SCOPE, [triple("redis", "replicates to", "replica")])
    await graph.apply(mem("upstream"), SCOPE, [triple("gateway", "calls", "api")])
    await graph.apply(mem("two hops"), SCOPE, [triple("replica", "backs up to", "s3")])
    await graph.apply(mem("unrelated"), SCOPE, [triple("docs", "live in", "wiki")])
    ids, timed_out = await graph.boost_ids("api", [SCOPE])
    # api's neighbours are redis and gateway; the memories mentioning any of the three.
    assert ids == {mem("hit"), mem("downstream"), mem("upstream")}
    assert not timed_out


async def test_boost_keeps_the_most_mentioned_entity_hits(graph: GraphStore) -> None:
    # Each svc memory names its own thing, so only the kept hits lead to their memories.
    for i in range(MAX_ENTITY_HITS + 3):
        await graph.apply(mem(f"svc{i}"), SCOPE, [triple(f"svc{i:02d}", "is", f"thing{i}")])
    for i in range(3):
        await graph.apply(mem(f"popular{i}"), SCOPE, [triple("svc07", "logs to", f"sink{i}")])
    ids, timed_out = await graph.boost_ids("svc", [SCOPE])
    assert not timed_out
    assert len(ids) == MAX_ENTITY_HITS + 3
    assert {mem("svc7")} | {mem(f"popular{i}") for i in range(3)} <= ids


async def test_boost_caps_neighbours(graph: GraphStore) -> None:
    leaves = MAX_NEIGHBOURS + 10
    await graph.apply(mem("hub"), SCOPE, [triple("hub", "links", f"leaf{i}") for i in range(leaves)])
    for i in range(leaves):
        await graph.apply(mem(f"leaf{i}"), SCOPE, [triple(f"leaf{i}", "is", f"thing{i}")])
    ids, timed_out = await graph.boost_ids("hub", [SCOPE])
    assert not timed_out
    assert mem("hub") in ids
    assert len(ids) == 1 + MAX_NEIGHBOURS


async def test_boost_caps_memory_ids(graph: GraphStore) -> None:
    for i in range(MAX_BOOST_MEMORIES + 5):
        await graph.apply(mem(f"m{i}"), SCOPE, [triple("kafka", "has", f"topic{i}")])
    ids, timed_out = await graph.boost_ids("kafka", [SCOPE])
    assert len(ids) == MAX_BOOST_MEMORIES and not timed_out


async def test_boost_past_its_deadline_returns_what_it_has(graph: GraphStore) -> None:
    await graph.apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])
    assert await graph.boost_ids("redis", [SCOPE], deadline_s=0) == (set(), True)


async def test_boost_failure_gives_no_ids_and_is_logged(
    make_graph: GraphFactory, caplog: pytest.LogCaptureFixture
) -> None:
    closed = make_graph()
    with caplog.at_level(logging.WARNING, logger="memstream.store.graph"):
        assert await closed.boost_ids("redis", [SCOPE]) == (set(), False)
    assert "graph boost failed" in caplog.text


# -- purge -----------------------------------------------------------------------


async def test_purge_unlinks_memories_and_deletes_orphans_with_their_relations(graph: GraphStore) -> None:
    await graph.apply(mem("a"), SCOPE, [triple("api", "uses", "redis"), triple("api", "logs to", "loki")])
    await graph.apply(mem("b"), SCOPE, [triple("worker", "uses", "redis")])
    assert await graph.purge_memory([mem("a")]) == GraphPurged(mentions=3, entities=2, relations=2)
    assert {e.canonical_name: e.mentions for e in await graph.entities(SCOPE)} == {"redis": 1, "worker": 1}
    assert [(r.relation_type, r.mentions) for r in await graph.relations(SCOPE)] == [("uses", 1)]
    assert await graph.boost_ids("api loki", [SCOPE]) == (set(), False)
    assert await graph.boost_ids("redis", [SCOPE]) == ({mem("b")}, False)


async def test_purge_is_idempotent_and_then_reapply_counts_again(graph: GraphStore) -> None:
    await graph.apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])
    await graph.purge_memory([mem("a")])
    assert await graph.purge_memory([mem("a")]) == GraphPurged(0, 0, 0)
    assert await graph.purge_memory([]) == GraphPurged(0, 0, 0)
    assert await graph.entities(SCOPE) == [] and await graph.relations(SCOPE) == []
    await graph.apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])
    assert await mentions_of(graph, "redis") == 1


async def test_purge_spans_scopes(graph: GraphStore) -> None:
    await graph.apply(mem("a"), SCOPE, [triple("api", "uses", "redis")])
    await graph.apply(mem("b"), "p_beta", [triple("api", "uses", "redis")])
    assert await graph.purge_memory([mem("a"), mem("b")]) == GraphPurged(4, 4, 2)
    assert await graph.entities("p_beta") == []

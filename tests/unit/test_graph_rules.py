"""Pipeline v2's knowledge graph, as pure decisions: memstream.rules.graph."""

from __future__ import annotations

import msgspec
import pytest

from memstream.rules.graph import (
    GraphWrite,
    canonical_name,
    entity_id,
    mention_id,
    neighbours,
    plan_keys,
    plan_purge,
    plan_upsert,
    query_tokens,
    relation_id,
    running_average,
)
from memstream.schemas.events import Entity
from memstream.schemas.graph import GraphEntity, GraphMention, GraphRelation, GraphRow

SCOPE = "p_alpha"
M1, M2, M3 = "memory-1", "memory-2", "memory-3"


def triple(source: str, relationship: str, target: str, confidence: float = 1.0) -> Entity:
    return Entity(source=source, relationship=relationship, target=target, confidence=confidence)


def apply(graph: dict[str, GraphRow], memory_id: str, triples: list[Entity], scope_key: str = SCOPE) -> GraphWrite:
    """What the store does: read the rows the plan names, plan, write the rows back."""
    keys = plan_keys(scope_key, triples)
    plan = plan_upsert(
        scope_key,
        memory_id,
        triples,
        entities=[r for i, r in graph.items() if i in keys.entity_ids and isinstance(r, GraphEntity)],
        relations=[r for i, r in graph.items() if i in keys.relation_ids and isinstance(r, GraphRelation)],
        mentions=[r for r in graph.values() if isinstance(r, GraphMention) and r.memory_id == memory_id],
    )
    graph.update({e.entity_id: e for e in plan.entities})
    graph.update({r.relation_id: r for r in plan.relations})
    graph.update({m.mention_id: m for m in plan.mentions})
    return plan


def entity(graph: dict[str, GraphRow], name: str) -> GraphEntity:
    row = graph[entity_id(SCOPE, canonical_name(name))]
    assert isinstance(row, GraphEntity)
    return row


def relation(graph: dict[str, GraphRow], source: str, rel: str, target: str) -> GraphRelation:
    s, t = entity_id(SCOPE, canonical_name(source)), entity_id(SCOPE, canonical_name(target))
    row = graph[relation_id(SCOPE, s, t, canonical_name(rel))]
    assert isinstance(row, GraphRelation)
    return row


# --- names, ids, tokens ---


@pytest.mark.parametrize("name", ["redis", "Redis ", " REDIS", "redis\n", "Redis"])
def test_canonical_name_matches_across_case_and_whitespace(name: str) -> None:
    assert canonical_name(name) == "redis"
    assert entity_id(SCOPE, canonical_name(name)) == entity_id(SCOPE, "redis")


def test_canonical_name_collapses_inner_whitespace() -> None:
    assert canonical_name("  Redis \t  Cluster\n") == "redis cluster"


def test_ids_are_deterministic_and_scoped() -> None:
    assert entity_id(SCOPE, "redis") == entity_id(SCOPE, "redis")
    assert entity_id(SCOPE, "redis") != entity_id("p_beta", "redis")
    a, b = entity_id(SCOPE, "a"), entity_id(SCOPE, "b")
    assert relation_id(SCOPE, a, b, "uses") != relation_id(SCOPE, b, a, "uses")
    assert mention_id(SCOPE, M1, a) != mention_id(SCOPE, M2, a)


def test_query_tokens_are_distinct_lowercased_alphanumeric_runs() -> None:
    assert query_tokens("Why does Redis-cluster use a k8s_Operator? redis!") == [
        "why",
        "does",
        "redis",
        "cluster",
        "use",
        "k8s",
        "operator",
    ]
    assert query_tokens("a b ? !") == []


def test_running_average() -> None:
    assert running_average(0.9, 1, 0.6) == pytest.approx(0.75)
    assert running_average(0.0, 0, 0.4) == pytest.approx(0.4)


# --- plan_upsert ---


def test_new_entities_start_at_one_mention_with_their_first_spelling() -> None:
    graph: dict[str, GraphRow] = {}
    plan = apply(graph, M1, [triple("Redis  Cluster", "runs on", "Kubernetes", 0.9)])
    assert {e.canonical_name for e in plan.entities} == {"redis cluster", "kubernetes"}
    redis = entity(graph, "redis cluster")
    assert (redis.name, redis.mentions, redis.entity_type, redis.scope_key) == ("Redis Cluster", 1, "", SCOPE)
    [rel] = plan.relations
    assert (rel.relation_type, rel.mentions, rel.confidence, rel.strength) == ("runs on", 1, 0.9, 1.0)
    assert {m.mention_text for m in plan.mentions} == {"Redis  Cluster", "Kubernetes"}
    assert all(m.memory_id == M1 and m.confidence == 0.9 for m in plan.mentions)


def test_existing_entity_matched_by_canonical_name_counts_another_memory() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("Redis", "caches", "sessions")])
    apply(graph, M2, [triple("redis ", "stores", "Queues")])
    redis = entity(graph, "redis")
    assert redis.mentions == 2
    assert redis.name == "Redis"  # the first spelling stays
    assert entity(graph, "sessions").mentions == 1
    assert len([r for r in graph.values() if isinstance(r, GraphEntity)]) == 3


def test_a_memory_counts_once_per_entity_and_relation() -> None:
    graph: dict[str, GraphRow] = {}
    plan = apply(
        graph,
        M1,
        [
            triple("api", "uses", "redis", 0.9),
            triple("worker", "uses", "Redis", 0.5),
            triple("API", "uses", "redis", 0.1),
        ],
    )
    assert entity(graph, "redis").mentions == 1
    assert entity(graph, "api").mentions == 1
    assert len(plan.mentions) == 3
    assert relation(graph, "api", "uses", "redis").mentions == 1
    assert relation(graph, "api", "uses", "redis").confidence == 0.9  # the first triple's


def test_relation_confidence_is_a_running_average_over_three_memories() -> None:
    graph: dict[str, GraphRow] = {}
    for memory_id, confidence in ((M1, 0.9), (M2, 0.6), (M3, 0.3)):
        apply(graph, memory_id, [triple("api", "Depends  On", "postgres", confidence)])
    rel = relation(graph, "api", "depends on", "postgres")
    assert rel.mentions == 3
    assert rel.confidence == pytest.approx(0.6)
    assert rel.strength == 1.0


def test_reapplying_a_memory_changes_nothing() -> None:
    graph: dict[str, GraphRow] = {}
    triples = [triple("api", "uses", "redis", 0.9)]
    apply(graph, M1, triples)
    before = dict(graph)
    assert not apply(graph, M1, triples)
    assert not apply(graph, M1, [triple("api", "replaced", "memcached")])
    assert graph == before


def test_triples_that_name_nothing_are_skipped() -> None:
    graph: dict[str, GraphRow] = {}
    unnamed = [triple("  ", "uses", "redis"), triple("api", " ", "redis"), triple("api", "uses", "")]
    plan = apply(graph, M1, unnamed)
    assert not plan
    assert plan_keys(SCOPE, [triple("", "uses", "redis")]).entity_ids == set()


def test_scopes_do_not_share_entities() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("api", "uses", "redis")])
    apply(graph, M2, [triple("api", "uses", "redis")], scope_key="p_beta")
    assert entity(graph, "redis").mentions == 1
    assert len([r for r in graph.values() if isinstance(r, GraphEntity)]) == 4


# --- plan_purge ---


def test_purge_decrements_and_orphans_entities_left_unmentioned() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("api", "uses", "redis")])
    apply(graph, M2, [triple("worker", "uses", "redis")])
    gone = [m for m in graph.values() if isinstance(m, GraphMention) and m.memory_id == M1]
    plan = plan_purge(gone, [r for r in graph.values() if isinstance(r, GraphEntity)])
    assert sorted(plan.mention_ids) == sorted(m.mention_id for m in gone)
    assert plan.orphan_ids == [entity_id(SCOPE, "api")]
    [redis] = plan.entities
    assert redis.canonical_name == "redis" and redis.mentions == 1


def test_purge_of_every_memory_orphans_every_entity() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("api", "uses", "redis")])
    apply(graph, M2, [triple("api", "uses", "redis")])
    mentions = [m for m in graph.values() if isinstance(m, GraphMention)]
    plan = plan_purge(mentions, [r for r in graph.values() if isinstance(r, GraphEntity)])
    assert plan.entities == []
    assert sorted(plan.orphan_ids) == sorted([entity_id(SCOPE, "api"), entity_id(SCOPE, "redis")])


def test_purge_drops_mentions_of_entities_already_gone() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("api", "uses", "redis")])
    mentions = [m for m in graph.values() if isinstance(m, GraphMention)]
    plan = plan_purge(mentions, [])
    assert len(plan.mention_ids) == 2 and plan.entities == [] and plan.orphan_ids == []


# --- neighbours ---


def rel(source: str, target: str, mentions: int = 1) -> GraphRelation:
    return GraphRelation(
        relation_id=relation_id(SCOPE, source, target, "uses"),
        scope_key=SCOPE,
        source_entity_id=source,
        target_entity_id=target,
        relation_type="uses",
        mentions=mentions,
        confidence=1.0,
    )


def test_neighbours_are_one_hop_in_both_directions() -> None:
    relations = [rel("hit", "out"), rel("in", "hit"), rel("out", "two-hops"), rel("hit", "other-hit")]
    assert neighbours(["hit", "other-hit"], relations) == ["out", "in"]


def test_neighbours_are_distinct_in_relation_order_and_capped() -> None:
    relations = [rel("hit", f"n{i}") for i in range(60)] + [rel(f"n{i}", "hit") for i in range(5)]
    found = neighbours(["hit"], relations, limit=50)
    assert found == [f"n{i}" for i in range(50)]
    assert neighbours(["hit"], relations, limit=0) == []


def test_rows_round_trip_through_their_tags() -> None:
    graph: dict[str, GraphRow] = {}
    apply(graph, M1, [triple("api", "uses", "redis", 0.7)])
    for row in graph.values():
        assert msgspec.convert(msgspec.to_builtins(row), GraphRow) == row

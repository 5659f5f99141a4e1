"""Pipeline v2's graph-augmented search (memstream.recall.search) and the graph agent, with fakes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import faust
import pytest

from memstream.agents import graph as graph_agent
from memstream.agents.base import DeadLetters
from memstream.embed.base import DistanceProfile
from memstream.kafka.codec import register_codec
from memstream.ports import Providers
from memstream.recall import search as recall
from memstream.rules.graph import GraphWrite
from memstream.schemas import Entity, GraphStats, MemoryUpdated
from memstream.schemas.graph import GraphEntity, GraphRelation
from memstream.schemas.memory import HybridHit
from memstream.topics.binding import bind_topics
from tests.conftest import make_settings
from tests.unit.factories import memory

NEAR, FAR = memory("near"), memory("far")
#: "near" scores 0.10 above "far" (hybrid scores, vector leg only).
CANDIDATES = [HybridHit(NEAR, 0.80, 0.80, None), HybridHit(FAR, 0.70, 0.70, None)]


class FakeEmbedder:
    #: An embedder not calibrated for a relevance floor (recall_floor 0): search keeps every candidate.
    profile = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=0.125)

    async def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


class FakeStore:
    """Best first, as many as asked for; remembers each limit asked."""

    def __init__(self, hits: Sequence[HybridHit]):
        self.hits = list(hits)
        self.limits: list[int] = []

    async def hybrid_search(
        self, text: str, vector: Sequence[float], scope_keys: Sequence[str], *, limit: int = 5, **_: Any
    ) -> list[HybridHit]:
        self.limits.append(limit)
        return self.hits[:limit]


class FakeGraph:
    """Boosts fixed ids; or fails, or never answers, or answers only after its deadline."""

    def __init__(self, ids: set[str], *, fail: bool = False, hang: bool = False, timed_out: bool = False):
        self.ids, self.fail, self.hang, self.timed_out = ids, fail, hang, timed_out
        self.calls: list[tuple[str, list[str], float]] = []

    async def boost_ids(
        self, query: str, scope_keys: Sequence[str], *, deadline_s: float = 0.5
    ) -> tuple[set[str], bool]:
        self.calls.append((query, list(scope_keys), deadline_s))
        if self.fail:
            raise ConnectionError("graph store unreachable")
        if self.hang:
            await asyncio.sleep(3600)
        return set(self.ids), self.timed_out


def providers(tmp_path: Path, store: FakeStore, graph: FakeGraph | None, **settings: Any) -> Providers:
    return Providers(
        settings=make_settings(tmp_path, graph_enabled=graph is not None, graph_boost_timeout_ms=50, **settings),
        embedder=cast(Any, FakeEmbedder()),
        store=cast(Any, store),
        llm=None,
        history=cast(Any, None),
        graph=cast(Any, graph),
    )


def ids(hits: Sequence[HybridHit]) -> list[str]:
    return [hit.memory.id for hit in hits]


# -- the re-ranking, pure --------------------------------------------------------------


def test_a_boosted_farther_memory_overtakes_only_when_the_weight_covers_the_gap() -> None:
    assert ids(recall.rerank(CANDIDATES, {"far"}, 0.15, 2)) == ["far", "near"]
    assert ids(recall.rerank(CANDIDATES, {"far"}, 0.05, 2)) == ["near", "far"]
    # An exact tie (binary-exact floats) keeps the vector order.
    tied = [HybridHit(NEAR, 0.75, 0.75, None), HybridHit(FAR, 0.5, 0.5, None)]
    assert ids(recall.rerank(tied, {"far"}, 0.25, 2)) == ["near", "far"]


def test_the_boost_reorders_and_never_rewrites_scores() -> None:
    (first, second) = recall.rerank(CANDIDATES, {"far"}, 0.15, 2)
    assert (first.score, second.score) == (0.70, 0.80)


def test_the_boost_only_adds_and_the_limit_cuts_after_it() -> None:
    pool = [HybridHit(memory(f"m{i}"), 1.0 - 0.1 * i, 1.0 - 0.1 * i, None) for i in range(6)]
    assert ids(recall.rerank(pool, set(), 0.15, 3)) == ["m0", "m1", "m2"]
    assert ids(recall.rerank(pool, {"m5", "unknown"}, 0.6, 3)) == ["m5", "m0", "m1"]
    assert ids(recall.rerank(pool, {"m0"}, 0.15, 10)) == ids(pool)


# -- search with a graph ---------------------------------------------------------------


async def test_search_boosts_from_a_bigger_candidate_pool(tmp_path: Path) -> None:
    store, graph = FakeStore(CANDIDATES), FakeGraph({"far"})
    hits = await recall.search(providers(tmp_path, store, graph), "redis cache", "p_test", "u_test", limit=1)
    assert ids(hits) == ["far"] and hits[0].score == 0.70
    # Session-aware fusion asks for its own pool (recall.sessions); the boost's when it is bigger.
    assert store.limits == [max(1 * recall.BOOST_POOL, recall.SESSION_POOL)]
    assert graph.calls == [("redis cache", ["p_test", "u_test"], 0.05)]


async def test_the_configured_weight_decides(tmp_path: Path) -> None:
    store, graph = FakeStore(CANDIDATES), FakeGraph({"far"})
    hits = await recall.search(providers(tmp_path, store, graph, graph_boost_weight=0.05), "redis", "p_test")
    assert ids(hits) == ["near", "far"]


async def test_a_deadline_cut_boost_still_boosts_what_it_found(tmp_path: Path) -> None:
    store, graph = FakeStore(CANDIDATES), FakeGraph({"far"}, timed_out=True)
    assert ids(await recall.search(providers(tmp_path, store, graph), "redis", "p_test")) == ["far", "near"]


@pytest.mark.parametrize(
    "broken", [FakeGraph({"far"}, fail=True), FakeGraph({"far"}, hang=True)], ids=["fails", "hangs"]
)
async def test_a_failing_or_hanging_graph_leaves_the_plain_order(tmp_path: Path, broken: FakeGraph) -> None:
    store = FakeStore(CANDIDATES)
    started = asyncio.get_running_loop().time()
    hits = await recall.search(providers(tmp_path, store, broken), "redis", "p_test", limit=2)
    assert ids(hits) == ["near", "far"]
    # The 50 ms deadline plus the grace, not the hour the graph would take.
    assert asyncio.get_running_loop().time() - started < 0.05 + recall.BOOST_GRACE_S + 1.0


async def test_without_a_graph_search_is_the_plain_hybrid_search(tmp_path: Path) -> None:
    store = FakeStore(CANDIDATES)
    hits = await recall.search_scopes(providers(tmp_path, store, None), "redis", ["p_test"], limit=1, session_weight=0)
    assert ids(hits) == ["near"] and store.limits == [1]


# -- the graph agent, through Faust's test context ---------------------------------------

TS = datetime(2025, 1, 1, tzinfo=UTC)
TRIPLES = [Entity(source="API", relationship="uses", target="Redis", confidence=0.8)]


class RecordingGraph:
    def __init__(self, *, fail: bool = False):
        self.fail = fail
        self.applied: list[tuple[str, str, list[Entity]]] = []

    async def apply(self, memory_id: str, scope_key: str, triples: Sequence[Entity]) -> GraphWrite:
        if self.fail:
            raise ConnectionError("graph store unreachable")
        self.applied.append((memory_id, scope_key, list(triples)))
        entity = GraphEntity(entity_id="e", scope_key=scope_key, name="API", canonical_name="api", mentions=1)
        relation = GraphRelation(
            relation_id="r",
            scope_key=scope_key,
            source_entity_id="e",
            target_entity_id="e2",
            relation_type="uses",
            mentions=1,
            confidence=0.8,
        )
        return GraphWrite([entity, entity], [relation], [])


def updated(change: str, *, entities: list[Entity] = TRIPLES, id: str = "m1") -> MemoryUpdated:
    return MemoryUpdated(change=change, memory=memory(id), op_id=f"op-{id}-{change}", entities=entities, ts=TS)  # type: ignore[arg-type]


def agent_under_test(tmp_path: Path, graph: RecordingGraph | None) -> tuple[faust.App, Any, Any, DeadLetters]:
    register_codec()
    app = faust.App(f"graph-test-{tmp_path.name}", store="memory://", autodiscover=False)
    topics = bind_topics(app, "t", 1)
    sink = DeadLetters(topics.dead_letters)
    wiring = providers(tmp_path, FakeStore([]), None)
    wiring.graph = cast(Any, graph)
    agent = graph_agent.register(app, topics, wiring, sink)
    return app, agent, app.tables["graph-stats"], sink


async def test_the_agent_records_created_and_refreshed_memories_only(tmp_path: Path) -> None:
    graph = RecordingGraph()
    _, agent, stats, sink = agent_under_test(tmp_path, graph)
    async with agent.test_context() as agent_context:
        await agent_context.put(updated("created"))
        await agent_context.put(updated("refreshed"))
        await agent_context.put(updated("deleted"))
        await agent_context.put(updated("created", entities=[], id="m2"))
    assert graph.applied == [("m1", "p_test", TRIPLES), ("m1", "p_test", TRIPLES)]
    assert stats["p_test"] == GraphStats(applied=2, entities_written=4, relations_written=2)
    assert sink.count == 0


async def test_a_graph_failure_is_counted_not_dead_lettered(tmp_path: Path) -> None:
    _, agent, stats, sink = agent_under_test(tmp_path, RecordingGraph(fail=True))
    async with agent.test_context() as agent_context:
        await agent_context.put(updated("created"))
    assert stats["p_test"] == GraphStats(failures=1)
    assert sink.count == 0


async def test_without_a_graph_the_agent_passes_over_every_event(tmp_path: Path) -> None:
    _, agent, stats, sink = agent_under_test(tmp_path, None)
    async with agent.test_context() as agent_context:
        await agent_context.put(updated("created"))
    assert stats.get("p_test") is None and sink.count == 0

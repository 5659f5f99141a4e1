"""Pipeline v2's knowledge graph end to end: extracted entity triples become canonical entities
and relations with counts and running-average confidences, and search boosts the memories
linked to an entity the query names — on the real embedded broker, store and embedder,
with a fake Anthropic API answering the extraction, decision and contradiction prompts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import faust
import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.recall import search as recall
from memstream.rules import contradiction, decision
from memstream.rules.graph import canonical_name
from memstream.rules.prompts import NORMAL_SYSTEM
from memstream.schemas import GraphStats, Memory
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.loopback import text_of_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def triple(source: str, relationship: str, target: str, confidence: float) -> dict[str, Any]:
    return {"source": source, "relationship": relationship, "target": target, "confidence": confidence}


#: What the fake model extracts from each assistant line: one fact, and its triples.
BROKER = "The embedded message broker keeps its log segments on the local disk"
BACKUPS = "Nightly back-ups of the local disk are taken with restic"
ALERTS = "Disk usage alerts fire when the local volume passes eighty percent"
RETENTION = "Retention settings: every topic keeps its records for seven days"
SCRIPT: dict[str, list[dict[str, Any]]] = {
    BROKER: [triple("Tansu", "stores log on", "local disk", 0.9)],
    # The same entities and relation in other casing and spacing, at another confidence.
    BACKUPS: [triple("tansu ", "Stores  log on", "Local Disk", 0.7), triple("restic", "backs up", "local disk", 0.9)],
    # Only one relation away from Tansu.
    ALERTS: [triple("local disk", "alerts at", "80 percent", 0.8)],
    # Names nothing the query names.
    RETENTION: [triple("topics", "keep records for", "seven days", 0.9)],
}
QUERY = "Tansu retention settings"


def answer(request: dict[str, Any]) -> str:
    system = text_of_blocks(request.get("system", ""))
    if system == decision.SYSTEM:
        return json.dumps({"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "new"})
    if system == contradiction.SYSTEM:
        return '{"superseded": []}'
    if system != NORMAL_SYSTEM:
        return '{"memories": []}'
    prompt = text_of_blocks(request["messages"][-1]["content"])
    lines = [line.removeprefix("[assistant] ") for line in prompt.splitlines() if line.startswith("[assistant]")]
    last = lines[-1] if lines else ""
    memories = [{"memory": last, "type": "architecture", "confidence": 0.9}] if last in SCRIPT else []
    return json.dumps({"memories": memories, "entities": SCRIPT.get(last, [])})


class Run:
    def __init__(self, running: runner.Running, project: Path):
        self.running, self.project = running, project
        self.scope = project_key(str(project))

    async def say(self, line: str) -> Memory:
        """One session whose assistant states ``line``; returns the memory it became."""
        await publish(
            self.running.bootstrap,
            self.running.settings.topic_prefix,
            [
                make_turn(session_id=f"s-{len(line)}-{line[:8]}", project=str(self.project), role=role, content=text)
                for role, text in (("user", "Tell me about the setup."), ("assistant", line))
            ],
        )

        async def stored() -> Memory | None:
            memories = await self.running.providers.store.list([self.scope])
            return next((m for m in memories if m.text == line), None)

        return await eventually(stored, what=f"the memory {line!r}")

    def stats(self) -> GraphStats | None:
        table = self.running.pipeline.app.tables["graph-stats"]
        assert isinstance(table, faust.Table)  # the app's tables are typed as any collection
        stats: GraphStats | None = table.get(self.scope)
        return stats


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    with FakeAnthropic(answer, api_key="sk-test") as claude:
        running = await start_pipeline(
            tmp_module_dir / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=claude.base_url,
            graph_enabled=True,
            llm_retries=0,
        )
        try:
            yield Run(running, tmp_module_dir / "graph-project")
        finally:
            await running.stop()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stored(run: Run) -> dict[str, Memory]:
    """The four memories, stored and recorded in the graph; the broker's first, alone."""
    graph = run.running.providers.graph
    assert graph is not None
    broker = await run.say(BROKER)

    async def tansu_seen() -> bool:
        return any(e.canonical_name == "tansu" for e in await graph.entities(run.scope))

    await eventually(tansu_seen, what="the Tansu entity")  # so it is first seen as "Tansu"
    memories = [broker, await run.say(BACKUPS), await run.say(ALERTS), await run.say(RETENTION)]

    async def recorded() -> bool:
        stats = run.stats()
        return stats is not None and stats.applied + stats.failures == len(memories)

    await eventually(recorded, what="the graph agent to record all four memories")
    return {m.text: m for m in memories}


async def test_triples_become_canonical_entities_and_averaged_relations(run: Run, stored: dict[str, Memory]) -> None:
    graph = run.running.providers.graph
    assert graph is not None
    mentions = {e.canonical_name: e.mentions for e in await graph.entities(run.scope)}
    assert mentions == {
        "local disk": 3,
        "tansu": 2,
        "restic": 1,
        "80 percent": 1,
        "topics": 1,
        "seven days": 1,
    }
    entities = {e.canonical_name: e for e in await graph.entities(run.scope)}
    assert entities["tansu"].name == "Tansu"
    relations = {r.relation_type: r for r in await graph.relations(run.scope)}
    stores = relations["stores log on"]
    assert (stores.source_entity_id, stores.target_entity_id) == (
        entities["tansu"].entity_id,
        entities[canonical_name("Local Disk")].entity_id,
    )
    assert stores.mentions == 2 and stores.confidence == pytest.approx(0.8) and stores.strength == 1.0
    assert relations["backs up"].mentions == 1
    assert run.stats() == GraphStats(applied=4, entities_written=9, relations_written=5)
    assert len({m.id for m in stored.values()}) == 4


async def test_search_adds_the_graph_boost_to_linked_memories(run: Run, stored: dict[str, Memory]) -> None:
    providers = run.running.providers
    assert providers.graph is not None
    linked = {stored[BROKER].id, stored[BACKUPS].id}

    boosted, timed_out = await providers.graph.boost_ids(QUERY, [run.scope])
    # Tansu's memories, and the alert one through the local disk, one relation away.
    assert boosted == linked | {stored[ALERTS].id} and not timed_out

    # By vector alone the retention memory is nearest the query ...
    vector = await providers.embedder.embed_query(QUERY)
    nearest = await providers.store.search(vector, [run.scope], limit=4)
    assert nearest[0].memory.text == RETENTION
    # ... and it matches two of the query's words: best in both legs, it scores 1 on recall's scaled
    # legs, a lead over the others larger than the boost (0.15), so it stays first. (On raw e5 cosines,
    # all within a few hundredths, the boost put any linked memory first.) Behind it, the boosted ones in
    # order of boosted score; nothing is dropped and no score is rewritten.
    plain = await providers.store.hybrid_search(
        QUERY,
        vector,
        [run.scope],
        limit=4 * recall.BOOST_POOL,
        alpha=providers.settings.recall_alpha,
        min_score=0.0,
        fusion="normalized",
    )
    hits = await recall.search(providers, QUERY, run.scope, limit=4)
    assert hits[0].memory.text == RETENTION and hits[0].score == pytest.approx(1.0)
    weight = providers.settings.graph_boost_weight
    boosted_score = {h.memory.id: h.score + (weight if h.memory.id in boosted else 0.0) for h in plain}
    assert [h.memory.id for h in hits] == sorted(boosted_score, key=lambda i: -boosted_score[i])[:4]
    assert {h.memory.id for h in hits[1:]} == boosted
    assert {h.memory.id for h in hits} <= {h.memory.id for h in plain}
    assert {h.memory.id: h.score for h in hits}.items() <= {h.memory.id: h.score for h in plain}.items()

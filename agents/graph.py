"""Graph agent: Pipeline v2's knowledge graph, written after the memory it describes.

Consumes ``memory-updated`` (key: scope). Emits nothing: it records a created or refreshed
memory's entity triples in the graph store (``providers.graph``), which search reads for
its boost; for a forgotten scope's ``deleted`` updates, it purges their links again.
State: table ``graph-stats`` — per scope, memories recorded, rows written and
failed writes. Relies on one scope's updates arriving in order, so that one scope's graph
has one writer at a time (the store's read-then-write is not atomic across writers).

As in the spec, a graph write failing is not the memory failing: the memory is already
stored, so the failure is logged, counted, and the event is not dead-lettered. A
redelivered or replayed memory writes nothing twice (``memstream.rules.graph``). Without
``MEMSTREAM_GRAPH_ENABLED`` the agent still runs, and passes over every event.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.agents.store import FORGET_CAUSE
from memstream.ports import Providers
from memstream.schemas import GraphStats, MemoryUpdated
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "graph"
log = logging.getLogger(__name__)


def records(update: MemoryUpdated) -> bool:
    """True for the changes the graph records: a created or refreshed memory that names entities."""
    return update.change in ("created", "refreshed") and bool(update.entities)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    stats = state_table(app, "graph-stats", providers.settings.partitions)

    async def handle(value: Any, event: EventT) -> None:
        update = expect(value, MemoryUpdated)
        graph = providers.graph
        if graph is not None and update.change == "deleted" and update.cause == FORGET_CAUSE:
            # The store purged the graph when it forgot the scope; this catches a link written
            # since, from a create of the scope that this agent read before the forget.
            await graph.purge_memory([update.memory.id])
            return
        if graph is None or not records(update):
            return
        memory = update.memory
        state: GraphStats = stats.get(memory.scope_key) or GraphStats()
        with stage_span("memstream.graph", change=update.change, triples=len(update.entities)) as span:
            try:
                written = await graph.apply(memory.id, memory.scope_key, update.entities)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("graph write for memory %s failed; the memory stands without it", memory.id, exc_info=True)
                span.set_attribute("graph.error", f"{type(exc).__name__}: {exc}"[:200])
                stats[memory.scope_key] = msgspec.structs.replace(state, failures=state.failures + 1)
                return
            span.set_attribute("graph.entities", len(written.entities))
            span.set_attribute("graph.relations", len(written.relations))
        stats[memory.scope_key] = msgspec.structs.replace(
            state,
            applied=state.applied + bool(written),
            entities_written=state.entities_written + len(written.entities),
            relations_written=state.relations_written + len(written.relations),
        )

    @app.agent(topics.memory_updated, name=STAGE)
    async def graph(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return graph

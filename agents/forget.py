"""Forget agent: starts the purge of a forgotten user or project down the pipeline.

Consumes ``forgotten`` (key: scope; compacted, the ledger of forgets). Emits the same
``ForgetScope`` on ``embedded`` (key: scope) and on ``consolidation`` (Phase 2 drops a
forgotten project's inputs and workspace). From there it travels as a barrier: the decide
agent drops its recent memories of the scope and passes it to ``memory-ops`` after every
op it made for the scope's earlier facts; the store agent deletes the scope's memories and
graph links and passes it to ``history`` after every record it wrote; the history agent
purges the scope's records. Each stage then drops the scope's facts, ops and records dated
no later than the forget (a parked snapshot's retry, a redelivery, a replay of old turns).
State: none (the forget is recorded in this worker's ledger, ``memstream.kafka.ledger``, for the
snapshot agent's windows); a redelivered forget purges again, which is harmless. On the embedded
default it first deletes the scope's turns said before the forget from the durable turn log
(memstream.intake.turnlog), so neither a restart nor ``memstream replay`` brings them back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded
from memstream.intake.turnlog import forget_logged
from memstream.kafka.ledger import ledger_of
from memstream.ports import Providers
from memstream.schemas import ForgetScope
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "forget"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    ledger = ledger_of(app)

    async def handle(value: Any, event: EventT) -> None:
        op = expect(value, ForgetScope)
        # The snapshot agent's ledger, which also follows the topic on its own (every partition).
        ledger.record(op)
        with stage_span("memstream.intake.forget", scope=op.scope):
            await asyncio.to_thread(forget_logged, providers.settings, op)
            await topics.embedded.send(key=op.scope_key.encode(), value=op)
            await topics.consolidation.send(key=op.scope_key.encode(), value=op)

    @app.agent(topics.forgotten, name=STAGE)
    async def forget(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return forget

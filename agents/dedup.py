"""Dedup agent: a new memory, or a refresh of the one it duplicates (seed 000 step 4).

Consumes ``embedded`` (key: scope). Emits ``memory-ops`` (key: scope): CreateMemory, or
RefreshMemory when a stored or just-decided memory lies within the type's dedup distance.
State: table ``dedup-recent`` — per scope, the memories it decided on lately, so two
duplicates arriving back to back are caught before the first reaches the store. Relies on
the facts of one scope arriving in order (one partition per scope key).
"""

from __future__ import annotations

import time
from typing import Any

import faust
from faust.types import EventT

from agents.base import DeadLetters, expect, guarded, state_table
from memstream.bootstrap import Providers
from memstream.identity import derived_id, memory_id, normalize_content
from memstream.rules.dedup import find_duplicate, remember, threshold
from memstream.tracing import stage_span
from schemas import CreateMemory, DedupState, EmbeddedFact, Memory, RecentMemory, RefreshMemory
from topics.binding import Topics

STAGE = "dedup"
#: How long a decided memory stays in the table: far longer than store lag.
RECENT_SECONDS = 600.0
#: Most recent memories kept per scope.
RECENT_KEEP = 256
#: Stored neighbours fetched per fact.
NEIGHBOURS = 5


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    recent_table = state_table(app, "dedup-recent", providers.settings.partitions)
    profile = providers.embedder.profile

    async def handle(value: Any, event: EventT) -> None:
        embedded = expect(value, EmbeddedFact)
        fact = embedded.fact
        content = normalize_content(fact.text)
        if not content.normalized:
            return
        state: DedupState = recent_table.get(fact.scope_key) or DedupState()
        with stage_span("memstream.dedup", type=fact.type) as span:
            stored = await providers.store.search(
                embedded.vector,
                [fact.scope_key],
                limit=NEIGHBOURS,
                types=[fact.type],
                max_distance=threshold(fact.type, profile),
            )
            duplicate = find_duplicate(fact.type, embedded.vector, stored, state.recent, profile)
            span.set_attribute("dedup.duplicate", duplicate is not None)
            candidate = Memory(
                id=memory_id(fact.scope_key, content.content_hash),
                text=content.storage,
                type=fact.type,
                scope=fact.scope,
                scope_key=fact.scope_key,
                source_chunk=fact.source_chunk,
                created_at=fact.ts,
                updated_at=fact.ts,
                content_hash=content.content_hash,
                embedding_model=embedded.embedding_model,
                session_id=fact.session_id,
                project=fact.project,
            )
            op: CreateMemory | RefreshMemory
            if duplicate is not None:
                target = duplicate.memory_id
                op = RefreshMemory(
                    op_id=derived_id(fact.fact_id, "refresh"),
                    scope_key=fact.scope_key,
                    cause=f"duplicate (distance {duplicate.distance:.3f})",
                    memory_id=target,
                    memory=candidate,
                    vector=embedded.vector,
                )
            else:
                target = candidate.id
                op = CreateMemory(
                    op_id=derived_id(fact.fact_id, "create"),
                    scope_key=fact.scope_key,
                    cause=f"extracted from {fact.origin}" if fact.origin else "extracted",
                    memory=candidate,
                    vector=embedded.vector,
                )
            await topics.memory_ops.send(key=fact.scope_key.encode(), value=op)
        decided = RecentMemory(
            id=target, type=fact.type, text=content.storage, vector=embedded.vector, decided_at=time.time()
        )
        recent_table[fact.scope_key] = DedupState(
            recent=remember(state.recent, decided, now=decided.decided_at, keep_seconds=RECENT_SECONDS, keep=RECENT_KEEP),
            created=state.created + (duplicate is None),
            refreshed=state.refreshed + (duplicate is not None),
        )

    @app.agent(topics.embedded, name=STAGE)
    async def dedup(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return dedup

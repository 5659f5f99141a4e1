"""Age agent: the memory spec's aging rules, applied as operations for the store.

Consumes ``memory-updated`` (key: scope). Emits ``memory-ops`` (DeleteMemory) and, when a
session summary is condensed, a learned-pattern ``facts`` event that flows through embed
and decide like any other fact. State: table ``age-state`` — per scope, the newest
progress memory seen and the summaries already condensed. Relies on one scope's updates
arriving in order; a progress memory older than the newest seen is itself aged out.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.identity import derived_id
from memstream.ports import Providers
from memstream.rules.aging import condense_prompt, stale_progress, summaries_to_condense
from memstream.rules.extraction import CONDENSE_SYSTEM, parse_facts
from memstream.schemas import AgeState, DeleteMemory, Fact, Memory, MemoryUpdated
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "age"
log = logging.getLogger(__name__)
#: Condensed summary ids remembered per scope (enough to never condense one twice).
CONDENSED_KEEP = 64


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    ages = state_table(app, "age-state", settings.partitions)

    async def delete(memory: Memory, cause: str, because_of: str) -> None:
        await topics.memory_ops.send(
            key=memory.scope_key.encode(),
            value=DeleteMemory(
                op_id=derived_id(memory.id, "delete", because_of),
                scope_key=memory.scope_key,
                cause=cause,
                memory_id=memory.id,
            ),
        )

    async def age_progress(memory: Memory, state: AgeState) -> AgeState:
        newest = state.progress_updated_at
        if newest is not None and memory.updated_at < newest and memory.id != state.progress_id:
            await delete(memory, "aging:progress (a newer progress exists)", state.progress_id)
            return state
        progress = await providers.store.list([memory.scope_key], types=["progress"])
        for stale in stale_progress(memory, progress):
            await delete(stale, "aging:progress", memory.id)
        return msgspec.structs.replace(state, progress_id=memory.id, progress_updated_at=memory.updated_at)

    async def condense(summary: Memory) -> str:
        if providers.llm is None:
            return summary.text
        completion = await providers.llm.complete(CONDENSE_SYSTEM, condense_prompt(summary), max_tokens=512)
        facts = parse_facts(completion.text).facts
        return facts[0].text if facts else summary.text

    async def age_summaries(memory: Memory, state: AgeState) -> AgeState:
        summaries = await providers.store.list([memory.scope_key], types=["session-summary"])
        condensed = list(state.condensed)
        for oldest in summaries_to_condense(summaries, settings.session_summary_cap):
            if oldest.id in condensed:
                continue
            lesson = await condense(oldest)
            await topics.facts.send(
                key=oldest.scope_key.encode(),
                value=Fact(
                    fact_id=derived_id(oldest.id, "condensed"),
                    text=lesson,
                    type="learned-pattern",
                    scope=oldest.scope,
                    scope_key=oldest.scope_key,
                    project=oldest.project,
                    session_id=oldest.session_id,
                    source_chunk=oldest.text,
                    origin=f"condense:{oldest.id}",
                    sources=oldest.sources,
                    ts=memory.updated_at,
                ),
            )
            await delete(oldest, "aging:session-summary condensed into a learned-pattern", memory.id)
            condensed.append(oldest.id)
        return msgspec.structs.replace(state, condensed=condensed[-CONDENSED_KEEP:])

    async def handle(value: Any, event: EventT) -> None:
        update = expect(value, MemoryUpdated)
        memory = update.memory
        if update.change not in ("created", "refreshed") or memory.type not in ("progress", "session-summary"):
            return
        state: AgeState = ages.get(memory.scope_key) or AgeState()
        with stage_span("memstream.age", type=memory.type):
            if memory.type == "progress":
                state = await age_progress(memory, state)
            elif update.change == "created":
                state = await age_summaries(memory, state)
        ages[memory.scope_key] = state

    @app.agent(topics.memory_updated, name=STAGE)
    async def age(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return age

"""Age agent: the memory spec's aging rules, applied as operations for the store.

Consumes ``memory-updated`` (key: scope). Emits ``memory-ops`` (DeleteMemory) and, when a
session summary is condensed, a learned-pattern ``facts`` event that flows through embed
and decide like any other fact. State: table ``age-state`` — per scope, the newest
progress memory seen and the summaries already condensed. Relies on one scope's updates
arriving in order; a progress memory older than the newest seen is itself aged out.

A timer (every ``MEMSTREAM_RETENTION_INTERVAL``, on the owner of the one ``consolidation``
partition, like retention) retires memories whose code is long gone (issue 39): every file a
memory cites deleted, each by a commit at least ``MEMSTREAM_CODE_GONE_DAYS`` old. It reads the
work trees, so it runs only where they are on the worker's machine (``MEMSTREAM_CHECK_CITATIONS``,
the embedded default); a citation of a repository not here is ``unknown`` and keeps its memory.
The memory is superseded by a ``forgotten:`` mark with the cause ``aging:code-gone: …`` (audited as
``aged-out``), so the console's restore brings it back; a memory restored or said again after its
files went is not retired again for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.identity import derived_id
from memstream.ports import Providers
from memstream.recall import staleness
from memstream.rules.aging import condense_prompt, gone_long_enough, stale_progress, summaries_to_condense
from memstream.rules.extraction import CONDENSE_SYSTEM, parse_facts
from memstream.schemas import AgeState, DeleteMemory, Fact, Memory, MemoryUpdated, SupersedeMemory
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.store.base import MemoryStore
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "age"
log = logging.getLogger(__name__)
#: Condensed summary ids remembered per scope (enough to never condense one twice).
CONDENSED_KEEP = 64
#: The cause of a memory retired because the code it cites is long gone (audited as ``aged-out``).
CODE_GONE_CAUSE = "aging:code-gone"
#: Scopes, and active memories per scope, one sweep for gone code reads at most.
CODE_GONE_SCOPES = 1000
CODE_GONE_PER_SCOPE = 5000


def code_gone_retirement(memory: Memory, checked: Sequence[staleness.Checked], days: float) -> SupersedeMemory:
    """The operation that retires ``memory``: superseded by a forgotten mark (so restorable), its cause
    naming the files and the commits that deleted them. Its id derives from the memory's version, so a
    sweep that runs again (or a replay) sends the same operation."""
    op_id = derived_id(memory.id, "code-gone", memory.updated_at.isoformat())
    files = ", ".join(c.citation.path + (f" deleted in {c.commit[:7]}" if c.commit else "") for c in checked)
    return SupersedeMemory(
        op_id=op_id,
        scope_key=memory.scope_key,
        memory_id=memory.id,
        superseded_by=f"{FORGOTTEN_MARK}{op_id}",
        cause=f"{CODE_GONE_CAUSE}: every file it cites has been gone for {days:g} days or more ({files})",
    )


def code_gone(
    memories: Sequence[Memory], checker: staleness.Checker, days: float, now: datetime
) -> list[SupersedeMemory]:
    """The retirements due among ``memories`` (blocking: git runs here): every cited file gone, each
    deleted by a commit ``days`` old or more, and the memory not stated (or restored) since the last went."""
    due = []
    for memory in memories:
        cited = staleness.citations_of(memory)
        if not cited:
            continue
        checked = checker.check_all(cited)
        since = staleness.gone_since(checked)
        if since is None or not gone_long_enough(since, now, days):
            continue
        if memory.updated_at >= max(when for when in since if when is not None):
            continue  # restored, or said again, after its code went: someone still wants it
        due.append(code_gone_retirement(memory, checked, days))
    return due


async def sweep_code_gone(
    store: MemoryStore, checker: staleness.Checker | None, days: float, now: datetime
) -> list[SupersedeMemory]:
    """One sweep for gone code over every scope's active memories; nothing when the work trees are not
    read here (``checker`` None: ``MEMSTREAM_CHECK_CITATIONS`` off) or ``days`` is 0."""
    if checker is None or days <= 0:
        return []
    due: list[SupersedeMemory] = []
    for scope_key in await store.scopes(limit=CODE_GONE_SCOPES):
        memories = await store.list([scope_key], limit=CODE_GONE_PER_SCOPE)
        due += await asyncio.to_thread(code_gone, memories, checker, days, now)
    return due


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

    consolidation_topic = topics.consolidation.get_topic_name()

    @app.timer(settings.retention_interval, name="age-code-gone")
    async def age_code_gone() -> None:
        # One worker sweeps (the owner of the one consolidation partition), as retention does.
        if not any(tp.topic == consolidation_topic for tp in app.assignor.assigned_actives()):
            return
        try:
            # A checker of its own: the sweep's git answers run in a thread, apart from recall's.
            checker = staleness.Checker() if staleness.checker_for(settings) is not None else None
            for op in await sweep_code_gone(providers.store, checker, settings.code_gone_days, datetime.now(UTC)):
                await topics.memory_ops.send(key=op.scope_key.encode(), value=op)
                log.info("aging retired %s: %s", op.memory_id, op.cause)
        except asyncio.CancelledError:
            raise
        except Exception:  # a timer that raises stops for good: the next sweep must still come
            log.exception("aging sweep for gone code failed")

    return age

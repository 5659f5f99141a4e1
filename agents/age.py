"""Age agent: the memory spec's aging rules, applied as operations for the store.

Consumes ``memory-updated`` (key: scope). Emits ``memory-ops`` (DeleteMemory) and, when a
session summary is condensed, a learned-pattern ``facts`` event that flows through embed
and decide like any other fact. State: table ``age-state`` — per scope, the newest
progress memory seen and the summaries already condensed. Relies on one scope's updates
arriving in order; a progress memory older than the newest seen is itself aged out.

A timer (every ``MEMSTREAM_RETENTION_INTERVAL``, on the owner of the one ``consolidation``
partition, like retention) checks the code memories cite (issue 39). It records a ``code-status``
history record when a memory's status changes (current → changed, moved or gone, and back), once
per change: the last recorded status is kept in the process and read from history on a miss. It
retires memories whose code is long gone: every file a memory cites deleted, each by a commit at
least ``MEMSTREAM_CODE_GONE_DAYS`` old. It reads the
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.identity import derived_id
from memstream.ports import Providers
from memstream.recall import staleness
from memstream.rules import audit
from memstream.rules.aging import condense_prompt, gone_long_enough, stale_progress, summaries_to_condense
from memstream.rules.extraction import CONDENSE_SYSTEM, parse_facts
from memstream.schemas import AgeState, DeleteMemory, Fact, Memory, MemoryUpdated, SupersedeMemory
from memstream.schemas.history import HistoryRecord
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.store.base import MemoryStore
from memstream.store.history import HistoryStore
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "age"
log = logging.getLogger(__name__)
#: Condensed summary ids remembered per scope (enough to never condense one twice).
CONDENSED_KEEP = 64
#: The cause of a memory retired because the code it cites is long gone (audited as ``aged-out``).
CODE_GONE_CAUSE = "aging:code-gone"
#: History records read for a memory's last recorded code status; code statuses remembered in the process.
HISTORY_READ = 100
SEEN_KEPT = 200_000
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
    memory: Memory, checked: Sequence[staleness.Checked], days: float, now: datetime
) -> SupersedeMemory | None:
    """The retirement of ``memory`` if it is due: every cited file gone, each deleted by a commit ``days``
    old or more, and the memory not stated (or restored) since the last of them went."""
    since = staleness.gone_since(checked)
    if since is None or not gone_long_enough(since, now, days):
        return None
    if memory.updated_at >= max(when for when in since if when is not None):
        return None  # restored, or said again, after its code went: someone still wants it
    return code_gone_retirement(memory, checked, days)


def code_status_record(
    memory: Memory, last: str, status: str, checked: Sequence[staleness.Checked], now: datetime
) -> HistoryRecord:
    """The audit record of a memory's code status changing from ``last`` to ``status``."""
    return audit.record(
        "code-status",
        scope_key=memory.scope_key,
        ts=now,
        about=f"code-status:{memory.id}:{last}:{status}:{now.isoformat()}",
        memory_id=memory.id,
        reason=f"code {status} (was {last}): " + "; ".join(staleness.describe(c) for c in checked),
        origin=STAGE,
    )


@dataclass(slots=True)
class CodeSweep:
    """What one sweep of the memories' code found: status changes to record, memories to retire."""

    records: list[HistoryRecord] = field(default_factory=list)
    retire: list[SupersedeMemory] = field(default_factory=list)


def _checks(memories: Sequence[Memory], checker: staleness.Checker) -> list[tuple[Memory, list[staleness.Checked]]]:
    # Blocking (git runs here): called in a thread.
    out = []
    for memory in memories:
        cited = staleness.citations_of(memory)
        if cited:
            out.append((memory, checker.check_all(cited)))
    return out


async def last_code_status(history: HistoryStore, memory_id: str) -> str:
    """The status the memory's history last recorded (``current`` if none: its code was current when cited)."""
    for record in reversed(await history.for_memory(memory_id, limit=HISTORY_READ)):
        if record.outcome == "code-status" and record.reason.startswith("code "):
            return record.reason.split(" ", 2)[1]
    return "current"


async def sweep_code(
    store: MemoryStore,
    history: HistoryStore,
    checker: staleness.Checker | None,
    days: float,
    now: datetime,
    seen: dict[str, str],
) -> CodeSweep:
    """One sweep over every scope's active memories that cite code: a record for each whose status changed
    since its history last said (``seen`` keeps what was recorded, so a warm sweep reads no history), and
    the retirements due. Nothing when the work trees are not read here (``checker`` None:
    ``MEMSTREAM_CHECK_CITATIONS`` off); ``days`` 0 retires nothing."""
    found = CodeSweep()
    if checker is None:
        return found
    if len(seen) > SEEN_KEPT:
        seen.clear()
    for scope_key in await store.scopes(limit=CODE_GONE_SCOPES):
        memories = await store.list([scope_key], limit=CODE_GONE_PER_SCOPE)
        for memory, checked in await asyncio.to_thread(_checks, memories, checker):
            status = staleness.memory_status(checked)
            if not status:
                continue  # nothing checkable here: unknown is no change
            last = seen.get(memory.id) or await last_code_status(history, memory.id)
            if status != last:
                found.records.append(code_status_record(memory, last, status, checked, now))
            seen[memory.id] = status
            retire = code_gone(memory, checked, days, now) if days > 0 else None
            if retire is not None:
                found.retire.append(retire)
    return found


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
    # Only where the work trees are read here; a checker of its own, since its git runs in a thread.
    checker = staleness.Checker() if staleness.checker_for(settings) is not None else None
    seen: dict[str, str] = {}  # the code status last recorded per memory (history is read on a miss)

    @app.timer(settings.retention_interval, name="age-code-gone")
    async def age_code_gone() -> None:
        # One worker sweeps (the owner of the one consolidation partition), as retention does.
        if not any(tp.topic == consolidation_topic for tp in app.assignor.assigned_actives()):
            return
        try:
            found = await sweep_code(
                providers.store, providers.history, checker, settings.code_gone_days, datetime.now(UTC), seen
            )
            for record in found.records:
                await topics.history.send(key=record.scope_key.encode(), value=record)
            for op in found.retire:
                await topics.memory_ops.send(key=op.scope_key.encode(), value=op)
                log.info("aging retired %s: %s", op.memory_id, op.cause)
        except asyncio.CancelledError:
            raise
        except Exception:  # a timer that raises stops for good: the next sweep must still come
            log.exception("aging sweep for gone code failed")

    return age

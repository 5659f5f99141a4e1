"""History agent: keeps the audit trail queryable (Pipeline v2's memory_history).

Consumes ``history`` (key: scope): the records the decide, store and retention stages
write for every proposal and change. Appends them, in batches, to the history store,
where ``memstream history MEMORY_ID`` reads them. Appends are idempotent by record id, so
a redelivery or a replay writes each record once. State: table ``history-stats`` — per
scope, records kept and how many of them asked for a human review, written on a timer
(``agents/counters.py``); ``history-forgotten`` — per scope, when it was last forgotten.

A ``ForgetScope`` on the topic (passed on by the store agent, keyed by the scope, so after
every earlier record of it) purges the scope's records; records of the scope dated no later
than the forget that arrive after it are dropped.
"""

from __future__ import annotations

import asyncio
import logging

import faust

from memstream.agents.base import DeadLetters, batches, state_table
from memstream.agents.counters import counters
from memstream.ports import Providers
from memstream.schemas import ForgetScope, ForgottenScope, HistoryRecord, HistoryStats
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "history"
log = logging.getLogger(__name__)
#: Most records appended at once, and how long to wait to fill a batch once a record came.
BATCH = 256
BATCH_WINDOW = 0.05


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    table = state_table(app, "history-stats", providers.settings.partitions, use_partitioner=True)
    stats = counters(app, table, HistoryStats, STAGE)
    # A batch spans partitions: written through the partitioner, like the stats.
    forgotten = state_table(app, "history-forgotten", providers.settings.partitions, use_partitioner=True)

    async def forget(op: ForgetScope, pending: list[HistoryRecord]) -> None:
        # What came before the forget in this batch is written first, then purged with the rest.
        await write(pending)
        pending.clear()
        while await providers.history.purge_scope(op.scope_key):
            pass
        if op.removed_elsewhere:
            await providers.history.purge_memories(op.removed_elsewhere)
        current: ForgottenScope | None = forgotten.get(op.scope_key)
        if current is None or op.forgotten_at > current.forgotten_at:
            forgotten[op.scope_key] = ForgottenScope(forgotten_at=op.forgotten_at)

    async def append(events: list[faust.types.EventT]) -> None:
        records: list[HistoryRecord] = []
        for event in events:
            if isinstance(event.value, ForgetScope):
                await forget(event.value, records)
            elif isinstance(event.value, HistoryRecord):
                ledger: ForgottenScope | None = forgotten.get(event.value.scope_key)
                if ledger is None or event.value.ts > ledger.forgotten_at:
                    records.append(event.value)
            else:
                await sink.dead_letter(
                    STAGE, f"TypeError: expected HistoryRecord, got {type(event.value).__name__}", event.message
                )
        await write(records)

    async def write(records: list[HistoryRecord]) -> None:
        if not records:
            return
        with stage_span("memstream.history", records=len(records)):
            await providers.history.append(records)
        metrics.EVENTS_PROCESSED.labels(STAGE).inc(len(records))
        per_scope: dict[str, list[HistoryRecord]] = {}
        for record in records:
            per_scope.setdefault(record.scope_key, []).append(record)
        for scope_key, scoped in per_scope.items():
            stats.add(scope_key, HistoryStats(records=len(scoped), review_needed=sum(r.review_needed for r in scoped)))

    @app.agent(topics.history, name=STAGE)
    async def history(stream: faust.StreamT) -> None:
        # Faust's take_events woke every BATCH_WINDOW even with nothing to take: most of an idle
        # worker's wake-ups. batches() waits for a first record, then lingers for more.
        async for events in batches(stream, BATCH, stage=STAGE, linger=BATCH_WINDOW):
            try:
                await append(list(events))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let one batch stop the stage
                log.exception("history batch failed")
                metrics.EVENTS_FAILED.labels(STAGE).inc(len(events))
                for event in events:
                    await sink.dead_letter(STAGE, f"{type(exc).__name__}: {exc}", event.message)

    return history

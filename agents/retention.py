"""Retention agent: Pipeline v2's retention worker, a timer rather than a stream agent.

Consumes nothing: every ``MEMSTREAM_RETENTION_INTERVAL`` seconds it sweeps what expired.
Emits one ``purged`` audit record per hard-deleted tombstone on ``history`` (key: scope).
It runs on exactly one worker, the owner of the one ``consolidation`` partition, so two
workers never purge the same rows. No table: a timer has no event to key state by, and a
sweep's counts go to the log and ``memstream_retention_purged``.

One sweep, in ``memstream.rules.retention``'s order, each step at most ``BATCH_LIMIT`` rows:

1. graph links   the oldest expired tombstones are unlinked from the graph
2. embeddings +  the tombstones are hard-deleted; in memstream a memory and its vector are
3. tombstones    one Qdrant point, so one delete does both
4. history       audit records older than the history window are deleted

A failing step is logged and retried at the next sweep. If step 1 fails, steps 2 and 3 wait
for the next sweep too, so no memory is deleted while graph rows still point at it; step
4 depends on nothing and always runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import faust

from memstream.agents.base import DeadLetters
from memstream.ports import Providers
from memstream.rules import audit
from memstream.rules.retention import BATCH_LIMIT, RetentionWindows, cutoffs
from memstream.schemas import Memory
from memstream.store.base import tombstone_since
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "retention"
log = logging.getLogger(__name__)

#: A sweep's counts: mention rows unlinked (with the entities and relations that went with
#: them), tombstones purged, history records purged, and steps that failed.
COUNTS = ("graph-links", "graph-entities", "graph-relations", "tombstones", "history", "failed-steps")


async def _step(name: str, counts: dict[str, int], run: Callable[[], Awaitable[None]]) -> bool:
    """Run one step; a failure is logged and counted, never raised. True if it succeeded."""
    try:
        await run()
        return True
    except asyncio.CancelledError:
        raise
    except Exception:
        counts["failed-steps"] += 1
        log.exception("retention step %s failed; it runs again at the next sweep", name)
        return False


async def sweep(providers: Providers, topics: Topics, now: datetime) -> dict[str, int]:
    """One retention sweep as of ``now`` (timezone-aware); returns what it deleted."""
    settings = providers.settings
    windows = RetentionWindows(
        tombstone_days=settings.tombstone_retention_days, history_days=settings.history_retention_days
    )
    cutoff = cutoffs(now, windows)
    store, graph = providers.store, providers.graph
    counts = dict.fromkeys(COUNTS, 0)
    due: list[Memory] = []  # what step 1 unlinked, for step 2

    async def unlink() -> None:
        if graph is None:
            return
        due[:] = await store.tombstones(cutoff.tombstone_before, limit=BATCH_LIMIT)
        purged = await graph.purge_memory([m.id for m in due])
        counts["graph-links"] += purged.mentions
        counts["graph-entities"] += purged.entities
        counts["graph-relations"] += purged.relations

    async def purge_tombstones() -> None:
        before = cutoff.tombstone_before
        if graph is not None and len(due) >= BATCH_LIMIT:
            # More may be due than step 1 unlinked: purge only up to the newest it did.
            before = min(before, tombstone_since(due[-1]) + timedelta(microseconds=1))
        purged = await store.purge_superseded(before, limit=BATCH_LIMIT)
        counts["tombstones"] = len(purged)
        # Tombstones tied with the last unlinked one, or superseded since step 1 with an
        # old timestamp, went without being unlinked: unlink them now.
        unlinked = {m.id for m in due}
        stragglers = [m.id for m in purged if m.id not in unlinked]
        if graph is not None and stragglers:
            try:
                late = await graph.purge_memory(stragglers)
            except Exception:
                log.error("retention purged memories %s but could not unlink them from the graph", stragglers)
                raise
            counts["graph-links"] += late.mentions
            counts["graph-entities"] += late.entities
            counts["graph-relations"] += late.relations
        reason = f"retention: tombstone older than {settings.tombstone_retention_days:g} days"
        for i, memory in enumerate(purged):
            record = audit.record(
                "purged",
                scope_key=memory.scope_key,
                ts=now,
                about=f"purge:{memory.id}",
                memory_id=memory.id,
                target_id=memory.superseded_by or "",
                reason=reason,
                origin=STAGE,
            )
            try:
                await topics.history.send(key=memory.scope_key.encode(), value=record)
            except Exception:
                # The memories are gone: no later sweep will find them to record them.
                unrecorded = [m.id for m in purged[i:]]
                log.error("retention purged memories %s but could not record them as purged", unrecorded)
                raise

    async def purge_history() -> None:
        counts["history"] = await providers.history.purge_before(cutoff.history_before, limit=BATCH_LIMIT)

    with stage_span("memstream.retention") as span:
        if await _step("graph-links", counts, unlink):
            await _step("tombstones", counts, purge_tombstones)
        await _step("history", counts, purge_history)
        for name, count in counts.items():
            span.set_attribute(f"retention.{name}", count)
    for step in ("graph-links", "tombstones", "history"):
        metrics.RETENTION_PURGED.labels(step).inc(counts[step])
    log.info(
        "retention sweep: %d graph links unlinked (%d entities, %d relations), %d tombstones purged, "
        "%d history records purged, %d steps failed",
        *(counts[name] for name in COUNTS),
    )
    return counts


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> Any:
    consolidation_topic = topics.consolidation.get_topic_name()

    # Like consolidation's schedule: the owner of the one consolidation partition is the
    # only worker that sweeps (Faust's on_leader needs the leader topic, which is disabled).
    @app.timer(providers.settings.retention_interval, name="retention-sweep")
    async def retention() -> None:
        if not any(tp.topic == consolidation_topic for tp in app.assignor.assigned_actives()):
            return
        try:
            await sweep(providers, topics, datetime.now(UTC))
        except asyncio.CancelledError:
            raise
        except Exception:  # a timer that raises stops for good: the next sweep must still come
            log.exception("retention sweep failed")

    return retention

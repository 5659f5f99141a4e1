"""Pipeline v2's maintenance worker: measure, recommend, repair (or only log), measure again.

One :class:`Maintenance` lives in each ``memstream up`` worker; its ``tick()`` is what the
agent's timer calls (on the owner of the consolidation partition, when autonomousEnabled
and not autonomousFrozen) and what ``memstream doctor`` calls through the API on demand.
It reads the queues through Kafka (end offsets, the consumer group's committed offsets, the
dead letters and the re-drive records) and the store through ``MemoryStore.index_health``;
every decision is a pure rule in ``memstream.rules.maintenance``.

The repairs: ``requeue_dead_letters`` re-drives dead letters (``memstream.ops.redrive``);
``repair_sparse_vectors``, ``repair_indexes`` and ``reembed`` go through the store interface
(index upkeep of memories whose content does not change, so they write to the store directly
rather than through the store agent); ``retention_sweep`` runs the retention worker's sweep.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream.kafka import offsets
from memstream.ops.redrive import RedriveFilter, dead_letters, redrive, redriven
from memstream.rules import maintenance as rules
from memstream.rules.maintenance import Diagnostics, HaltTracker, Limit, QueueHealth, Recommendation, StoreHealth
from memstream.telemetry import metrics
from memstream.topics.catalog import (
    CONSOLIDATION,
    DOCUMENTS,
    EMBEDDED,
    FACTS,
    HISTORY,
    MEMORY_OPS,
    MEMORY_UPDATED,
    PARKED,
    SNAPSHOTS,
    TURNS,
    topic_name,
)

if TYPE_CHECKING:
    from memstream.ports import Providers

log = logging.getLogger(__name__)

#: The topics the stages consume: their records are the pipeline's events, their lag its backlog.
CONSUMED = (TURNS, SNAPSHOTS, PARKED, FACTS, EMBEDDED, MEMORY_OPS, MEMORY_UPDATED, CONSOLIDATION, HISTORY, DOCUMENTS)
#: Most dead letters one requeue re-drives, memories one sparse repair or one re-embed fixes.
REQUEUE_BATCH = 1000
SPARSE_BATCH = 500
REEMBED_BATCH = 100

Sweep = Callable[[datetime], Awaitable[dict[str, int]]]


class Executed(msgspec.Struct, frozen=True):
    action: str
    #: ``done``, ``failed``, or ``skipped`` (halted, cooldown, hourly budget).
    outcome: str
    detail: str


class CycleReport(msgspec.Struct, frozen=True, kw_only=True):
    """One maintenance cycle: what it found, what it did, and what came of it."""

    at: datetime
    mode: str
    before: Diagnostics
    recommendations: list[Recommendation]
    executed: list[Executed] = []
    #: The diagnostics after the repairs, and the change of the health score (execute mode).
    after: Diagnostics | None = None
    delta: float | None = None
    halted: list[str] = []


class Maintenance:
    def __init__(
        self, providers: Providers, *, bootstrap: str, prefix: str, group: str, sweep: Sweep | None = None
    ) -> None:
        self.providers = providers
        self.bootstrap, self.prefix, self.group = bootstrap, prefix, group
        self.sweep = sweep
        self.tracker = HaltTracker()
        #: Epoch seconds of each action's runs within the last hour.
        self.runs: dict[str, list[float]] = {}
        self._committed: dict[str, int] | None = None
        self._lock = asyncio.Lock()
        self.last: CycleReport | None = None

    # -- measuring -----------------------------------------------------------------------

    async def queue_health(self) -> QueueHealth:
        names = [topic_name(self.prefix, spec) for spec in CONSUMED]
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False)
        await consumer.start()
        try:
            await consumer.topics()
            tps = [TopicPartition(n, p) for n in names for p in sorted(consumer.partitions_for_topic(n) or ())]
            # The true ends: Tansu's ListOffsets is short of them (memstream.kafka.offsets).
            ends_by_tp: dict[TopicPartition, int] = await offsets.end_offsets(consumer, tps) if tps else {}
            committed: dict[str, int] = {}
            ends: dict[str, int] = {}
            for tp in tps:
                key = f"{tp.topic}:{tp.partition}"
                ends[key] = ends_by_tp[tp]
                committed[key] = await consumer.committed(tp) or 0
        finally:
            await consumer.stop()
        letters = await dead_letters(self.bootstrap, self.prefix)
        done = await redriven(self.bootstrap, self.prefix)
        parked = topic_name(self.prefix, PARKED)
        stuck = rules.stuck_partitions(self._committed, committed, ends)
        self._committed = committed
        return QueueHealth(
            events=sum(ends.values()),
            # Only what a re-drive can send back: one without its topic or bytes can never recover.
            dead_letters=sum(1 for item in letters if item.id not in done and item.redrivable),
            parked_backlog=sum(max(0, ends[k] - committed[k]) for k in ends if k.rsplit(":", 1)[0] == parked),
            consumer_lag=sum(max(0, ends[k] - committed[k]) for k in ends),
            stuck_partitions=stuck,
        )

    async def store_health(self) -> StoreHealth:
        health = await self.providers.store.index_health()
        return StoreHealth(
            memories=health.memories,
            superseded=health.superseded,
            missing_sparse=health.missing_sparse,
            missing_dense=health.missing_dense,
            missing_indexes=list(health.missing_indexes),
        )

    async def diagnose(self) -> Diagnostics:
        """Pipeline v2's getDiagnostics."""
        return rules.diagnose(await self.queue_health(), await self.store_health())

    # -- repairing -----------------------------------------------------------------------

    def limit(self, action: str) -> Limit:
        """Re-drives have the requeue limits; every store repair the re-embed ones (Pipeline v2's two)."""
        s = self.providers.settings
        if action == "requeue_dead_letters":
            return Limit(s.repair_requeue_cooldown_ms / 1000, s.repair_requeue_hourly_budget)
        return Limit(s.repair_reembed_cooldown_ms / 1000, s.repair_reembed_hourly_budget)

    async def repair(self, action: str, now: datetime) -> str:
        """Run one repair; what it did, in a few words."""
        store = self.providers.store
        if action == "requeue_dead_letters":
            report = await redrive(self.bootstrap, self.prefix, RedriveFilter(limit=REQUEUE_BATCH), by="maintenance")
            return f"re-drove {len(report.sent)} dead letters"
        if action == "repair_sparse_vectors":
            return f"gave BM25 terms to {await store.repair_sparse_vectors(limit=SPARSE_BATCH)} memories"
        if action == "repair_indexes":
            return f"created indexes: {', '.join(await store.repair_indexes()) or 'none'}"
        if action == "retention_sweep":
            if self.sweep is None:
                raise RuntimeError("no retention sweep is available in this process")
            counts = await self.sweep(now)
            return f"purged {counts.get('tombstones', 0)} tombstones"
        if action == "reembed":
            lacking = await store.lacking_dense(limit=REEMBED_BATCH)
            if lacking:
                vectors = await self.providers.embedder.embed_documents([m.text for m in lacking])
                for memory, vector in zip(lacking, vectors, strict=True):
                    await store.upsert(memory, vector)
            return f"re-embedded {len(lacking)} memories"
        raise ValueError(f"unknown repair {action!r}")

    async def _execute(self, recommendation: Recommendation, now: datetime, clock: float) -> Executed:
        action = recommendation.action
        if action in self.tracker.halted:
            return Executed(action, "skipped", f"halted after {rules.HALT_AFTER} runs that did not improve health")
        runs = rules.recent(self.runs.get(action, []), clock)
        refused = rules.refusal(runs, clock, self.limit(action))
        if refused is not None:
            return Executed(action, "skipped", refused)
        self.runs[action] = [*runs, clock]
        try:
            return Executed(action, "done", await self.repair(action, now))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("maintenance repair %s failed", action)
            return Executed(action, "failed", f"{type(exc).__name__}: {exc}"[:300])

    # -- one cycle -----------------------------------------------------------------------

    async def tick(self, *, mode: str | None = None, clock: float | None = None) -> CycleReport:
        """One cycle (Pipeline v2's callable ``tick()``): diagnostics, recommendations, then in
        ``execute`` mode each repair within its limits, diagnostics again, the delta recorded
        and the halt tracker told. ``observe`` only logs. ``clock``: epoch seconds (tests)."""
        mode = mode or self.providers.settings.maintenance_mode
        async with self._lock:  # the timer and a `memstream doctor` never interleave
            clock = time.time() if clock is None else clock
            now = datetime.fromtimestamp(clock, UTC)
            before = await self.diagnose()
            recommendations = rules.recommend(before)
            if not recommendations:
                self.tracker = rules.reset(self.tracker)
            for r in recommendations:
                log.info("maintenance recommends %s: %s", r.action, r.reason)
            report = CycleReport(
                at=now, mode=mode, before=before, recommendations=recommendations, halted=list(self.tracker.halted)
            )
            if mode == "execute" and recommendations:
                executed = [await self._execute(r, now, clock) for r in recommendations]
                after = await self.diagnose()
                delta = round(after.score - before.score, 6)
                for done in executed:
                    if done.outcome != "skipped":
                        self.tracker = rules.record_run(self.tracker, done.action, improved=delta > 0)
                report = msgspec.structs.replace(
                    report, executed=executed, after=after, delta=delta, halted=list(self.tracker.halted)
                )
                log.info("maintenance: health %.3f -> %.3f (%+.3f)", before.score, after.score, delta)
            metrics.HEALTH_SCORE.set((report.after or before).score)
            if report.delta is not None:
                metrics.HEALTH_DELTA.set(report.delta)
            for done in report.executed:
                metrics.REPAIRS.labels(done.action, done.outcome).inc()
            self.last = report
            return report


def render(report: dict[str, Any]) -> str:
    """A cycle report (as the API returns it) for a terminal."""
    before = report["before"]
    q, s = before["queue"], before["store"]
    dead_rate = q["dead_letters"] / q["events"] if q["events"] else 0.0
    ratio = s["superseded"] / s["memories"] if s["memories"] else 0.0
    lines = [
        f"health {before['score']:.3f}  ({report['mode']}, {report['at']})",
        f"  queue:   {q['events']} events, {q['dead_letters']} dead letters not re-driven ({dead_rate:.2%}), "
        f"parked backlog {q['parked_backlog']}, consumer lag {q['consumer_lag']}, "
        f"stuck partitions: {', '.join(q['stuck_partitions']) or 'none'}",
        f"  index:   {s['memories']} memories, {s['missing_sparse']} without BM25 terms, "
        f"{s['missing_dense']} without their embedding, missing indexes: {', '.join(s['missing_indexes']) or 'none'}",
        f"  storage: {s['superseded']} tombstones of {s['memories']} memories ({ratio:.1%})",
    ]
    recommendations = report["recommendations"]
    lines.append("recommended:" if recommendations else "recommended: nothing")
    lines.extend(f"  {r['action']}: {r['reason']}" for r in recommendations)
    if report["executed"]:
        lines.append("executed:")
        lines.extend(f"  {e['action']}: {e['outcome']} ({e['detail']})" for e in report["executed"])
    if report["after"] is not None:
        lines.append(f"health after repairs {report['after']['score']:.3f} ({report['delta']:+.3f})")
    lines.append(f"halted: {', '.join(report['halted']) or 'none'}")
    return "\n".join(lines)

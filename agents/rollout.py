"""Rollout agent: Phase 1 of the consolidation spec, one idle session distilled at a time.

Consumes ``snapshots`` (key: session key) and keeps, per session key (the session id within
its project and user, memstream.identity.session_key; the rollout's id is the session's own id,
as memories carry it, so Phase 2's usage counts match), its
privacy-stripped, redacted exchanges in table ``rollout-state``. (A state kept under a bare
session id before keys named the tenant is still distilled when idle; new exchanges gather
under the session key.) A timer looks for sessions idle long
enough and inside the age window, at most ``MEMSTREAM_PHASE1_SCAN_LIMIT`` per look, and
distils them with at most ``MEMSTREAM_PHASE1_CONCURRENCY`` LLM calls at once. Each output
(``RolloutOutput``) goes to the one-partition ``consolidation`` topic, followed, after
``MEMSTREAM_CONSOLIDATION_DEBOUNCE`` seconds of quiet, by a request for Phase 2.

Claims: a session is distilled only by the worker that owns its snapshot partition, so
two workers never distil the same rollout (Kafka's partition assignment is the lease).
A failed job is retried after a doubling backoff instead of hot-looping.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.identity import session_id_of_key, session_key, session_user_key
from memstream.kafka.ledger import ledger_of, stale_window
from memstream.ports import Providers
from memstream.rules import phase1
from memstream.schemas import ConsolidationRequest, RolloutOutput, RolloutState, Snapshot
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "rollout"
log = logging.getLogger(__name__)


class Debouncer:
    """Calls ``fire`` once ``delay`` seconds have passed without another ``poke``."""

    def __init__(self, delay: float, fire: Any) -> None:
        self.delay = delay
        self.fire = fire
        self._handle: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def poke(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = asyncio.get_running_loop().call_later(self.delay, self._run)

    def _run(self) -> None:
        self._handle = None
        task = asyncio.ensure_future(self.fire())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    # Written by the scan timer too, outside any stream event: through the partitioner.
    rollouts = state_table(app, "rollout-state", settings.partitions, use_partitioner=True, versioned=True)
    snapshot_topic = topics.snapshots.get_topic_name()
    idle = timedelta(seconds=settings.phase1_idle_seconds)
    max_age = timedelta(days=settings.phase1_max_age_days)
    slots = asyncio.Semaphore(settings.phase1_concurrency)
    ledger = ledger_of(app)

    async def request_consolidation() -> None:
        await topics.consolidation.send(
            key=b"phase1", value=ConsolidationRequest(reason="phase1", ts=datetime.now(UTC))
        )

    debouncer = Debouncer(settings.consolidation_debounce, request_consolidation)

    async def handle(value: Any, event: EventT) -> None:
        snapshot = expect(value, Snapshot)
        if snapshot.mode not in ("normal", "raw", "summary") or not snapshot.exchange:
            return  # init snapshots read project files, not a conversation
        skey = session_key(snapshot.session_id, snapshot.project_key, snapshot.user_key)
        state: RolloutState = rollouts.get(skey) or rollouts.adopt(skey) or RolloutState()
        if snapshot.turn_index <= state.turns and snapshot.exchange in state.exchanges:
            return  # a redelivery, or the summary-mode twin of a normal snapshot
        rollouts[skey] = msgspec.structs.replace(
            state,
            partition=event.message.partition,
            project=snapshot.project,
            scope_key=snapshot.project_key,
            exchanges=phase1.add_exchange(state.exchanges, snapshot.exchange, max_chars=settings.phase1_max_chars),
            turns=max(state.turns, snapshot.turn_index),
            first_ts=state.first_ts or snapshot.ts,
            last_ts=max(state.last_ts or snapshot.ts, snapshot.ts),
        )

    async def distil(session_id: str, claimed: RolloutState) -> bool:
        """One Phase 1 job; True if it produced an output event."""
        now = datetime.now(UTC)
        llm = providers.llm
        model = llm.model if llm is not None else ""
        try:
            async with slots:
                with stage_span("memstream.phase1", session=session_id, turns=claimed.turns):
                    if llm is None:
                        distilled = phase1.without_model(claimed)
                    else:
                        completion = await llm.complete(phase1.SYSTEM, phase1.prompt(claimed), max_tokens=2048)
                        distilled, model = phase1.parse(completion.text), completion.model
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            current: RolloutState = rollouts.get(session_id) or claimed
            failures = current.failures + 1
            when = phase1.retry_at(now, failures, base=settings.phase1_retry_delay, cap=settings.phase1_retry_delay_max)
            log.warning("Phase 1 of session %s failed (attempt %d, retry at %s): %s", session_id, failures, when, exc)
            metrics.EVENTS_FAILED.labels(STAGE).inc()
            rollouts[session_id] = msgspec.structs.replace(current, failures=failures, retry_at=when, outcome="failed")
            return False
        outcome: Literal["succeeded", "succeeded_no_output"] = "succeeded_no_output" if distilled.empty else "succeeded"
        await topics.consolidation.send(
            key=claimed.scope_key.encode(),
            value=RolloutOutput(
                # The session's own id, as memories carry it: Phase 2 matches usage (MemoryUsage's
                # rollout_ids, the session ids of what search returned) against it.
                rollout_id=session_id_of_key(session_id),
                scope_key=claimed.scope_key,
                project=claimed.project,
                outcome=outcome,
                raw_memory=distilled.raw_memory,
                rollout_summary=distilled.rollout_summary,
                slug=distilled.slug,
                turns=claimed.turns,
                source_updated_at=claimed.last_ts or now,
                generated_at=now,
                model=model,
            ),
        )
        metrics.EVENTS_PROCESSED.labels(STAGE).inc()
        current = rollouts.get(session_id) or claimed
        # Turns that arrived during the call are left for the next distillation.
        rollouts[session_id] = msgspec.structs.replace(
            current, distilled_turns=claimed.turns, failures=0, retry_at=None, outcome=outcome
        )
        return True

    @app.agent(topics.snapshots, name=STAGE)
    async def rollout(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    @app.timer(settings.phase1_scan_interval, name="rollout-scan")
    async def scan() -> None:
        rollouts.adopt_all()
        owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == snapshot_topic}
        if not owned:
            return
        now = datetime.now(UTC)
        for key, state in list(rollouts.items()):
            if state is None or state.partition not in owned or not state.exchanges:
                continue
            if stale_window(state.last_ts, ledger.latest(state.scope_key, session_user_key(key))):
                # Forgotten since its last exchange: its words leave the table (and the newest
                # record of its changelog) now; nothing of them is distilled.
                rollouts[key] = msgspec.structs.replace(state, exchanges=[], distilled_turns=state.turns)
        due = [
            (session_id, state)
            for session_id, state in list(rollouts.items())
            if state is not None and state.partition in owned and phase1.is_due(state, now, idle=idle, max_age=max_age)
        ][: settings.phase1_scan_limit]
        if not due:
            return
        produced = await asyncio.gather(*(distil(session_id, state) for session_id, state in due))
        if any(produced):
            debouncer.poke()

    return rollout

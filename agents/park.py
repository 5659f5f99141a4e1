"""Park agent: retries extraction of snapshots whose providers all failed.

Consumes ``parked`` (key: session key). Emits ``snapshots`` (key: session key,
memstream.identity.session_key): each parked
snapshot, with its attempt count, once its backoff has passed. Waiting here holds only the
parked partition; the live pipeline and the agent hosts never wait on an LLM outage.
State: table ``park-stats`` — per session key, snapshots sent back for another attempt.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.identity import session_key
from memstream.ports import Providers
from memstream.schemas import ParkedSnapshot, ParkStats
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "park"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    stats = state_table(app, "park-stats", settings.partitions)

    async def handle(value: Any, event: EventT) -> None:
        parked = expect(value, ParkedSnapshot)
        now = datetime.now(UTC)
        since = parked.snapshot.parked_since or now
        oldest = metrics.PARKED_OLDEST_SECONDS.labels("extract")
        oldest.set((now - since).total_seconds())  # the parked topic is roughly oldest first
        wait = (parked.not_before - now).total_seconds()
        # Never longer than the configured cap (plus jitter): a clock jump must not stall retries.
        await asyncio.sleep(min(max(0.0, wait), settings.park_delay_max + 1.0))
        snapshot = parked.snapshot
        skey = session_key(snapshot.session_id, snapshot.project_key, snapshot.user_key)
        with stage_span("memstream.park", attempt=snapshot.attempt):
            await topics.snapshots.send(key=skey.encode(), value=snapshot)
        oldest.set(0)
        current: ParkStats = stats.get(skey) or ParkStats()
        stats[skey] = ParkStats(retried=current.retried + 1)

    @app.agent(topics.parked, name=STAGE)
    async def park(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return park

"""Maintenance agent: Pipeline v2's maintenance worker, a timer rather than a stream agent.

Consumes nothing. Every ``MEMSTREAM_MAINTENANCE_INTERVAL_MS`` it runs one cycle of
``memstream.ops.maintenance.Maintenance`` (diagnostics, recommendations, and in ``execute`` mode
the rate-limited repairs), on exactly one worker: like retention, the owner of the one
``consolidation`` partition. With ``MEMSTREAM_AUTONOMOUS_ENABLED`` off or
``MEMSTREAM_AUTONOMOUS_FROZEN`` on, the timer is never declared, but the worker's ``tick()``
stays callable on demand (``memstream doctor``, through the API). Emits what its repairs emit:
re-driven events on their own topics, retention's ``purged`` records on ``history``. No table:
its state (rate limits, the halt tracker) lives for the lifetime of the worker, as the spec's.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import faust

from memstream.agents import retention
from memstream.agents.base import DeadLetters
from memstream.ops.maintenance import Maintenance
from memstream.ports import Providers
from memstream.topics.binding import Topics

STAGE = "maintenance"
log = logging.getLogger(__name__)


def bootstrap_of(app: faust.App) -> str:
    """The brokers the app talks to, as ``host:port[,host:port]``."""
    return ",".join(f"{url.host}:{url.port}" for url in app.conf.broker)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> Any:
    settings = providers.settings

    async def sweep(now: datetime) -> dict[str, int]:
        return await retention.sweep(providers, topics, now)

    worker = Maintenance(
        providers, bootstrap=bootstrap_of(app), prefix=settings.topic_prefix, group=app.conf.id, sweep=sweep
    )
    app.maintenance = worker  # type: ignore[attr-defined]  # the API's `memstream doctor` calls its tick()
    if not settings.autonomous_enabled or settings.autonomous_frozen:
        return worker
    consolidation_topic = topics.consolidation.get_topic_name()

    @app.timer(settings.maintenance_interval_ms / 1000, name="maintenance-cycle")
    async def maintenance() -> None:
        if not any(tp.topic == consolidation_topic for tp in app.assignor.assigned_actives()):
            return
        try:
            await worker.tick()
        except asyncio.CancelledError:
            raise
        except Exception:  # a timer that raises stops for good: the next cycle must still come
            log.exception("maintenance cycle failed")

    return worker

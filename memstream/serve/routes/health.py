"""Health and metrics: ``/health`` (readiness), ``/health/live`` (liveness), ``/metrics`` (admin)."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import require_admin
from memstream.serve.context import JSON, caller, context_of
from memstream.telemetry import metrics

log = logging.getLogger(__name__)


async def live(request: Request) -> Response:
    """Liveness: 200 unless a Faust service crashed (then the worker must be restarted)."""
    ctx = context_of(request)
    status = ctx.health()
    return JSON({"live": status.live, "problems": status.problems}, status_code=200 if status.live else 503)


async def health(request: Request) -> Response:
    """Readiness: 200 once started and while every consumer, agent and partition moves; else 503."""
    ctx = context_of(request)
    llm = ctx.providers.llm
    status = ctx.health()
    return JSON(
        {
            "status": status.label,
            "live": status.live,
            "ready": status.ready,
            "problems": status.problems,
            "raw_mode": ctx.providers.raw_mode,
            "llm": [f"{one.provider}/{one.model}" for one in getattr(llm, "providers", [llm])] if llm else None,
            "embedding_model": ctx.providers.embedder.model,
        },
        status_code=200 if status.ready else 503,
    )


async def prometheus(request: Request) -> Response:
    ctx = context_of(request)
    require_admin(caller(request))
    try:
        ctx.update_lag()
    except Exception:  # metrics never break serving
        log.debug("could not update the consumer lag", exc_info=True)
    # Prometheus reads plain text as exposition format 0.0.4.
    return Response(metrics.exposition(), media_type="text/plain")


ROUTES = [
    Route("/health", health),
    Route("/health/live", live),
    Route("/metrics", prometheus),
]

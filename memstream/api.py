"""The HTTP API of ``memstream up``, served by Faust's own web server.

GET /health             readiness (200 ready, 503 starting or unhealthy), what runs, with which providers
GET /health/live        liveness (503 once a Faust service crashed: restart the worker)
GET /search?q=&project= semantic search over a project's (and the user's) memories
GET /block?project=&q=  the [MEMORY] block, as text
GET /memories           every stored memory, superseded ones included
GET /history?memory_id= the audit trail of one memory, oldest first (or ?scope= / ?project=:
                        a scope's newest records, returned oldest first)
GET /metrics            Prometheus metrics
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.web import Request, Response, View

from memstream import metrics, recall
from memstream.bootstrap import Providers
from memstream.health import Status as HealthStatus
from memstream.identity import project_key, user_key
from memstream.schemas import Memory, MemoryUsage
from memstream.topics.binding import Topics

log = logging.getLogger(__name__)


class ApiError(ValueError):
    pass


async def record_usage(topics: Topics, memories: Sequence[Memory]) -> None:
    """Tell Phase 2 which rollouts (sessions) the returned memories came from (seed 004's usage)."""
    rollouts = sorted({m.session_id for m in memories if m.session_id})
    if not rollouts:
        return
    try:
        await topics.consolidation.send(
            key=b"usage",
            value=MemoryUsage(rollout_ids=rollouts, memory_ids=[m.id for m in memories], ts=datetime.now(UTC)),
        )
    except Exception:  # usage is a ranking signal: never fail a search over it
        log.warning("could not record memory usage", exc_info=True)


def update_lag(app: faust.App) -> None:
    """Consumer lag per assigned partition: the partition's end minus the next offset to read."""
    try:
        consumer = app.consumer
        parked = 0
        for tp in consumer.assignment():
            if tp.topic.endswith("-changelog"):  # table changelogs are only read on recovery
                continue
            highwater = consumer.highwater(tp)
            read = consumer._read_offset.get(tp)  # Faust keeps no public "position"
            if highwater is None:
                continue
            lag = max(0, highwater - (read + 1 if read is not None else 0))
            metrics.CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(lag)
            if tp.topic.endswith(".parked"):  # parked and not yet retried: what the parked topic holds unread
                parked += lag
        metrics.PARKED.set(parked)
    except Exception:  # metrics never break serving
        return


def health_status(app: faust.App) -> HealthStatus:
    """The runner's view of the worker; "starting" until the runner has installed it."""
    check = getattr(app, "health", None)
    if check is None:
        return HealthStatus(live=True, ready=False, problems=["starting: the worker is not started yet"])
    status: HealthStatus = check()
    return status


def _scope_args(request: Request, providers: Providers) -> tuple[str, str]:
    project = request.query.get("project", "")
    if not project:
        raise ApiError("the 'project' parameter is required (the project directory)")
    user = request.query.get("user", "") or providers.settings.user
    return project_key(project), user_key(user)


def register(app: faust.App, providers: Providers, topics: Topics) -> None:
    def error(view: View, message: str, status: int = 400) -> Response:
        return view.json({"error": message}, status=status)

    @app.page("/health/live")
    async def live(self: View, request: Request) -> Response:
        """Liveness: 200 unless a Faust service crashed (then the worker must be restarted)."""
        status = health_status(app)
        return self.json({"live": status.live, "problems": status.problems}, status=200 if status.live else 503)

    @app.page("/health")
    async def health(self: View, request: Request) -> Response:
        """Readiness: 200 once started and while every consumer, agent and partition moves; else 503."""
        status = health_status(app)
        return self.json(
            {
                "status": status.label,
                "live": status.live,
                "ready": status.ready,
                "problems": status.problems,
                "raw_mode": providers.raw_mode,
                "llm": [f"{llm.provider}/{llm.model}" for llm in getattr(providers.llm, "providers", [providers.llm])]
                if providers.llm
                else None,
                "embedding_model": providers.embedder.model,
                "memories": await providers.store.count(),
            },
            status=200 if status.ready else 503,
        )

    @app.page("/metrics")
    async def prometheus(self: View, request: Request) -> Response:
        update_lag(app)
        # aiohttp refuses parameters in content_type; Prometheus reads plain text as format 0.0.4.
        return self.bytes(metrics.exposition(), content_type="text/plain")

    @app.page("/memories")
    async def memories(self: View, request: Request) -> Response:
        """Every stored memory, superseded ones included (for replays and audits), newest first."""
        try:
            limit = max(1, min(int(request.query.get("limit", "10000")), 100_000))
        except ValueError:
            return error(self, "'limit' must be a whole number")
        stored = await providers.store.list(None, include_superseded=True, limit=limit)
        return self.json({"memories": [msgspec.to_builtins(m) for m in stored]})

    @app.page("/history")
    async def history(self: View, request: Request) -> Response:
        """Audit records about a memory, or the newest of a scope's, oldest first."""
        memory_id = request.query.get("memory_id", "").strip()
        scope = request.query.get("scope", "").strip()
        project = request.query.get("project", "").strip()
        if not (memory_id or scope or project):
            return error(self, "one of the 'memory_id', 'scope' or 'project' parameters is required")
        try:
            limit = max(1, min(int(request.query.get("limit", "100")), 10_000))
        except ValueError:
            return error(self, "'limit' must be a whole number")
        about: dict[str, Any]
        if memory_id:
            about = {"memory_id": memory_id}
            records = await providers.history.for_memory(memory_id, limit=limit)
        else:
            scope_key = scope or project_key(project)
            about = {"scope_key": scope_key}
            # The newest ``limit`` of the scope, read newest first, served in time order.
            records = list(reversed(await providers.history.for_scope(scope_key, limit=limit)))
        return self.json({**about, "records": [msgspec.to_builtins(r) for r in records]})

    @app.page("/search")
    async def search(self: View, request: Request) -> Response:
        query = request.query.get("q", "").strip()
        if not query:
            return error(self, "the 'q' parameter is required")
        try:
            project, user = _scope_args(request, providers)
            limit = int(request.query.get("limit", "10"))
        except (ApiError, ValueError) as exc:
            return error(self, str(exc))
        hits = await recall.search(providers, query, project, user, limit=max(1, min(limit, 100)))
        await record_usage(topics, [hit.memory for hit in hits])
        results: list[dict[str, Any]] = [
            {"distance": round(hit.distance, 4), **msgspec.to_builtins(hit.memory)} for hit in hits
        ]
        return self.json({"query": query, "results": results})

    @app.page("/block")
    async def block(self: View, request: Request) -> Response:
        try:
            project, user = _scope_args(request, providers)
        except ApiError as exc:
            return error(self, str(exc))
        shown = await recall.block_memories(providers, project, user, request.query.get("q", "").strip())
        await record_usage(topics, shown.memories)
        return self.text(shown.text)

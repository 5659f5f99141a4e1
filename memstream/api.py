"""The HTTP API: a Starlette (ASGI) app built from an explicit context, no Faust in sight.

GET /health             what runs, with which providers
GET /search?q=&project= hybrid search over a project's (and the user's) memories
GET /block?project=&q=  the [MEMORY] block, as text
GET /memories           every stored memory, superseded ones included
GET /history?memory_id= the audit trail of one memory, oldest first (or ?scope= / ?project=:
                        a scope's newest records, returned oldest first)
GET /metrics            Prometheus metrics

``memstream up`` serves it from inside its Faust worker (``memstream.app``), which fills the
context with the callables only a running pipeline has: the consumer lag and the producer that
records memory usage. A process without Faust can build the same app with those left out.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from memstream import metrics, recall
from memstream.identity import project_key, user_key
from memstream.schemas import Memory, MemoryUsage

if TYPE_CHECKING:
    from memstream.bootstrap import Providers

log = logging.getLogger(__name__)

#: Sends one usage record to Phase 2 (the consolidation topic).
UsageSink = Callable[[MemoryUsage], Awaitable[None]]


async def _no_usage(usage: MemoryUsage) -> None:
    return None


def _no_lag() -> None:
    return None


@dataclass(frozen=True)
class ApiContext:
    """What the API reads and calls. Everything it needs from a running pipeline is a callable here."""

    providers: Providers
    #: Records which memories a read returned (Phase 2's usage signal); a no-op without a producer.
    record_usage: UsageSink = _no_usage
    #: Refreshes the consumer-lag gauges before /metrics is served; a no-op without a consumer.
    update_lag: Callable[[], None] = _no_lag
    #: Extra routes and ASGI apps mounted beside the built-in ones (e.g. MCP at /mcp).
    routes: Sequence[BaseRoute] = field(default_factory=list)
    #: Context managers entered for the app's lifetime (e.g. the MCP session manager).
    lifespans: Sequence[Callable[[], AbstractAsyncContextManager[Any]]] = field(default_factory=list)


class ApiError(ValueError):
    """A bad request, reported as ``{"error": ...}`` with status 400."""


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


def error(message: str, status: int = 400) -> Response:
    return JSON({"error": message}, status_code=status)


def _limit(request: Request, default: int, most: int) -> int:
    try:
        return max(1, min(int(request.query_params.get("limit", str(default))), most))
    except ValueError:
        raise ApiError("'limit' must be a whole number") from None


def scope_args(request: Request, providers: Providers) -> tuple[str, str]:
    project = request.query_params.get("project", "")
    if not project:
        raise ApiError("the 'project' parameter is required (the project directory)")
    user = request.query_params.get("user", "") or providers.settings.user
    return project_key(project), user_key(user)


async def record_usage(ctx: ApiContext, memories: Sequence[Memory]) -> None:
    """Tell Phase 2 which rollouts (sessions) the returned memories came from (seed 004's usage)."""
    rollouts = sorted({m.session_id for m in memories if m.session_id})
    if not rollouts:
        return
    try:
        await ctx.record_usage(
            MemoryUsage(rollout_ids=rollouts, memory_ids=[m.id for m in memories], ts=datetime.now(UTC))
        )
    except Exception:  # usage is a ranking signal: never fail a read over it
        log.warning("could not record memory usage", exc_info=True)


def create_app(ctx: ApiContext) -> ASGIApp:
    """The API over ``ctx``; serve it with any ASGI server."""
    providers = ctx.providers

    async def health(request: Request) -> Response:
        llm = providers.llm
        return JSON(
            {
                "status": "ok",
                "raw_mode": providers.raw_mode,
                "llm": [f"{one.provider}/{one.model}" for one in getattr(llm, "providers", [llm])] if llm else None,
                "embedding_model": providers.embedder.model,
                "memories": await providers.store.count(),
            }
        )

    async def prometheus(request: Request) -> Response:
        try:
            ctx.update_lag()
        except Exception:  # metrics never break serving
            log.debug("could not update the consumer lag", exc_info=True)
        # Prometheus reads plain text as exposition format 0.0.4.
        return Response(metrics.exposition(), media_type="text/plain")

    async def memories(request: Request) -> Response:
        """Every stored memory, superseded ones included (for replays and audits), newest first."""
        try:
            limit = _limit(request, 10_000, 100_000)
        except ApiError as exc:
            return error(str(exc))
        stored = await providers.store.list(None, include_superseded=True, limit=limit)
        return JSON({"memories": [msgspec.to_builtins(m) for m in stored]})

    async def history(request: Request) -> Response:
        """Audit records about a memory, or the newest of a scope's, oldest first."""
        memory_id = request.query_params.get("memory_id", "").strip()
        scope = request.query_params.get("scope", "").strip()
        project = request.query_params.get("project", "").strip()
        if not (memory_id or scope or project):
            return error("one of the 'memory_id', 'scope' or 'project' parameters is required")
        try:
            limit = _limit(request, 100, 10_000)
        except ApiError as exc:
            return error(str(exc))
        about: dict[str, Any]
        if memory_id:
            about = {"memory_id": memory_id}
            records = await providers.history.for_memory(memory_id, limit=limit)
        else:
            scope_key = scope or project_key(project)
            about = {"scope_key": scope_key}
            # The newest ``limit`` of the scope, read newest first, served in time order.
            records = list(reversed(await providers.history.for_scope(scope_key, limit=limit)))
        return JSON({**about, "records": [msgspec.to_builtins(r) for r in records]})

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if not query:
            return error("the 'q' parameter is required")
        try:
            project, user = scope_args(request, providers)
            limit = _limit(request, 10, 100)
        except ApiError as exc:
            return error(str(exc))
        hits = await recall.search(providers, query, project, user, limit=limit)
        await record_usage(ctx, [hit.memory for hit in hits])
        results: list[dict[str, Any]] = [
            {"distance": round(hit.distance, 4), **msgspec.to_builtins(hit.memory)} for hit in hits
        ]
        return JSON({"query": query, "results": results})

    async def block(request: Request) -> Response:
        try:
            project, user = scope_args(request, providers)
        except ApiError as exc:
            return error(str(exc))
        query = request.query_params.get("q", "").strip()
        shown = await recall.block_memories(providers, project, user, query)
        await record_usage(ctx, shown.memories)
        return PlainTextResponse(shown.text)

    routes: list[BaseRoute] = [
        Route("/health", health),
        Route("/metrics", prometheus),
        Route("/memories", memories),
        Route("/history", history),
        Route("/search", search),
        Route("/block", block),
        *ctx.routes,
    ]
    return Starlette(routes=routes, lifespan=_lifespan(ctx))


def _lifespan(ctx: ApiContext) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for enter in ctx.lifespans:
                await stack.enter_async_context(enter())
            yield

    return lifespan

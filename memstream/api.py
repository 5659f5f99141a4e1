"""The HTTP API: a Starlette (ASGI) app built from an explicit context, no Faust in sight.

Every route but /health needs ``Authorization: Bearer <token>`` (``memstream.guard``, which
wraps the whole app, mounted apps included); reads are scoped by the token's principal,
never by a parameter the caller chooses.

GET /health             liveness: what runs, with which providers (no token needed)
GET /search?q=&project= search over a project's memories and the caller's own
GET /block?project=&q=  the [MEMORY] block, as text (the same scopes)
POST /turns             publish turns (JSON list) as the caller: its user, its projects
GET /memories           every stored memory, superseded ones included          (admin)
GET /history?memory_id= the audit trail of one memory, oldest first (or ?scope= / ?project=:
                        a scope's newest records, returned oldest first)          (admin)
GET /metrics            Prometheus metrics                                         (admin)
POST /admin/forget      forget a user or a project (JSON: user or project)        (admin)

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
from memstream.auth import AuthError, FailureLimiter, Principal, TokenStore, check_publish, read_scopes, require_admin
from memstream.guard import AuthMiddleware, principal_of
from memstream.identity import project_key
from memstream.schemas import ForgetScope, Memory, MemoryUsage, Turn

if TYPE_CHECKING:
    from memstream.bootstrap import Providers

log = logging.getLogger(__name__)

#: Sends one usage record to Phase 2 (the consolidation topic).
UsageSink = Callable[[MemoryUsage], Awaitable[None]]
#: Sends events to a topic of the pipeline (turns, or the forgotten ledger).
TurnSink = Callable[[Sequence[Turn]], Awaitable[None]]
ForgetSink = Callable[[ForgetScope], Awaitable[None]]
#: The longest query, project path and request body the API reads.
MAX_QUERY_CHARS = 4_000
MAX_PROJECT_CHARS = 4_096
MAX_BODY_BYTES = 1_000_000


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
    #: The tokens callers present (``memstream token``); None only in open mode.
    tokens: TokenStore | None = None
    #: Open mode (MEMSTREAM_API_OPEN, loopback only): every caller is this principal.
    open_principal: Principal | None = None
    #: Publishes turns (POST /turns) and forgets (POST /admin/forget); None: those routes answer 503.
    publish_turns: TurnSink | None = None
    publish_forget: ForgetSink | None = None
    limiter: FailureLimiter = field(default_factory=FailureLimiter)

    @classmethod
    def auth_from(cls, settings: Any) -> dict[str, Any]:
        """The ``tokens``/``open_principal`` pair the settings ask for (open mode, or the token file)."""
        if settings.api_open:
            principal = Principal(user=settings.user, all_projects=True, admin=True, label="open mode")
            return {"open_principal": principal}
        return {"tokens": TokenStore(settings.tokens_file)}


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


#: Parameters that once chose whose memories to read; the token decides now, and asking is an error.
_CALLER_CHOSEN = ("user", "scope", "scope_key", "user_key")


def caller(request: Request) -> Principal:
    principal = principal_of(request.scope)
    if principal is None:  # only a public route has none, and public routes do not call this
        raise AuthError("a bearer token is required")
    return principal


def project_param(value: str) -> str:
    """A project's key from an absolute directory (or a ``p_…`` key); bad input is a 400."""
    value = value.strip()
    if not value:
        raise ApiError("the 'project' parameter is required (the project directory)")
    if len(value) > MAX_PROJECT_CHARS or "\x00" in value:
        raise ApiError("the 'project' parameter is not a directory path")
    if value.startswith("p_") and len(value) == 18:
        return value
    if not value.startswith("/"):
        # A relative path would be resolved against the server's own directory.
        raise ApiError("the 'project' parameter must be an absolute directory path")
    return project_key(value)


def read_scope_keys(request: Request) -> list[str]:
    """The scope keys this caller may read for the request's project (403 when none)."""
    asked = [name for name in _CALLER_CHOSEN if name in request.query_params]
    if asked:
        raise ApiError(f"'{asked[0]}' is not a parameter: whose memories are read follows from the token")
    return read_scopes(caller(request), project_param(request.query_params.get("project", "")))


def query_param(request: Request, *, required: bool) -> str:
    query = request.query_params.get("q", "").strip()
    if required and not query:
        raise ApiError("the 'q' parameter is required")
    if len(query) > MAX_QUERY_CHARS:
        raise ApiError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    return query


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
            }
        )

    async def prometheus(request: Request) -> Response:
        require_admin(caller(request))
        try:
            ctx.update_lag()
        except Exception:  # metrics never break serving
            log.debug("could not update the consumer lag", exc_info=True)
        # Prometheus reads plain text as exposition format 0.0.4.
        return Response(metrics.exposition(), media_type="text/plain")

    async def memories(request: Request) -> Response:
        """Every stored memory, superseded ones included (for replays and audits), newest first."""
        require_admin(caller(request))
        try:
            limit = _limit(request, 10_000, 100_000)
        except ApiError as exc:
            return error(str(exc))
        stored = await providers.store.list(None, include_superseded=True, limit=limit)
        return JSON({"memories": [msgspec.to_builtins(m) for m in stored]})

    async def history(request: Request) -> Response:
        """Audit records about a memory, or the newest of a scope's, oldest first."""
        require_admin(caller(request))
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
            try:
                scope_key = scope or project_param(project)
            except ApiError as exc:
                return error(str(exc))
            about = {"scope_key": scope_key}
            # The newest ``limit`` of the scope, read newest first, served in time order.
            records = list(reversed(await providers.history.for_scope(scope_key, limit=limit)))
        return JSON({**about, "records": [msgspec.to_builtins(r) for r in records]})

    async def search(request: Request) -> Response:
        try:
            query = query_param(request, required=True)
            keys = read_scope_keys(request)
            limit = _limit(request, 10, 100)
        except ApiError as exc:
            return error(str(exc))
        hits = await recall.search_scopes(providers, query, keys, limit=limit)
        await record_usage(ctx, [hit.memory for hit in hits])
        results: list[dict[str, Any]] = [
            {"distance": round(hit.distance, 4), **msgspec.to_builtins(hit.memory)} for hit in hits
        ]
        return JSON({"query": query, "results": results})

    async def block(request: Request) -> Response:
        try:
            query = query_param(request, required=False)
            keys = read_scope_keys(request)
        except ApiError as exc:
            return error(str(exc))
        shown = await recall.block_scopes(providers, keys, query)
        await record_usage(ctx, shown.memories)
        return PlainTextResponse(shown.text)

    async def turns(request: Request) -> Response:
        """Publish turns as the caller: each turn's project must be one of its projects, its user
        (if given) the caller's; the caller's user is filled in."""
        principal = caller(request)
        if ctx.publish_turns is None:
            return error("this process does not publish turns", 503)
        try:
            given = msgspec.json.decode(await _body(request), type=list[Turn])
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return error(f"the body must be a JSON list of turns: {exc}")
        checked = []
        for turn in given:
            if not turn.project.startswith("/"):
                return error("a turn's project must be an absolute directory path")
            check_publish(principal, project_key(turn.project), turn.user)
            checked.append(msgspec.structs.replace(turn, user=principal.user))
        await ctx.publish_turns(checked)
        return JSON({"published": len(checked)}, status_code=202)

    async def forget(request: Request) -> Response:
        """Forget a user or a project, through the pipeline (memstream.agents.forget)."""
        from memstream.forget import ForgetError, forget_event

        principal = caller(request)
        require_admin(principal)
        if ctx.publish_forget is None:
            return error("this process does not publish forgets", 503)
        try:
            body = msgspec.json.decode(await _body(request), type=dict[str, str])
            if set(body) - {"user", "project"}:
                raise ForgetError("the body takes 'user' or 'project'")
            project = body.get("project", "")
            if project:
                project_param(project)
            event = forget_event(user=body.get("user", ""), project=project, requested_by=principal.describe())
        except (msgspec.ValidationError, msgspec.DecodeError, ForgetError, ApiError) as exc:
            return error(str(exc))
        await ctx.publish_forget(event)
        return JSON(
            {"scope": event.scope, "scope_key": event.scope_key, "forgotten_at": event.forgotten_at.isoformat()},
            status_code=202,
        )

    routes: list[BaseRoute] = [
        Route("/health", health),
        Route("/metrics", prometheus),
        Route("/memories", memories),
        Route("/history", history),
        Route("/search", search),
        Route("/block", block),
        Route("/turns", turns, methods=["POST"]),
        Route("/admin/forget", forget, methods=["POST"]),
        *ctx.routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=_lifespan(ctx),
        exception_handlers={AuthError: _auth_error, ApiError: _api_error},
    )
    # Outside everything, mounted apps (MCP at /mcp) included: no route can forget to ask.
    return AuthMiddleware(app, tokens=ctx.tokens, open_principal=ctx.open_principal, limiter=ctx.limiter)


async def _body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    return body


async def _auth_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status", 401)
    return error(str(exc), status)


async def _api_error(request: Request, exc: Exception) -> Response:
    return error(str(exc))


def _lifespan(ctx: ApiContext) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for enter in ctx.lifespans:
                await stack.enter_async_context(enter())
            yield

    return lifespan

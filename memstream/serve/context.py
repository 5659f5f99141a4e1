"""What every API route shares: the request context, the answers' shapes, and the parameters' checks.

:class:`ApiContext` is what the API reads and calls; the app factory (``memstream.front.app``) keeps it on
the app, and every handler (``memstream.serve.routes``) takes it from its request with :func:`context_of`.
The console (``memstream.console``) builds on the same context and checks, from the layer above.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from memstream.auth import (
    AuthError,
    FailureLimiter,
    Forbidden,
    Principal,
    ProjectSharing,
    TokenStore,
    may_read_memory,
    read_scopes,
    read_speaker,
)
from memstream.identity import project_key, user_key
from memstream.recall import search as recall
from memstream.recall import timeline as timelines
from memstream.schemas import DocumentIngest, DocumentRemove, Fact, ForgetScope, Memory, MemoryOp, MemoryUsage, Turn
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.serve import documents_api
from memstream.serve.events import EventHub
from memstream.serve.guard import principal_of
from memstream.settings import IPNetwork
from memstream.telemetry import metrics
from memstream.telemetry.health import Status as HealthStatus

if TYPE_CHECKING:
    from memstream.ops.maintenance import Maintenance
    from memstream.ports import Providers

log = logging.getLogger(__name__)

#: Sends one usage record to Phase 2 (the consolidation topic).
UsageSink = Callable[[MemoryUsage], Awaitable[None]]
#: Sends one fact to the facts topic (the pipeline's decision stage takes it from there).
FactSink = Callable[[Fact], Awaitable[None]]
#: Sends one memory operation to the store agent (the memory-ops topic).
OpSink = Callable[[MemoryOp], Awaitable[None]]
#: Sends turns (POST /turns) and forgets (POST /admin/forget) to their topics.
TurnSink = Callable[[Sequence[Turn]], Awaitable[None]]
ForgetSink = Callable[[ForgetScope], Awaitable[None]]
#: The longest query, project path and request body the API reads.
MAX_QUERY_CHARS = 4_000
MAX_PROJECT_CHARS = 4_096
#: The longest memory POST /memories (and MCP add_memory) takes: a statement, not a document.
MAX_MEMORY_CHARS = 8_000
MAX_BODY_BYTES = 1_000_000
#: The most memories one ``GET /memories?ids=`` reads.
MAX_IDS = 50
#: How long a write waits to see its outcome in the store before answering "in flight".
WRITE_WAIT_S = 5.0
WRITE_POLL_S = 0.05


async def _no_usage(usage: MemoryUsage) -> None:
    return None


def _no_lag() -> None:
    return None


def _no_pipeline() -> HealthStatus:
    """A process without a pipeline (the query-only API) is ready once it serves."""
    return HealthStatus(live=True, ready=True, problems=[])


async def _no_documents(request: DocumentIngest | DocumentRemove) -> None:
    raise ApiError("document ingest needs a running pipeline (memstream up)")


@dataclass(frozen=True)
class ApiContext:
    """What the API reads and calls. Everything it needs from a running pipeline is a callable here."""

    providers: Providers
    #: Records which memories a read returned (Phase 2's usage signal); a no-op without a producer.
    record_usage: UsageSink = _no_usage
    #: Refreshes the consumer-lag gauges before /metrics is served; a no-op without a consumer.
    update_lag: Callable[[], None] = _no_lag
    #: The pipeline's liveness and readiness (memstream.telemetry.health); always ready without a pipeline.
    health: Callable[[], HealthStatus] = _no_pipeline
    #: Sends facts (POST /memories); None in a process that cannot write.
    send_fact: FactSink | None = None
    #: Sends memory operations (forgetting); None in a process that cannot write.
    send_memory_op: OpSink | None = None
    #: Serve MCP's stateless streamable HTTP at /mcp.
    mcp: bool = True
    #: Publishes a document request on the documents topic; refuses without a producer.
    send_document: documents_api.Send = _no_documents
    #: The maintenance worker's report and repairs (``memstream doctor``); None where none runs.
    maintenance: Maintenance | None = None
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
    #: Tails memory-updated for GET /events and the console's live view; None: /events answers 503.
    events: EventHub | None = None
    #: Serve the browser console at /console (memstream.console).
    console: bool = True
    #: The broker, for what the console's pipeline view reads from topics (dead letters); "" where unknown.
    kafka_bootstrap: str = ""
    #: The reverse proxies whose X-Forwarded-For names the client (MEMSTREAM_TRUSTED_PROXIES).
    trusted_proxies: tuple[IPNetwork, ...] = ()
    #: Which projects share their members' conversations (``memstream share``); None: none does.
    sharing: ProjectSharing | None = None

    def shares(self, project: str) -> bool:
        """Does this project share its members' conversations with each other?"""
        return self.sharing is not None and self.sharing.shares(project)

    def speaker_for(self, principal: Principal, keys: Sequence[str]) -> str | None:
        """Whose conversations a read of these scope keys (a project's, from :func:`read_scope_keys`)
        keeps: see :func:`memstream.auth.read_speaker`."""
        return read_speaker(principal, shared=bool(keys) and self.shares(keys[0]))

    def may_read(self, principal: Principal, memory: Memory) -> bool:
        """May this caller read this memory (its scope, and its speaker unless the project shares)?"""
        shared = memory.scope_key.startswith("p_") and self.shares(memory.scope_key)
        return may_read_memory(principal, memory.scope_key, memory.speaker, shared=shared)

    @classmethod
    def auth_from(cls, settings: Any) -> dict[str, Any]:
        """The ``tokens``/``open_principal`` pair the settings ask for (open mode, or the token
        file), with the trusted proxies."""
        if settings.api_open:
            principal = Principal(user=settings.user, all_projects=True, admin=True, label="open mode")
            return {"open_principal": principal}
        return {
            "tokens": TokenStore(settings.tokens_file),
            "trusted_proxies": settings.proxy_networks,
            "sharing": ProjectSharing(settings.sharing_file),
        }


#: A forgotten memory is superseded by this marker (plus the operation id), not by another memory.
FORGOTTEN = FORGOTTEN_MARK
#: The cause of a forget operation, followed by the caller's reason; the audit record keeps both.
FORGET_CAUSE = "forget: "


class ApiError(ValueError):
    """A bad request, reported as ``{"error": ...}`` with status 400."""


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


def handed(answer: str, content: Any) -> Response:
    """A read's JSON answer, its estimated tokens counted (``memstream_injected_tokens``) under ``answer``."""
    body = msgspec.json.encode(content)
    metrics.INJECTED_TOKENS.labels(answer).observe(-(-len(body.decode()) // recall.CHARS_PER_TOKEN))
    return Response(body, media_type="application/json")


def error(message: str, status: int = 400) -> Response:
    return JSON({"error": message}, status_code=status)


def count_param(request: Request, name: str, default: int) -> int:
    """A count of memories (``before``, ``after``) from 0 to the timeline's most."""
    try:
        return max(0, min(int(request.query_params.get(name, str(default))), timelines.MOST))
    except ValueError:
        raise ApiError(f"'{name}' must be a whole number") from None


def limit_param(request: Request, default: int, most: int) -> int:
    try:
        return max(1, min(int(request.query_params.get("limit", str(default))), most))
    except ValueError:
        raise ApiError("'limit' must be a whole number") from None


#: Parameters that once chose whose memories to read; the token decides now. ``user`` may still
#: name the caller itself (clients send their identity), never anyone else.
_CALLER_CHOSEN = ("scope", "scope_key", "user_key")


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
    asked = [name for name in _CALLER_CHOSEN if request.query_params.get(name, "")]
    if asked:
        raise ApiError(f"'{asked[0]}' is not a parameter: whose memories are read follows from the token")
    principal = caller(request)
    named = request.query_params.get("user", "").strip()
    if named and user_key(named) != principal.user_key:
        raise ApiError("'user' can only name the token's own user: whose memories are read follows from the token")
    return read_scopes(principal, project_param(request.query_params.get("project", "")))


def query_param(request: Request, *, required: bool) -> str:
    query = request.query_params.get("q", "").strip()
    if required and not query:
        raise ApiError("the 'q' parameter is required")
    if len(query) > MAX_QUERY_CHARS:
        raise ApiError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    return query


async def record_usage(ctx: ApiContext, memories: Sequence[Memory]) -> None:
    """Tell Phase 2 which rollouts (sessions) the returned memories came from (the consolidation spec's usage)."""
    rollouts = sorted({m.session_id for m in memories if m.session_id})
    if not rollouts:
        return
    try:
        await ctx.record_usage(
            MemoryUsage(rollout_ids=rollouts, memory_ids=[m.id for m in memories], ts=datetime.now(UTC))
        )
    except Exception:  # usage is a ranking signal: never fail a read over it
        log.warning("could not record memory usage", exc_info=True)


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = msgspec.json.decode(await read_body(request))
    except msgspec.DecodeError:
        raise ApiError("the request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    return body


def check_user_write(principal: Principal, claimed_user: str) -> None:
    """Refuse a user-scoped write the principal may not make: it needs a user, and only its own."""
    if not principal.user:
        raise Forbidden("a token without a user has no user scope to remember in: use the user's own token")
    if claimed_user and user_key(claimed_user) != principal.user_key:
        raise Forbidden("this token may not remember for another user")


def required_field(name: str) -> str:
    raise ApiError(f"the '{name}' field is required")


def context_of(request: Request) -> ApiContext:
    """The context of the app serving ``request`` (set by ``memstream.front.app.create_app``)."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


async def get_memory(ctx: ApiContext, memory_id: str, principal: Principal) -> Memory | None:
    """The memory, if the caller may read it (another scope's answers as no memory at all)."""
    try:
        uuid.UUID(memory_id)
    except ValueError:
        return None  # memory ids are uuids: anything else names no memory
    found = await ctx.providers.store.get(memory_id)
    return found if found is not None and ctx.may_read(principal, found) else None


async def read_body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    return body

"""The HTTP API: a Starlette (ASGI) app built from an explicit context, no Faust in sight.

Every route but /health needs ``Authorization: Bearer <token>`` (``memstream.serve.guard``, which
wraps the whole app, MCP at /mcp included); reads are scoped by the token's principal, never
by a parameter the caller chooses. (admin): admin tokens only.

GET /health             readiness (200 ready; 503 starting or unhealthy, with the problems), what runs (no token)
GET /health/live        liveness (503 once a Faust service crashed: restart the worker; no token)
GET /search?q=&project=[&detail=full]  hybrid search over a project's (and the user's) memories:
                        a compact index (id, type, scope, date, session, score, preview) unless
                        detail=full asks for the full records
GET /timeline?project=&id=|session=  the compact rows stored around a memory, or of a session, in order
GET /block?project=&q=[&max_tokens=]  the [MEMORY] block, as text, within its token budget
GET /memories           every stored memory, superseded ones included (or ?project=[&type=][&detail=index]:
                        a project's active memories, newest first, as full records or compact rows)
GET /memories?ids=a,b   several memories' full records at once (up to 50), and the ids not found
GET /memories/{id}      one memory
POST /memories          add an explicit memory through the pipeline (JSON: text, project, type?,
                        scope?, user?; no project for scope "user"); answers with its id once
                        stored, or its status in flight
POST /memories/{id}/forget  tombstone a memory (JSON: reason), recorded in its audit trail
GET /events             memory-updated events the caller may read, as Server-Sent Events
                        (Last-Event-ID resumes; memstream.serve.events)
GET /history?memory_id= the audit trail of one memory, oldest first (or ?scope= / ?project=:
                        a scope's newest records, returned oldest first)
GET /metrics            Prometheus metrics                                         (admin)
GET|POST|DELETE /documents  documents (seed 003's document ingest; memstream.serve.documents_api) (admin)
GET|POST /maintenance   the maintenance report (seed 003's tick()); POST runs its repairs (admin)
POST /turns             publish turns (JSON list) as the caller: its user, its projects
POST /admin/forget      forget a user or a project (JSON: user or project)        (admin)

GET /memories without ``project`` and GET /history?scope= / ?project= are admin-only; a user
reads the history of a memory it may read.

``memstream up`` serves it from inside its Faust worker (``memstream.worker.app``), which fills the
context with the callables only a running pipeline has: the consumer lag and the producer that
records memory usage. A process without Faust can build the same app with those left out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from memstream.auth import (
    AuthError,
    FailureLimiter,
    Forbidden,
    Principal,
    TokenStore,
    check_publish,
    may_read_scope,
    read_scopes,
    require_admin,
)
from memstream.identity import derived_id, project_key, user_key
from memstream.intake.remember import RememberError, expected_memory_id, make_fact
from memstream.recall import answers
from memstream.recall import search as recall
from memstream.recall import timeline as timelines
from memstream.schemas import (
    DocumentIngest,
    DocumentRemove,
    Fact,
    ForgetScope,
    Memory,
    MemoryOp,
    MemoryUsage,
    SupersedeMemory,
    Turn,
)
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.serve import documents_api
from memstream.serve.events import EventHub
from memstream.serve.guard import CURRENT_PRINCIPAL, AuthMiddleware, principal_of
from memstream.settings import IPNetwork
from memstream.telemetry import metrics
from memstream.telemetry.health import Status as HealthStatus

if TYPE_CHECKING:
    from memstream.bootstrap import Providers
    from memstream.ops.maintenance import Maintenance

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

    @classmethod
    def auth_from(cls, settings: Any) -> dict[str, Any]:
        """The ``tokens``/``open_principal`` pair the settings ask for (open mode, or the token
        file), with the trusted proxies."""
        if settings.api_open:
            principal = Principal(user=settings.user, all_projects=True, admin=True, label="open mode")
            return {"open_principal": principal}
        return {"tokens": TokenStore(settings.tokens_file), "trusted_proxies": settings.proxy_networks}


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


def _count(request: Request, name: str, default: int) -> int:
    """A count of memories (``before``, ``after``) from 0 to the timeline's most."""
    try:
        return max(0, min(int(request.query_params.get(name, str(default))), timelines.MOST))
    except ValueError:
        raise ApiError(f"'{name}' must be a whole number") from None


def _limit(request: Request, default: int, most: int) -> int:
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


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = msgspec.json.decode(await _body(request))
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


def _required(name: str) -> str:
    raise ApiError(f"the '{name}' field is required")


def create_app(ctx: ApiContext) -> ASGIApp:
    """The API over ``ctx``; serve it with any ASGI server."""
    providers = ctx.providers

    async def live(request: Request) -> Response:
        """Liveness: 200 unless a Faust service crashed (then the worker must be restarted)."""
        status = ctx.health()
        return JSON({"live": status.live, "problems": status.problems}, status_code=200 if status.live else 503)

    async def health(request: Request) -> Response:
        """Readiness: 200 once started and while every consumer, agent and partition moves; else 503."""
        llm = providers.llm
        status = ctx.health()
        return JSON(
            {
                "status": status.label,
                "live": status.live,
                "ready": status.ready,
                "problems": status.problems,
                "raw_mode": providers.raw_mode,
                "llm": [f"{one.provider}/{one.model}" for one in getattr(llm, "providers", [llm])] if llm else None,
                "embedding_model": providers.embedder.model,
            },
            status_code=200 if status.ready else 503,
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
        """Every stored memory, superseded ones included (for replays and audits), newest first;
        with ``project``, the active memories of the project (and the user), ``type`` to narrow."""
        if "ids" in request.query_params:
            return await memories_by_id(request)
        try:
            if request.query_params.get("project"):
                limit = _limit(request, 50, 1000)
                keys = read_scope_keys(request)
                kind = request.query_params.get("type", "").strip()
                detail = request.query_params.get("detail", "full")
                if detail not in answers.DETAILS:
                    raise ApiError(f"'detail' must be one of {', '.join(answers.DETAILS)}")
                listed = await providers.store.list(keys, types=[kind] if kind else None, limit=limit)
                if detail == "index":
                    return JSON(answers.timeline_index(listed))
                return JSON({"memories": [answers.full_record(m) for m in listed]})
            require_admin(caller(request))  # every scope's memories
            limit = _limit(request, 10_000, 100_000)
        except ApiError as exc:
            return error(str(exc))
        stored = await providers.store.list(None, include_superseded=True, limit=limit)
        return JSON({"memories": [msgspec.to_builtins(m) for m in stored]})

    async def memories_by_id(request: Request) -> Response:
        """The full records of several memories at once (``ids``, comma-separated), in the order asked;
        ids that name no memory the caller may read are listed as ``missing``."""
        asked = list(dict.fromkeys(i.strip() for i in request.query_params["ids"].split(",") if i.strip()))
        if not asked:
            return error("'ids' must list one or more memory ids, separated by commas")
        if len(asked) > MAX_IDS:
            return error(f"'ids' lists {len(asked)} memories; ask for at most {MAX_IDS} at once")
        principal = caller(request)
        found = await asyncio.gather(*(get_memory(memory_id, principal) for memory_id in asked))
        shown = [memory for memory in found if memory is not None]
        await record_usage(ctx, shown)
        missing = [memory_id for memory_id, memory in zip(asked, found, strict=True) if memory is None]
        return handed("get", {"memories": [answers.full_record(m) for m in shown], "missing": missing})

    async def get_memory(memory_id: str, principal: Principal) -> Memory | None:
        """The memory, if the caller may read it (another scope's answers as no memory at all)."""
        try:
            uuid.UUID(memory_id)
        except ValueError:
            return None  # memory ids are uuids: anything else names no memory
        found = await providers.store.get(memory_id)
        return found if found is not None and may_read_scope(principal, found.scope_key) else None

    async def memory(request: Request) -> Response:
        found = await get_memory(request.path_params["memory_id"], caller(request))
        if found is None:
            return error(f"no memory {request.path_params['memory_id']}", 404)
        return JSON({"memory": answers.full_record(found)})

    async def add(request: Request) -> Response:
        if ctx.send_fact is None:
            return error("this process serves reads only: add memories through `memstream up`", 503)
        principal = caller(request)
        try:
            body = await _json_body(request)
            project = str(body.get("project", "") or "")
            claimed = str(body.get("user", ""))
            if project or body.get("scope") != "user":
                project = project or _required("project")
                # As the caller only: its projects, its own user (a turn's rule, POST /turns's too).
                check_publish(principal, project_param(project), claimed)
            else:
                # A user memory belongs to no project: only the caller's own user scope is written.
                check_user_write(principal, claimed)
            fact = make_fact(
                str(body.get("text", "")),
                project=project,
                user=principal.user,
                type=body.get("type") or None,
                scope=body.get("scope") or None,
                origin=str(body.get("origin", "")) or "api:add",
            )
        except (ApiError, RememberError) as exc:
            return error(str(exc))
        await ctx.send_fact(fact)
        return JSON(await _added(fact), status_code=200)

    async def _added(fact: Fact) -> dict[str, Any]:
        """The fact's outcome once the store shows it, else that it is still in flight."""
        expected = expected_memory_id(fact)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITE_WAIT_S
        while True:
            stored = await providers.store.get(expected)
            if stored is not None and stored.active and stored.updated_at >= fact.ts:
                return {
                    "status": "stored",
                    "id": stored.id,
                    "fact_id": fact.fact_id,
                    "memory": answers.full_record(stored),
                }
            for record in await providers.history.for_scope(fact.scope_key, limit=50):
                if record.fact_id != fact.fact_id:
                    continue
                if record.memory_id:
                    found = await providers.store.get(record.memory_id)
                    if found is not None:
                        return {
                            "status": "stored" if record.outcome == "created" else record.outcome,
                            "id": found.id,
                            "fact_id": fact.fact_id,
                            "memory": answers.full_record(found),
                        }
                if record.outcome in ("skipped", "recorded", "blocked", "proposed"):
                    return {
                        "status": record.outcome,
                        "id": record.memory_id,
                        "fact_id": fact.fact_id,
                        "reason": record.reason,
                    }
            if loop.time() >= deadline:
                return {"status": "in-flight", "id": expected, "fact_id": fact.fact_id}
            await asyncio.sleep(WRITE_POLL_S)

    async def forget(request: Request) -> Response:
        if ctx.send_memory_op is None:
            return error("this process serves reads only: forget memories through `memstream up`", 503)
        memory_id = request.path_params["memory_id"]
        try:
            body = await _json_body(request)
        except ApiError as exc:
            return error(str(exc))
        reason = " ".join(str(body.get("reason", "")).split())
        if not reason:
            return error("give the 'reason' for forgetting (it goes into the memory's audit trail)")
        principal = caller(request)
        found = await get_memory(memory_id, principal)
        if found is None:
            return error(f"no memory {memory_id}", 404)
        if not principal.is_admin and not principal.user:
            raise Forbidden("a token without a user does not forget memories")
        if not found.active:
            return JSON({"status": "already-forgotten", "id": memory_id, "superseded_by": found.superseded_by})
        now = datetime.now(UTC)
        op_id = derived_id("forget", memory_id, now.isoformat())
        await ctx.send_memory_op(
            SupersedeMemory(
                op_id=op_id,
                scope_key=found.scope_key,
                memory_id=memory_id,
                superseded_by=f"{FORGOTTEN}{op_id}",
                cause=f"{FORGET_CAUSE}{reason}",
                requested_by=principal.name,
            )
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITE_WAIT_S
        while loop.time() < deadline:
            current = await providers.store.get(memory_id)
            if current is None or not current.active:
                return JSON({"status": "forgotten", "id": memory_id, "reason": reason})
            await asyncio.sleep(WRITE_POLL_S)
        return JSON({"status": "in-flight", "id": memory_id, "reason": reason})

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
        principal = caller(request)
        about: dict[str, Any]
        if memory_id:
            if not principal.is_admin and await get_memory(memory_id, principal) is None:
                return error(f"no memory {memory_id}", 404)  # a memory the caller may not read
            about = {"memory_id": memory_id}
            records = await providers.history.for_memory(memory_id, limit=limit)
        else:
            require_admin(principal)  # a whole scope's audit trail
            try:
                scope_key = scope or project_param(project)
            except ApiError as exc:
                return error(str(exc))
            about = {"scope_key": scope_key}
            # The newest ``limit`` of the scope, read newest first, served in time order.
            records = list(reversed(await providers.history.for_scope(scope_key, limit=limit)))
        return JSON({**about, "records": [msgspec.to_builtins(r) for r in records]})

    async def search(request: Request) -> Response:
        documents = request.query_params.get("documents", "include")
        if documents not in recall.DOCUMENT_FILTERS:
            return error(f"'documents' must be one of {', '.join(recall.DOCUMENT_FILTERS)}")
        detail = request.query_params.get("detail", "index")
        if detail not in answers.DETAILS:
            return error(f"'detail' must be one of {', '.join(answers.DETAILS)}")
        try:
            query = query_param(request, required=True)
            keys = read_scope_keys(request)
            limit = _limit(request, 10, 100)
        except ApiError as exc:
            return error(str(exc))
        hits = await recall.search_scopes(providers, query, keys, limit=limit, documents=documents)
        await record_usage(ctx, [hit.memory for hit in hits])
        if detail == "full":
            return handed("search", {"query": query, "score": "fused", "results": [answers.full_hit(h) for h in hits]})
        return handed("search", answers.search_index(hits))

    async def timeline(request: Request) -> Response:
        """The compact rows stored around a memory (``id``) or of a session (``session``), in order."""
        anchor_id = request.query_params.get("id", "").strip()
        session = request.query_params.get("session", "").strip()
        if bool(anchor_id) == bool(session):
            return error("give either 'id' (a memory to look around) or 'session' (a session to follow)")
        try:
            keys = read_scope_keys(request)
            before = _count(request, "before", timelines.AROUND)
            after = _count(request, "after", timelines.AROUND)
            limit = _limit(request, timelines.SESSION_LIMIT, timelines.MOST)
        except ApiError as exc:
            return error(str(exc))
        if session:
            found = await timelines.of_session(providers.store, keys, session, limit=limit)
            return handed("timeline", {"session": session, **answers.timeline_index(found)})
        anchor = await get_memory(anchor_id, caller(request))
        if anchor is None or anchor.scope_key not in keys:
            return error(f"no memory {anchor_id} in this project or your user scope", 404)
        shown = await timelines.around(providers.store, keys, anchor, before=before, after=after)
        return handed("timeline", answers.timeline_index(shown, anchor=anchor.id))

    async def events(request: Request) -> Response:
        """Memory-updated events the caller may read, as Server-Sent Events (memstream.serve.events)."""
        principal = caller(request)
        if ctx.events is None:
            return error("this process does not follow memory-updated events", 503)
        try:
            stream = await ctx.events.open_stream(principal, request.headers.get("last-event-id"))
        except Exception as exc:  # the topic cannot be read (yet): say so, the client retries
            log.warning("GET /events: cannot follow memory-updated: %s", exc)
            return error(f"cannot follow memory-updated events right now: {exc}", 503)
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            # no-transform and X-Accel-Buffering: proxies must pass each event on as it comes.
            headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        )

    async def block(request: Request) -> Response:
        try:
            query = query_param(request, required=False)
            keys = read_scope_keys(request)
        except ApiError as exc:
            return error(str(exc))
        try:
            max_tokens = int(request.query_params.get("max_tokens", "0") or "0") or None
        except ValueError:
            return error("'max_tokens' must be a whole number")
        if max_tokens is not None and max_tokens < 100:
            return error("'max_tokens' must be at least 100")
        shown = await recall.block_scopes(providers, keys, query, max_tokens=max_tokens)
        await record_usage(ctx, shown.memories)
        metrics.INJECTED_TOKENS.labels("block").observe(recall.estimate_tokens(shown.text))
        return PlainTextResponse(shown.text)

    async def turns(request: Request) -> Response:
        """Publish turns as the caller: each turn's project must be one of its projects, its user
        (if given) the caller's; the caller's user is filled in. All or nothing."""
        principal = caller(request)
        if ctx.publish_turns is None:
            return error("this process does not publish turns", 503)
        from memstream.schemas import DecodeError, decode

        try:
            raw = msgspec.json.decode(await _body(request))
            if not isinstance(raw, list):
                raise DecodeError("not a list")
            # Through the codec: turn.v1 events decode into today's Turn, as on the topic.
            given = [decode(msgspec.json.encode(item)) for item in raw]
            if not all(isinstance(turn, Turn) for turn in given):
                raise DecodeError("every item must be a turn")
        except (msgspec.DecodeError, DecodeError) as exc:
            return error(f"the body must be a JSON list of turns: {exc}")
        checked: list[Turn] = []
        for turn in given:
            assert isinstance(turn, Turn)
            if not turn.project.startswith("/"):
                return error("a turn's project must be an absolute directory path")
            check_publish(principal, project_key(turn.project), turn.user)
            checked.append(msgspec.structs.replace(turn, user=principal.user))
        await ctx.publish_turns(checked)
        return JSON({"published": len(checked)}, status_code=202)

    async def forget_scope(request: Request) -> Response:
        """Forget a user or a project, through the pipeline (memstream.agents.forget)."""
        from memstream.intake.forget import ForgetError, forget_event

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

    async def documents(request: Request) -> Response:
        # Documents are not scoped to a principal yet: admin tokens only.
        require_admin(caller(request))
        query = dict(request.query_params)
        try:
            if request.method == "POST":
                try:
                    body = msgspec.json.decode(await request.body())
                except msgspec.DecodeError:
                    return error("the body must be JSON")
                max_bytes = providers.settings.document_max_content_bytes
                status, reply = await documents_api.add(body, ctx.send_document, max_bytes=max_bytes)
            elif request.method == "DELETE":
                status, reply = await documents_api.remove(providers.documents, query, ctx.send_document)
            else:
                status, reply = await documents_api.list_or_show(providers.documents, query)
        except ApiError as exc:
            return error(str(exc), 503)
        return JSON(reply, status_code=status)

    async def maintenance(request: Request) -> Response:
        require_admin(caller(request))
        if ctx.maintenance is None:
            return error("no maintenance worker runs here", 503)
        if request.method == "POST":
            report = await ctx.maintenance.tick(mode="execute")
        else:
            report = await ctx.maintenance.tick(mode="observe")
        return JSON(msgspec.to_builtins(report))

    routes: list[BaseRoute] = [
        Route("/health", health),
        Route("/health/live", live),
        Route("/documents", documents, methods=["GET", "POST", "DELETE"]),
        Route("/maintenance", maintenance, methods=["GET", "POST"]),
        Route("/metrics", prometheus),
        Route("/memories", memories, methods=["GET"]),
        Route("/memories", add, methods=["POST"]),
        Route("/memories/{memory_id}", memory, methods=["GET"]),
        Route("/memories/{memory_id}/forget", forget, methods=["POST"]),
        Route("/history", history),
        Route("/search", search),
        Route("/timeline", timeline),
        Route("/block", block),
        Route("/events", events),
        Route("/turns", turns, methods=["POST"]),
        Route("/admin/forget", forget_scope, methods=["POST"]),
    ]
    lifespans = list(ctx.lifespans)
    if ctx.events is not None:
        lifespans.append(partial(_stopping, ctx.events))
    handlers: dict[Any, Any] = {AuthError: _auth_error, ApiError: _api_error}
    if ctx.mcp:
        # MCP's tools call the API in process, as the caller of the /mcp request they serve.
        inner = AsCaller(Starlette(routes=list(routes), exception_handlers=handlers))
        mcp_routes, mcp_lifespan = _mcp(inner, providers.settings.http_host)
        routes.extend(mcp_routes)
        lifespans.append(mcp_lifespan)
    door = None
    console_routes: list[BaseRoute] = []
    if ctx.console:
        from memstream.console.app import ConsoleDoor, build
        from memstream.console.session import Sessions, load_key

        settings = providers.settings
        sessions = Sessions(
            key=load_key(settings.data_dir / "console.key"),
            tokens=ctx.tokens,
            open_principal=ctx.open_principal,
            lifetime_s=settings.console_session_hours * 3600,
        )
        door = ConsoleDoor(sessions)
        console_routes = build(ctx, sessions)
    app = Starlette(
        routes=[*routes, *console_routes, *ctx.routes], lifespan=_lifespan(lifespans), exception_handlers=handlers
    )
    # Outside everything, MCP, the console and mounted apps included: no route can forget to ask.
    return AuthMiddleware(
        app,
        tokens=ctx.tokens,
        open_principal=ctx.open_principal,
        limiter=ctx.limiter,
        door=door,
        trusted_proxies=ctx.trusted_proxies,
    )


class AsCaller:
    """An in-process call of the API (an MCP tool's) made as the principal of the request it serves.

    The guard puts that principal in a context variable, which the tool's task inherits; no principal
    (a call outside any guarded request) reaches the routes as none, and they refuse it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        principal = CURRENT_PRINCIPAL.get()
        if scope["type"] in ("http", "websocket") and principal is not None:
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


async def _body(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    return body


async def _auth_error(request: Request, exc: Exception) -> Response:
    return error(str(exc), getattr(exc, "status", 401))


async def _api_error(request: Request, exc: Exception) -> Response:
    return error(str(exc))


def _mcp(api: ASGIApp, host: str) -> tuple[list[BaseRoute], Callable[[], AbstractAsyncContextManager[Any]]]:
    """MCP's stateless streamable HTTP at /mcp, its tools calling ``api`` in process."""
    import httpx

    from memstream.serve.mcp_server import API_TIMEOUT_S, ApiClient, build_server

    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api, raise_app_exceptions=False),
        base_url="http://memstream",
        timeout=API_TIMEOUT_S,
    )
    server = build_server(ApiClient(client), default_project=None)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
    )
    return list(mcp_app.routes), server.session_manager.run


@asynccontextmanager
async def _stopping(hub: EventHub) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await hub.stop()


def _lifespan(
    lifespans: Sequence[Callable[[], AbstractAsyncContextManager[Any]]],
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for enter in lifespans:
                await stack.enter_async_context(enter())
            yield

    return lifespan

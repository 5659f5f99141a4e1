"""The front door: one app that mounts the API, MCP, the console and the events stream.

``memstream up`` (``memstream.worker.app``) and the query-only ``memstream api``
(``memstream.front.query_api``) both serve :func:`create_app`. The pieces it mounts sit below it:

- the API's routes (``memstream.serve.routes``), module-level handlers over the shared request context
  (``memstream.serve.context``);
- MCP's stateless streamable HTTP at /mcp (``memstream.serve.mcp_server``), whose tools call the API in
  process as the caller of the /mcp request they serve;
- the console at /console (``memstream.console``), which builds on the same context;
- the guard (``memstream.serve.guard``) outside everything: no route can forget to ask for a token.

Every route but /health needs ``Authorization: Bearer <token>``; reads are scoped by the token's
principal, never by a parameter the caller chooses. (admin): admin tokens only.

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
GET|POST|DELETE /documents  documents (the document ingest; memstream.serve.documents_api) (admin)
GET|POST /maintenance   the maintenance report (the maintenance worker's tick()); POST runs its repairs (admin)
POST /turns             publish turns (JSON list) as the caller: its user, its projects
POST /admin/forget      forget a user or a project (JSON: user or project)        (admin)
GET|POST /admin/sharing which projects share their members' conversations; POST changes one
                        (JSON: project, shared), recorded with who and when         (admin)

GET /memories without ``project`` and GET /history?scope= / ?project= are admin-only; a user
reads the history of a memory it may read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from json import dumps as json_dumps
from typing import Any
from urllib.parse import urlencode

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from memstream.auth import AuthError
from memstream.console.app import ConsoleDoor, build
from memstream.console.session import Sessions, load_key
from memstream.serve.context import ApiContext, ApiError, error
from memstream.serve.events import EventHub
from memstream.serve.guard import CURRENT_PRINCIPAL, AuthMiddleware
from memstream.serve.routes import api_routes

log = logging.getLogger(__name__)


def create_app(ctx: ApiContext) -> ASGIApp:
    """The API, MCP, console and events over ``ctx``; serve it with any ASGI server."""
    routes = api_routes()
    lifespans = list(ctx.lifespans)
    if ctx.events is not None:
        lifespans.append(partial(_stopping, ctx.events))
    handlers: dict[Any, Any] = {AuthError: _auth_error, ApiError: _api_error}
    if ctx.mcp:
        # MCP's tools call the API in process, as the caller of the /mcp request they serve.
        api = Starlette(routes=list(routes), exception_handlers=handlers)
        api.state.ctx = ctx
        inner = AsCaller(api)
        mcp_routes, mcp_lifespan = _mcp(inner, ctx.providers.settings.http_host)
        routes.extend(mcp_routes)
        lifespans.append(mcp_lifespan)
    door = None
    console_routes: list[BaseRoute] = []
    if ctx.console:
        settings = ctx.providers.settings
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
    app.state.ctx = ctx
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


async def _auth_error(request: Request, exc: Exception) -> Response:
    return error(str(exc), getattr(exc, "status", 401))


async def _api_error(request: Request, exc: Exception) -> Response:
    return error(str(exc))


class InProcessClient:
    """The API called in process by an MCP tool: the ASGI call itself, without an HTTP client.

    httpx's ASGI transport built, parsed and merged a URL, a request and a cookie jar per call, about a
    millisecond of the API loop's Python per tool call (issue 42: a backlog makes each one dearer). This
    answers ``request`` as :class:`httpx.AsyncClient` does for :class:`memstream.serve.mcp_server.ApiClient`:
    an :class:`httpx.Response`, a 500 for an app that raised, :class:`httpx.TimeoutException` past ``timeout``.
    """

    base_url = "http://memstream"

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def request(
        self, method: str, url: str, *, params: dict[str, str] | None = None, json: Any = None
    ) -> httpx.Response:
        body = b"" if json is None else json_dumps(json).encode()
        headers = [(b"host", b"memstream"), (b"content-length", str(len(body)).encode())]
        if json is not None:
            headers.append((b"content-type", b"application/json"))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "headers": headers,
            "scheme": "http",
            "path": url,
            "raw_path": url.encode(),
            "query_string": urlencode(params or {}).encode(),
            "server": ("memstream", 80),
            "client": ("127.0.0.1", 123),
            "root_path": "",
        }
        sent, done = False, asyncio.Event()
        status, answer_headers, parts = 500, [], []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await done.wait()
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Any) -> None:
            nonlocal status, answer_headers
            if message["type"] == "http.response.start":
                status, answer_headers = message["status"], message.get("headers", [])
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    done.set()

        try:
            async with asyncio.timeout(self.timeout):
                await self.app(scope, receive, send)
        except TimeoutError:
            raise httpx.ReadTimeout(f"no answer within {self.timeout:.0f}s") from None
        except Exception:  # the app's error page (Starlette's 500) was sent, or nothing was: a 500
            log.warning("an MCP tool's call of %s %s failed", method, url, exc_info=True)
            if not done.is_set():
                status, answer_headers = 500, []
        return httpx.Response(status, headers=answer_headers, content=b"".join(parts))


def _mcp(api: ASGIApp, host: str) -> tuple[list[BaseRoute], Callable[[], AbstractAsyncContextManager[Any]]]:
    """MCP's stateless streamable HTTP at /mcp, its tools calling ``api`` in process."""
    from memstream.serve.mcp_server import API_TIMEOUT_S, ApiClient, build_server

    server = build_server(ApiClient(InProcessClient(api, API_TIMEOUT_S)), default_project=None)
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

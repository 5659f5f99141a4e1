"""The console's routes, mounted at /console by the front door (``memstream.front.app``).

The same process, port and principals as the API: the guard (``memstream.serve.guard``) lets a
request in by its bearer token or, on the console's paths and ``/events``, by the session
cookie (:class:`ConsoleDoor`). Every page is a read of the store, the history, the graph and
the topics; every action is an operation sent to the store agent (``memstream.console.actions``).
A caller sees only what its principal may read: a memory of another scope is "not found",
exactly like one that does not exist, whatever id or URL is tried.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from memstream.auth import AuthError, Principal, may_read_scope, read_scopes, token_id_of
from memstream.console import actions, pages, reads, views
from memstream.console.html import Html
from memstream.console.session import PRE_COOKIE, SESSION_COOKIE, Session, Sessions
from memstream.recall import search as recall
from memstream.schemas import Memory
from memstream.serve.guard import Receive, Scope, Send, client_address, principal_of

if TYPE_CHECKING:
    from memstream.serve.context import ApiContext

BASE = pages.BASE
STATIC = Path(__file__).parent / "static"
CODES = f"{BASE}/codes"
#: How long an action waits to see its outcome in the memory's history before the page says "on its way".
ACTION_WAIT_S = 5.0
#: The Content-Security-Policy of every console response: no inline script or style, no frames,
#: nothing from elsewhere, forms post only here.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class ConsoleDoor:
    """The guard's session door (``memstream.serve.guard.SessionDoor``) for the console's cookie."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def public(self, path: str) -> bool:
        return path in (f"{BASE}/signin", "/favicon.ico") or path.startswith(f"{BASE}/static/")

    def covers(self, path: str) -> bool:
        # /console/codes is an API call (``memstream console``): a bearer token, or open mode, as any route.
        # Its answer is not readable by another site's page (no CORS), so a cross-site POST learns nothing.
        return path != CODES and (path in (BASE, "/events") or path.startswith(f"{BASE}/"))

    def session(self, scope: Scope) -> tuple[Principal, Session] | None:
        cookie = _cookie(scope, SESSION_COOKIE)
        if not cookie:
            return None
        try:
            found = self.sessions.check(cookie)
        except AuthError:
            return None
        return found.principal, found

    async def refuse(self, scope: Scope, send: Send) -> None:
        if scope.get("method") == "GET" and scope.get("path") != "/events":
            response: Response = RedirectResponse(f"{BASE}/signin", status_code=303)
        else:
            response = JSONResponse({"error": "sign in to the console first"}, status_code=401)
        await _with_headers(response)(scope, _no_body, send)


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def _cookie(scope: Scope, name: str) -> str:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v
    return ""


def _with_headers(app: Any) -> Any:
    """Adds the security headers (and no-store, for anything but static assets) to every response."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        static = scope.get("path", "").startswith(f"{BASE}/static/")

        async def send_with(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += SECURITY_HEADERS
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with)

    return wrapped


def build(ctx: ApiContext, sessions: Sessions) -> list[BaseRoute]:
    """The console's routes (to mount beside the API's)."""
    from memstream.recall.answers import full_record
    from memstream.serve.context import MAX_BODY_BYTES

    providers = ctx.providers
    known = views.Projects(providers)
    pipeline_reads = views.PipelineReads(ctx)

    # -- helpers ---------------------------------------------------------------------------

    def viewer(request: Request) -> Principal:
        principal = principal_of(request.scope)
        if principal is None:
            raise AuthError("sign in to the console first")
        return principal

    def session_of(request: Request) -> Session | None:
        found = (request.scope.get("state") or {}).get("console_session")
        return found if isinstance(found, Session) else None

    def csrf_of(request: Request) -> str:
        found = session_of(request)
        return sessions.csrf(found.nonce) if found else ""

    def chrome(request: Request, current: str) -> pages.Chrome:
        return pages.Chrome(viewer(request), csrf_of(request), current)

    def page(request: Request, title: str, main: Html, current: str, *, status: int = 200, **flash: str) -> Response:
        return HTMLResponse(pages.layout(title, main, chrome(request, current), **flash), status_code=status)

    async def form(request: Request) -> dict[str, list[str]]:
        """The urlencoded body, after the CSRF check every state-changing request passes."""
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise actions.ActionError("the form is too large")
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        found = session_of(request)
        if found is not None:  # a browser: a bearer-token caller carries no ambient credential
            presented = request.headers.get("x-csrf-token") or (fields.get("csrf") or [""])[0]
            sessions.check_csrf(found.nonce, presented)
        return fields

    def first(fields: Mapping[str, list[str]], name: str) -> str:
        return (fields.get(name) or [""])[0]

    async def readable(principal: Principal, memory_id: str) -> Memory | None:
        """The memory, if this caller may read it; None for one it may not, exactly as for a missing one."""
        checked = reads.memory_id_or_none(memory_id)
        if checked is None:  # not an id at all: "not found", never the store's parse error
            return None
        found = await providers.store.get(checked)
        if found is None or not may_read_scope(principal, found.scope_key):
            return None
        return found

    async def projects(principal: Principal) -> list[tuple[str, str]]:
        """(key, "path (active memories)") of the projects this caller may read."""
        held = await known.active()
        keys = [k for k in held if may_read_scope(principal, k)]
        keys += [k for k in principal.projects if k not in held]
        return await known.choices(keys)

    def remember_paths(memories: Sequence[Memory]) -> None:
        known.remember(memories)

    async def scope_keys(principal: Principal, project: str) -> list[str]:
        if project:
            return read_scopes(principal, _project_key(project))
        keys = [k for k, _ in await projects(principal)]
        return [*keys, principal.user_key] if principal.user else keys

    async def wait_for(check: Any) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ACTION_WAIT_S
        while loop.time() < deadline:
            if await check():
                return True
            await asyncio.sleep(0.05)
        return False

    def may_act(principal: Principal, memory: Memory) -> bool:
        return may_read_scope(principal, memory.scope_key) and (principal.is_admin or bool(principal.user))

    # -- sign-in -----------------------------------------------------------------------------

    async def signin(request: Request) -> Response:
        code = request.query_params.get("code", "")
        if request.method == "GET" and code:
            try:
                cookie = sessions.redeem(code)
            except AuthError as exc:
                return _sign_in_page(request, error=str(exc), status=400)
            return _signed_in(cookie, sessions.lifetime_s, secure=request.url.scheme == "https")
        if request.method == "POST":
            # The same rule as the API's door (memstream.serve.guard): a token that verifies always gets
            # in; failures are counted per client address and per token id, and only slow the guessing.
            client = client_address(request.scope, ctx.trusted_proxies)
            pre = _cookie(request.scope, PRE_COOKIE)
            fields = urllib.parse.parse_qs((await request.body())[:MAX_BODY_BYTES].decode("utf-8", "replace"))
            token = first(fields, "token").strip()
            try:
                sessions.check_csrf(f"pre.{pre}", first(fields, "csrf"))
                cookie = sessions.token_sign_in(token)
            except AuthError as exc:
                token_id = token_id_of(token)
                keys = [f"address:{client}", *([f"token:{token_id}"] if token_id else [])]
                if any(ctx.limiter.blocked(key) for key in keys):
                    return _sign_in_page(request, error="too many failed attempts; try again later", status=429)
                for key in keys:
                    ctx.limiter.failed(key)
                return _sign_in_page(request, error=str(exc), status=401)
            return _signed_in(cookie, sessions.lifetime_s, secure=request.url.scheme == "https")
        return _sign_in_page(request)

    def _sign_in_page(request: Request, *, error: str = "", status: int = 200) -> Response:
        import secrets

        pre = secrets.token_urlsafe(16)
        main = pages.sign_in(sessions.csrf(f"pre.{pre}"), open_mode=ctx.tokens is None)
        response = HTMLResponse(pages.layout("Sign in", main, None, error=error), status_code=status)
        response.set_cookie(PRE_COOKIE, pre, max_age=600, path=f"{BASE}/signin", httponly=True, samesite="strict")
        return response

    async def signout(request: Request) -> Response:
        await form(request)
        found = session_of(request)
        if found is not None:
            sessions.sign_out(found)
        response = RedirectResponse(f"{BASE}/signin", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def codes(request: Request) -> Response:
        """A one-time sign-in link for the bearer token's principal (``memstream console``)."""
        viewer(request)
        if session_of(request) is not None:
            return JSONResponse({"error": "sign-in links are issued to a bearer token, not a console session"}, 403)
        token_id = (request.scope.get("state") or {}).get("token_id")
        if not token_id:
            return JSONResponse({"error": "a bearer token is required"}, 401)
        code = sessions.issue_code(token_id)
        return JSONResponse({"path": f"{BASE}/signin?code={code}", "expires_in_s": int(sessions_code_ttl())})

    # -- views -------------------------------------------------------------------------------

    async def memories_view(request: Request) -> Response:
        principal = viewer(request)
        params = {k: v.strip() for k, v in request.query_params.items()}
        try:
            keys = await scope_keys(principal, params.get("project", ""))
        except (AuthError, ValueError) as exc:
            return page(request, "Memories", Html(""), "memories", status=403, error=str(exc))
        scope_filter = params.get("scope", "")
        if scope_filter:
            keys = [k for k in keys if k.startswith("u_" if scope_filter == "user" else "p_")]
        listing = await views.memories_listing(providers, keys, params)
        remember_paths([r.memory for r in listing.rows])
        main = pages.memories(
            params,
            await projects(principal),
            listing.rows,
            csrf_of(request),
            sources=await known.sources(keys),
            total=listing.total,
            next_cursor=listing.next_cursor,
            problems=listing.problems,
            filtered=listing.filtered,
        )
        return page(request, "Memories", main, "memories", notice=params.get("notice", ""))

    async def memory_view(request: Request) -> Response:
        principal = viewer(request)
        memory_id = request.path_params["memory_id"]
        found = await readable(principal, memory_id)
        if found is None:
            return page(request, "Not found", Html("<p>No such memory.</p>"), "memories", status=404)
        records = await providers.history.for_memory(found.id, limit=200)
        around = None
        neighbours: list[Memory] = []
        if providers.graph is not None:
            around = await providers.graph.around_memory(found.id)
            for other in around.memory_ids:
                seen = await readable(principal, other)
                if seen is not None:
                    neighbours.append(seen)
        successor = None
        if found.superseded_by and ":" not in found.superseded_by:
            successor = await readable(principal, found.superseded_by)
        predecessor_ids = {r.memory_id for r in records if r.target_id == found.id and r.memory_id != found.id}
        predecessors = [m for m in [await readable(principal, i) for i in sorted(predecessor_ids)] if m is not None]
        remember_paths([found])
        main = pages.memory(
            found,
            records,
            around,
            neighbours,
            successor,
            predecessors,
            csrf_of(request),
            may_act=may_act(principal, found),
            graph_enabled=providers.graph is not None,
            in_block=await views.block_verdict(providers, found, _block_keys(principal, found)),
        )
        return page(request, "Memory", main, "memories", notice=request.query_params.get("notice", ""))

    async def sessions_view(request: Request) -> Response:
        principal = viewer(request)
        project = request.query_params.get("project", "").strip()
        try:
            keys = read_scopes(principal, _project_key(project))[:1] if project else await scope_keys(principal, "")
        except (AuthError, ValueError) as exc:
            return page(request, "Sessions", Html(""), "sessions", status=403, error=str(exc))
        rows = await views.session_rows(providers, keys)
        main = pages.session_list(_project_key(project) if project else "", await projects(principal), rows)
        return page(request, "Sessions", main, "sessions")

    async def session_view(request: Request) -> Response:
        principal = viewer(request)
        session_id = request.path_params["session_id"]
        project = request.query_params.get("project", "").strip()
        try:
            keys = await scope_keys(principal, project)
        except (AuthError, ValueError) as exc:
            return page(request, "Session", Html(""), "sessions", status=403, error=str(exc))
        line = await views.session_timeline(providers, keys, session_id)
        if line is None:
            return page(request, "Not found", Html("<p>No such session.</p>"), "sessions", status=404)
        return page(request, "Session", pages.session_timeline(session_id, line), "sessions")

    async def block_view(request: Request) -> Response:
        principal = viewer(request)
        project = request.query_params.get("project", "").strip()
        query = request.query_params.get("q", "").strip()[:4_000]
        text: str | None = None
        tokens = 0
        if project:
            try:
                keys = read_scopes(principal, _project_key(project))
            except (AuthError, ValueError) as exc:
                return page(request, "[MEMORY] block", Html(""), "block", status=403, error=str(exc))
            shown = await recall.block_scopes(providers, keys, query)
            text, tokens = shown.text, recall.estimate_tokens(shown.text)
        main = pages.block(_project_key(project) if project else "", query, await projects(principal), text, tokens)
        return page(request, "[MEMORY] block", main, "block")

    async def stats_view(request: Request) -> Response:
        principal = viewer(request)
        keys = await scope_keys(principal, "")
        shown = await views.stats(providers, keys, await projects(principal))
        return page(request, "Stats", pages.stats(shown, _capture(providers.settings)), "stats")

    async def live_view(request: Request) -> Response:
        principal = viewer(request)
        newest = await views.newest(providers, await scope_keys(principal, ""))
        return page(request, "Live", pages.live(newest), "live")

    async def pipeline_view(request: Request) -> Response:
        principal = viewer(request)
        if not principal.is_admin:
            return page(request, "Pipeline", Html("<p>For admin tokens only.</p>"), "pipeline", status=403)
        lag, processed, parked = _metrics(ctx)
        try:
            letters = (await pipeline_reads.letters.get()).value
        except Exception as exc:  # the page still says what it could not read
            return page(request, "Pipeline", Html(""), "pipeline", status=503, error=f"cannot read dead letters: {exc}")
        doctor = (await pipeline_reads.doctor.get()).value
        capture = _capture(providers.settings)
        events = {"clients": ctx.events.clients, "dropped as slow": ctx.events.dropped} if ctx.events else {}
        main = pages.pipeline(lag, processed, parked, letters, doctor, capture, csrf_of(request), events)
        return page(request, "Pipeline", main, "pipeline", notice=request.query_params.get("notice", ""))

    async def redrive(request: Request) -> Response:
        principal = viewer(request)
        await form(request)
        if not principal.is_admin or not ctx.kafka_bootstrap:
            return page(
                request, "Pipeline", Html(""), "pipeline", status=403, error="re-drive needs an admin and the broker"
            )
        from memstream.ops.redrive import redrive as run

        report = await run(ctx.kafka_bootstrap, providers.settings.topic_prefix, by=f"console:{principal.name}")
        pipeline_reads.letters.forget()
        notice = f"re-drove {len(report.selection.chosen)} dead letter(s)"
        return RedirectResponse(f"{BASE}/pipeline?" + urllib.parse.urlencode({"notice": notice}), status_code=303)

    async def documents_view(request: Request) -> Response:
        from memstream.serve import documents_api

        principal = viewer(request)
        if not principal.is_admin:
            return page(request, "Documents", Html("<p>For admin tokens only.</p>"), "documents", status=403)
        project = request.query_params.get("project", "").strip()
        listed: list[dict[str, Any]] = []
        error = ""
        if project:
            status, reply = await documents_api.list_or_show(providers.documents, {"project": project})
            listed = reply.get("documents", [])
            error = reply.get("error", "") if status >= 400 else ""
        choices = [(label.rsplit(" (", 1)[0], label) for _, label in await projects(principal)]
        main = pages.documents(project, choices, listed, csrf_of(request))
        return page(request, "Documents", main, "documents", error=error, notice=request.query_params.get("notice", ""))

    async def documents_change(request: Request) -> Response:
        from memstream.serve import documents_api

        principal = viewer(request)
        fields = await form(request)
        if not principal.is_admin:
            return page(request, "Documents", Html(""), "documents", status=403, error="for admin tokens only")
        project = first(fields, "project")
        if request.url.path.endswith("/remove"):
            status, reply = await documents_api.remove(
                providers.documents, {"id": first(fields, "id")}, ctx.send_document
            )
        else:
            body = {"project": project, "title": first(fields, "title")}
            body.update(
                {"source": first(fields, "source")}
                if first(fields, "source")
                else {"content": first(fields, "content")}
            )
            try:
                status, reply = await documents_api.add(
                    body, ctx.send_document, max_bytes=providers.settings.document_max_content_bytes
                )
            except ValueError as exc:
                status, reply = 503, {"error": str(exc)}
        if status >= 400:
            return page(
                request, "Documents", Html(""), "documents", status=status, error=str(reply.get("error", reply))
            )
        notice = "document removed" if request.url.path.endswith("/remove") else "document queued for ingest"
        return RedirectResponse(
            f"{BASE}/documents?" + urllib.parse.urlencode({"project": project, "notice": notice}), status_code=303
        )

    async def export(request: Request) -> Response:
        principal = viewer(request)
        keys = await scope_keys(principal, "")

        async def lines() -> AsyncIterator[bytes]:
            for key in keys:
                for m in await providers.store.list([key], include_superseded=True, limit=1_000_000):
                    if may_read_scope(principal, m.scope_key):
                        yield msgspec.json.encode(full_record(m)) + b"\n"  # the shape `get` returns

        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return StreamingResponse(
            lines(),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="memstream-{stamp}.jsonl"'},
        )

    # -- actions -------------------------------------------------------------------------------

    async def act(request: Request) -> Response:
        principal = viewer(request)
        action = request.path_params["action"]
        try:
            fields = await form(request)
        except AuthError as exc:
            return page(request, "Refused", Html(""), "memories", status=403, error=str(exc))
        found = await readable(principal, request.path_params["memory_id"])
        if found is None:
            return page(request, "Not found", Html("<p>No such memory.</p>"), "memories", status=404)
        if not may_act(principal, found) or ctx.send_memory_op is None:
            return page(
                request, "Refused", Html(""), "memories", status=403, error="this token cannot change memories here"
            )
        if action == "restore":
            try:
                vector = await providers.store.vector(found.id)
                if vector is None:
                    raise actions.ActionError("its vector is gone: it cannot be restored")
                back = actions.restore(found, first(fields, "reason"), vector, by=principal.name)
            except actions.ActionError as exc:
                return _back(found.id, "", error=str(exc))
            await ctx.send_memory_op(back)
            await wait_for(lambda: _recorded(found.id, back.op_id))
            return _back(found.id, "restored")
        if found.superseded_by is not None:
            return _back(found.id, "it is already superseded: nothing changed")
        by = principal.name
        try:
            if action == "forget":
                op = actions.forget(found, first(fields, "reason"), by=by)
                await ctx.send_memory_op(op)
                done = await wait_for(lambda: _recorded(found.id, op.op_id))
                return RedirectResponse(
                    f"{BASE}/?" + urllib.parse.urlencode({"notice": "forgotten" if done else "forget on its way"}),
                    status_code=303,
                )
            if action == "wrong":
                wrong = actions.mark_wrong(found, first(fields, "reason"), by=by)
                await ctx.send_memory_op(wrong)
                await wait_for(lambda: _recorded(found.id, wrong.op_id))
                return _back(found.id, "marked wrong")
            if action in ("pin", "unpin"):
                pinning = actions.pin(found, pinned=action == "pin", by=by)
                await ctx.send_memory_op(pinning)
                await wait_for(lambda: _recorded(found.id, pinning.op_id))
                return _back(found.id, f"{action}ned")
            if action == "correct":
                text = actions.corrected_text(first(fields, "text"))
                vector = (await providers.embedder.embed_documents([text]))[0]
                create, supersede = actions.correct(
                    found,
                    text,
                    first(fields, "reason"),
                    vector,
                    by=by,
                    embedding_model=providers.embedder.model,
                    now=datetime.now(UTC),
                )
                await ctx.send_memory_op(create)
                await ctx.send_memory_op(supersede)
                await wait_for(lambda: _recorded(found.id, supersede.op_id))
                return _back(create.memory.id, "corrected: this is the new memory")
        except actions.ActionError as exc:
            return _back(found.id, "", error=str(exc))
        return page(request, "Not found", Html("<p>No such action.</p>"), "memories", status=404)

    async def forget_many(request: Request) -> Response:
        principal = viewer(request)
        try:
            fields = await form(request)
        except AuthError as exc:
            return page(request, "Refused", Html(""), "memories", status=403, error=str(exc))
        if ctx.send_memory_op is None:
            return page(
                request, "Refused", Html(""), "memories", status=503, error="this process cannot change memories"
            )
        chosen = [m for m in [await readable(principal, i) for i in fields.get("id", [])[:500]] if m is not None]
        chosen = [m for m in chosen if m.active and may_act(principal, m)]
        if not chosen:
            return RedirectResponse(
                f"{BASE}/?" + urllib.parse.urlencode({"notice": "nothing selected"}), status_code=303
            )
        try:
            ops = [actions.forget(m, first(fields, "reason"), by=principal.name) for m in chosen]
        except actions.ActionError as exc:
            return RedirectResponse(f"{BASE}/?" + urllib.parse.urlencode({"notice": str(exc)}), status_code=303)
        for op in ops:
            await ctx.send_memory_op(op)
        await wait_for(lambda: _all_recorded([(op.memory_id, op.op_id) for op in ops]))
        notice = f"forgot {len(chosen)} memor{'y' if len(chosen) == 1 else 'ies'}"
        return RedirectResponse(f"{BASE}/?" + urllib.parse.urlencode({"notice": notice}), status_code=303)

    async def _recorded(memory_id: str, op_id: str) -> bool:
        """Is the operation applied and in the memory's history? (What the page then shows is true.)"""
        return any(r.origin == op_id for r in await providers.history.for_memory(memory_id, limit=500))

    async def _all_recorded(done: Sequence[tuple[str, str]]) -> bool:
        return all([await _recorded(memory_id, op_id) for memory_id, op_id in done])

    def _back(memory_id: str, notice: str, *, error: str = "") -> Response:
        params = {"notice": error or notice}
        return RedirectResponse(f"{BASE}/memories/{memory_id}?" + urllib.parse.urlencode(params), status_code=303)

    def sessions_code_ttl() -> float:
        from memstream.console.session import CODE_TTL_S

        return CODE_TTL_S

    async def root(request: Request) -> Response:
        return RedirectResponse(f"{BASE}/", status_code=307)

    console_routes: list[BaseRoute] = [
        Route("/", memories_view),
        Route("/signin", signin, methods=["GET", "POST"]),
        Route("/signout", signout, methods=["POST"]),
        Route("/codes", codes, methods=["POST"]),
        Route("/memories/{memory_id}", memory_view),
        Route("/memories/{memory_id}/{action}", act, methods=["POST"]),
        Route("/forget", forget_many, methods=["POST"]),
        Route("/export", export),
        Route("/sessions", sessions_view),
        Route("/sessions/{session_id}", session_view),
        Route("/block", block_view),
        Route("/live", live_view),
        Route("/stats", stats_view),
        Route("/pipeline", pipeline_view),
        Route("/pipeline/redrive", redrive, methods=["POST"]),
        Route("/documents", documents_view),
        Route("/documents", documents_change, methods=["POST"]),
        Route("/documents/remove", documents_change, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC)),
    ]
    from starlette.applications import Starlette

    async def refused(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status", 403)
        try:
            return page(request, "Refused", Html(""), "", status=status, error=str(exc))
        except AuthError:
            return JSONResponse({"error": str(exc)}, status_code=status)

    async def bad(request: Request, exc: Exception) -> Response:
        return page(request, "Bad request", Html(""), "", status=400, error=str(exc))

    console = Starlette(
        routes=console_routes, exception_handlers={AuthError: refused, actions.ActionError: bad, ValueError: bad}
    )

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    return [Route(BASE, root), Route("/favicon.ico", favicon), Mount(BASE, app=_with_headers(console))]


def _block_keys(principal: Principal, memory: Memory) -> list[str]:
    """The scopes of the block the memory's project's next session gets (its project and the user's)."""
    if not memory.scope_key.startswith("p_"):
        return []
    return [memory.scope_key, *([principal.user_key] if principal.user else [])]


def _signed_in(cookie: str, lifetime_s: float, *, secure: bool) -> Response:
    # The code leaves the address bar with this redirect; the cookie is never readable by script, and
    # behind HTTPS it is never sent over plain HTTP.
    response = RedirectResponse(f"{BASE}/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=int(lifetime_s), path="/", httponly=True, samesite="strict", secure=secure
    )
    response.delete_cookie(PRE_COOKIE, path=f"{BASE}/signin")
    return response


def _project_key(value: str) -> str:
    from memstream.serve.context import project_param

    return project_param(value)


def _metrics(ctx: ApiContext) -> tuple[list[tuple[str, str, float]], list[tuple[str, float]], float]:
    """Consumer lag per topic partition, events processed per stage, and parked extractions."""
    from memstream.telemetry import metrics

    with contextlib.suppress(Exception):  # metrics never break the page
        ctx.update_lag()
    lag: list[tuple[str, str, float]] = []
    processed: list[tuple[str, float]] = []
    for family in metrics.CONSUMER_LAG.collect():
        lag += [(s.labels.get("topic", ""), s.labels.get("partition", ""), s.value) for s in family.samples]
    for family in metrics.EVENTS_PROCESSED.collect():
        processed += [(s.labels.get("stage", ""), s.value) for s in family.samples if s.name.endswith("_total")]
    parked = sum(s.value for family in metrics.PARKED.collect() for s in family.samples)
    return sorted(lag), sorted(processed), parked


def _capture(settings: Any) -> dict[str, Any]:
    """This host's capture: the spool's backlog, and per CLI the files followed and when one was last read."""
    from memstream.capture.state import CaptureState

    path = Path(settings.capture_db)
    if not path.exists():
        return {"capture": "has not run on this host"}
    shown: dict[str, Any] = {}
    try:
        with CaptureState.open(path) as state:
            shown["spooled turns waiting"] = state.spool_size()
            for source, files, last in state.last_reads():
                when = datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%d %H:%M UTC")
                shown[f"{source}"] = f"{files} session file(s), last read {when}"
    except Exception as exc:  # a broken state file is shown, not raised
        shown["capture state"] = f"unreadable: {exc}"
    return shown

"""The console's routes, mounted at /console by the front door (``memstream.front.app``).

The same process, port and principals as the API: the guard (``memstream.serve.guard``) lets a
request in by its bearer token or, on the console's paths and ``/events``, by the session
cookie (:class:`ConsoleDoor`). Every page is a read of the store, the history, the graph and
the topics; every action is an operation sent to the store agent (``memstream.console.actions``).
A caller sees only what its principal may read: a memory of another scope is "not found",
exactly like one that does not exist, whatever id or URL is tried.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from memstream.auth import AuthError, Principal
from memstream.console import actions, pages, views
from memstream.console.context import Console, cookie, page
from memstream.console.html import Html
from memstream.console.routes import console_routes
from memstream.console.session import SESSION_COOKIE, Session, Sessions
from memstream.serve.guard import Receive, Scope, Send

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
        value = cookie(scope, SESSION_COOKIE)
        if not value:
            return None
        try:
            found = self.sessions.check(value)
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
    """The console's routes (to mount beside the API's): its own app at /console, behind the security headers."""
    from starlette.applications import Starlette

    console = Starlette(
        routes=[*console_routes(), Mount("/static", app=StaticFiles(directory=STATIC))],
        exception_handlers={AuthError: refused, actions.ActionError: bad, ValueError: bad},
    )
    console.state.console = Console(ctx, sessions, views.Projects(ctx.providers), views.PipelineReads(ctx))
    return [Route(BASE, root), Route("/favicon.ico", favicon), Mount(BASE, app=_with_headers(console))]


async def root(request: Request) -> Response:
    return RedirectResponse(f"{BASE}/", status_code=307)


async def favicon(request: Request) -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


async def refused(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status", 403)
    try:
        return page(request, "Refused", Html(""), "", status=status, error=str(exc))
    except AuthError:
        return JSONResponse({"error": str(exc)}, status_code=status)


async def bad(request: Request, exc: Exception) -> Response:
    return page(request, "Bad request", Html(""), "", status=400, error=str(exc))

"""Sessions: recent sessions across projects, and one session as a timeline of its exchanges."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import AuthError, read_scopes
from memstream.console import pages, views
from memstream.console.context import (
    console_of,
    page,
    project_key_of,
    projects,
    scope_keys,
    viewer,
)
from memstream.console.html import Html


async def sessions_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    project = request.query_params.get("project", "").strip()
    try:
        keys = read_scopes(principal, project_key_of(project))[:1] if project else await scope_keys(con, principal, "")
    except (AuthError, ValueError) as exc:
        return page(request, "Sessions", Html(""), "sessions", status=403, error=str(exc))
    rows = await views.session_rows(con.reads_for(principal, project_key_of(project) if project else ""), keys)
    main = pages.session_list(project_key_of(project) if project else "", await projects(con, principal), rows)
    return page(request, "Sessions", main, "sessions")


async def session_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    session_id = request.path_params["session_id"]
    project = request.query_params.get("project", "").strip()
    try:
        keys = await scope_keys(con, principal, project)
    except (AuthError, ValueError) as exc:
        return page(request, "Session", Html(""), "sessions", status=403, error=str(exc))
    reads = con.reads_for(principal, project_key_of(project) if project else "")
    line = await views.session_timeline(reads, keys, session_id)
    if line is None:
        return page(request, "Not found", Html("<p>No such session.</p>"), "sessions", status=404)
    return page(request, "Session", pages.session_timeline(session_id, line), "sessions")


ROUTES = [
    Route("/sessions", sessions_view),
    Route("/sessions/{session_id}", session_view),
]

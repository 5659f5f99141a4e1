"""Overviews: the [MEMORY] block a project's next session gets, Live, and Stats."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import AuthError, read_scopes
from memstream.console import pages, views
from memstream.console.context import (
    capture_state,
    console_of,
    page,
    project_key_of,
    projects,
    scope_keys,
    viewer,
)
from memstream.console.html import Html
from memstream.recall import search as recall


async def block_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    project = request.query_params.get("project", "").strip()
    query = request.query_params.get("q", "").strip()[:4_000]
    text: str | None = None
    tokens = 0
    if project:
        try:
            keys = read_scopes(principal, project_key_of(project))
        except (AuthError, ValueError) as exc:
            return page(request, "[MEMORY] block", Html(""), "block", status=403, error=str(exc))
        shown = await recall.block_scopes(con.reads_for(principal, keys[0]), keys, query)
        text, tokens = shown.text, recall.estimate_tokens(shown.text)
    main = pages.block(project_key_of(project) if project else "", query, await projects(con, principal), text, tokens)
    return page(request, "[MEMORY] block", main, "block")


async def live_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    newest = await views.newest(con.reads_for(principal), await scope_keys(con, principal, ""))
    return page(request, "Live", pages.live(newest), "live")


async def stats_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    keys = await scope_keys(con, principal, "")
    shown = await views.stats(con.reads_for(principal), keys, await projects(con, principal))
    return page(request, "Stats", pages.stats(shown, capture_state(con.providers.settings)), "stats")


ROUTES = [
    Route("/block", block_view),
    Route("/live", live_view),
    Route("/stats", stats_view),
]

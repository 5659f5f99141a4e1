"""Stale code: a project's memories whose cited code changed, moved or is gone (issue 39), to forget in bulk.

Checked here, in the console's process, only where the work trees are on this host
(``MEMSTREAM_CHECK_CITATIONS``, the embedded default); elsewhere every status is said to be unknown.
The form posts to the memories' bulk forget (``/console/forget``).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import AuthError
from memstream.console import pages
from memstream.console.context import console_of, csrf_of, page, projects, scope_keys, viewer
from memstream.console.html import Html
from memstream.recall import staleness

#: The most memories one listing reads (newest first), as ``memstream doctor --stale``.
STALE_READ = 1000


async def stale_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    project = request.query_params.get("project", "").strip()
    try:
        keys = [key for key in await scope_keys(con, principal, project) if key.startswith("p_")]
    except (AuthError, ValueError) as exc:
        return page(request, "Stale code", Html(""), "stale", status=403, error=str(exc))
    memories = await con.providers.store.list(keys, limit=STALE_READ) if keys else []
    checker = staleness.checker_for(con.providers.settings)
    rows = await asyncio.to_thread(staleness.stale_memories, memories, checker)
    main = pages.stale(
        project,
        await projects(con, principal),
        rows,
        csrf_of(request),
        checked_here=checker is not None,
        read=len(memories),
    )
    return page(request, "Stale code", main, "stale")


ROUTES = [Route("/stale", stale_view)]

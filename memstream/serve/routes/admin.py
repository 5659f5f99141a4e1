"""Admin routes: documents (the document ingest, ``memstream.serve.documents_api``), the maintenance report,
and which projects share their members' conversations."""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import require_admin
from memstream.serve import documents_api
from memstream.serve.context import JSON, ApiError, caller, context_of, error, json_body, project_param

log = logging.getLogger(__name__)


async def documents(request: Request) -> Response:
    ctx = context_of(request)
    # Documents are not scoped to a principal yet: admin tokens only.
    require_admin(caller(request))
    query = dict(request.query_params)
    try:
        if request.method == "POST":
            try:
                body = msgspec.json.decode(await request.body())
            except msgspec.DecodeError:
                return error("the body must be JSON")
            max_bytes = ctx.providers.settings.document_max_content_bytes
            status, reply = await documents_api.add(body, ctx.send_document, max_bytes=max_bytes)
        elif request.method == "DELETE":
            status, reply = await documents_api.remove(ctx.providers.documents, query, ctx.send_document)
        else:
            status, reply = await documents_api.list_or_show(ctx.providers.documents, query)
    except ApiError as exc:
        return error(str(exc), 503)
    return JSON(reply, status_code=status)


async def maintenance(request: Request) -> Response:
    ctx = context_of(request)
    require_admin(caller(request))
    if ctx.maintenance is None:
        return error("no maintenance worker runs here", 503)
    if request.method == "POST":
        report = await ctx.maintenance.tick(mode="execute")
    else:
        report = await ctx.maintenance.tick(mode="observe")
    return JSON(msgspec.to_builtins(report))


async def sharing(request: Request) -> Response:
    """``GET``: the projects that share their members' conversations, and every change (``project``:
    that project's). ``POST {"project": DIR, "shared": bool}``: change it; the change is recorded with
    the admin who made it (its audit record) and returned."""
    ctx = context_of(request)
    principal = caller(request)
    require_admin(principal)
    if ctx.sharing is None:
        return error("this server has no token file: open mode reads everything already", 503)
    try:
        if request.method == "POST":
            body = await json_body(request)
            project = project_param(str(body.get("project", "")))
            shared = body.get("shared")
            if not isinstance(shared, bool):
                raise ApiError("'shared' must be true or false")
            change = ctx.sharing.set(project, shared, by=principal.name)
            log.info("%s set conversation sharing of %s to %s", principal.name, project, shared)
            return JSON({"change": msgspec.to_builtins(change), "shared": ctx.sharing.shared()})
        asked = request.query_params.get("project", "")
        project = project_param(asked) if asked else ""
    except ApiError as exc:
        return error(str(exc))
    changes = [msgspec.to_builtins(c) for c in ctx.sharing.changes(project)]
    return JSON({"shared": ctx.sharing.shared(), "changes": changes})


ROUTES = [
    Route("/documents", documents, methods=["GET", "POST", "DELETE"]),
    Route("/maintenance", maintenance, methods=["GET", "POST"]),
    Route("/admin/sharing", sharing, methods=["GET", "POST"]),
]

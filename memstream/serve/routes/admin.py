"""Admin routes: documents (the document ingest, ``memstream.serve.documents_api``) and the maintenance report."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import require_admin
from memstream.serve import documents_api
from memstream.serve.context import JSON, ApiError, caller, context_of, error


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


ROUTES = [
    Route("/documents", documents, methods=["GET", "POST", "DELETE"]),
    Route("/maintenance", maintenance, methods=["GET", "POST"]),
]

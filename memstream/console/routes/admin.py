"""For admin tokens: the Pipeline (lag, dead letters and their re-drive, the doctor) and documents."""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memstream.console import pages
from memstream.console.context import (
    BASE,
    Console,
    capture_state,
    console_of,
    csrf_of,
    first,
    form,
    page,
    pipeline_metrics,
    projects,
    viewer,
)
from memstream.console.html import Html


async def pipeline_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    if not principal.is_admin:
        return page(request, "Pipeline", Html("<p>For admin tokens only.</p>"), "pipeline", status=403)
    lag, processed, parked = pipeline_metrics(con.ctx)
    try:
        letters = (await con.pipeline_reads.letters.get()).value
    except Exception as exc:  # the page still says what it could not read
        return page(request, "Pipeline", Html(""), "pipeline", status=503, error=f"cannot read dead letters: {exc}")
    doctor = (await con.pipeline_reads.doctor.get()).value
    capture = capture_state(con.providers.settings)
    events = {"clients": con.ctx.events.clients, "dropped as slow": con.ctx.events.dropped} if con.ctx.events else {}
    main = pages.pipeline(lag, processed, parked, letters, doctor, capture, csrf_of(request), events)
    return page(request, "Pipeline", main, "pipeline", notice=request.query_params.get("notice", ""))


async def redrive(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    await form(request)
    if not principal.is_admin or not con.ctx.kafka_bootstrap:
        return page(
            request, "Pipeline", Html(""), "pipeline", status=403, error="re-drive needs an admin and the broker"
        )
    from memstream.ops.redrive import redrive as run

    report = await run(con.ctx.kafka_bootstrap, con.providers.settings.topic_prefix, by=f"console:{principal.name}")
    con.pipeline_reads.letters.forget()
    notice = f"re-drove {len(report.selection.chosen)} dead letter(s)"
    return RedirectResponse(f"{BASE}/pipeline?" + urllib.parse.urlencode({"notice": notice}), status_code=303)


async def documents_view(request: Request) -> Response:
    con = console_of(request)
    from memstream.serve import documents_api

    principal = viewer(request)
    if not principal.is_admin:
        return page(request, "Documents", Html("<p>For admin tokens only.</p>"), "documents", status=403)
    project = request.query_params.get("project", "").strip()
    listed: list[dict[str, Any]] = []
    error = ""
    if project:
        status, reply = await documents_api.list_or_show(con.providers.documents, {"project": project})
        listed = reply.get("documents", [])
        error = reply.get("error", "") if status >= 400 else ""
    choices = [(label.rsplit(" (", 1)[0], label) for _, label in await projects(con, principal)]
    main = pages.documents(project, choices, listed, csrf_of(request))
    return page(request, "Documents", main, "documents", error=error, notice=request.query_params.get("notice", ""))


async def documents_change(request: Request) -> Response:
    con = console_of(request)
    from memstream.serve import documents_api

    principal = viewer(request)
    fields = await form(request)
    if not principal.is_admin:
        return page(request, "Documents", Html(""), "documents", status=403, error="for admin tokens only")
    project = first(fields, "project")
    if request.url.path.endswith("/remove"):
        status, reply = await documents_api.remove(
            con.providers.documents, {"id": first(fields, "id")}, con.ctx.send_document
        )
    else:
        body = {"project": project, "title": first(fields, "title")}
        body.update(
            {"source": first(fields, "source")} if first(fields, "source") else {"content": first(fields, "content")}
        )
        try:
            status, reply = await documents_api.add(
                body, con.ctx.send_document, max_bytes=con.providers.settings.document_max_content_bytes
            )
        except ValueError as exc:
            status, reply = 503, {"error": str(exc)}
    if status >= 400:
        return page(request, "Documents", Html(""), "documents", status=status, error=str(reply.get("error", reply)))
    notice = "document removed" if request.url.path.endswith("/remove") else "document queued for ingest"
    return RedirectResponse(
        f"{BASE}/documents?" + urllib.parse.urlencode({"project": project, "notice": notice}), status_code=303
    )


async def forget_user_view(request: Request) -> Response:
    principal = viewer(request)
    if not principal.is_admin:
        return page(request, "Forget a user", Html("<p>For admin tokens only.</p>"), "forget-user", status=403)
    return page(request, "Forget a user", pages.forget_user(csrf_of(request)), "forget-user")


async def forget_user(request: Request) -> Response:
    """Forget a person, in two steps: what will be removed per scope, then (confirmed) the forget itself,
    through the API's own forget (``memstream.serve.routes.intake.forget_now``), and its per-scope report."""
    con = console_of(request)
    from memstream.intake.forget import ForgetError
    from memstream.serve.context import ApiError
    from memstream.serve.routes.intake import forget_now, forget_preview

    principal = viewer(request)
    fields = await form(request)
    if not principal.is_admin:
        return page(request, "Forget a user", Html(""), "forget-user", status=403, error="for admin tokens only")
    user = " ".join(first(fields, "user").split())
    if not user:
        main = pages.forget_user(csrf_of(request))
        return page(request, "Forget a user", main, "forget-user", status=400, error="give the person's identity")
    try:
        if first(fields, "confirm") != "yes":
            held = await forget_preview(con.ctx, user=user)
            main = pages.forget_user(csrf_of(request), user=user, scopes=await _where(con, held))
            return page(request, "Forget a user", main, "forget-user")
        report = await forget_now(con.ctx, principal, user=user)
    except (ForgetError, ApiError) as exc:
        main = pages.forget_user(csrf_of(request), user=user)
        return page(request, "Forget a user", main, "forget-user", status=400, error=str(exc))
    main = pages.forget_user(csrf_of(request), user=user, scopes=await _where(con, report["memories"]), report=report)
    return page(request, "Forget a user", main, "forget-user", notice=f"forgot {user}")


async def _where(con: Console, held: dict[str, int]) -> list[tuple[str, str, int]]:
    """(scope key, what it is, count) for each scope of a forget: a project by its path."""
    paths = {key: label.rsplit(" (", 1)[0] for key, label in await con.known.choices(list(held))}
    return [(key, paths.get(key, "(their own memories)" if key.startswith("u_") else ""), n) for key, n in held.items()]


ROUTES = [
    Route("/pipeline", pipeline_view),
    Route("/pipeline/redrive", redrive, methods=["POST"]),
    Route("/documents", documents_view),
    Route("/documents", documents_change, methods=["POST"]),
    Route("/documents/remove", documents_change, methods=["POST"]),
    Route("/forget-user", forget_user_view),
    Route("/forget-user", forget_user, methods=["POST"]),
]

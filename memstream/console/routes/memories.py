"""Memories: the list, one memory's page, the actions on it (forget, wrong, pin, correct, restore), export."""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import msgspec
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from memstream.auth import AuthError, may_read_scope
from memstream.console import actions, pages, views
from memstream.console.context import (
    BASE,
    all_recorded,
    back_to,
    block_keys,
    console_of,
    csrf_of,
    first,
    form,
    may_act,
    page,
    project_key_of,
    projects,
    readable,
    recorded,
    scope_keys,
    viewer,
    wait_for,
)
from memstream.console.html import Html
from memstream.recall import answers
from memstream.schemas import Memory


async def memories_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    params = {k: v.strip() for k, v in request.query_params.items()}
    try:
        keys = await scope_keys(con, principal, params.get("project", ""))
    except (AuthError, ValueError) as exc:
        return page(request, "Memories", Html(""), "memories", status=403, error=str(exc))
    scope_filter = params.get("scope", "")
    if scope_filter:
        keys = [k for k in keys if k.startswith("u_" if scope_filter == "user" else "p_")]
    project = project_key_of(params["project"]) if params.get("project") else ""
    reads = con.reads_for(principal, project)
    listing = await views.memories_listing(reads, keys, params)
    con.known.remember([r.memory for r in listing.rows])
    main = pages.memories(
        params,
        await projects(con, principal),
        listing.rows,
        csrf_of(request),
        sources=await con.known.sources(keys),
        total=listing.total,
        next_cursor=listing.next_cursor,
        problems=listing.problems,
        filtered=listing.filtered,
    )
    notice = params.get("notice", "") or (sharing_note(con.ctx.shares(project)) if project else "")
    return page(request, "Memories", main, "memories", notice=notice)


def sharing_note(shared: bool) -> str:
    """What the project's sharing setting (an admin's: ``memstream share``) means for who reads what."""
    if shared:
        return "This project shares its members' conversations: every member reads every exchange."
    return "Each member of this project reads only their own conversations; its facts and documents are shared."


async def memory_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    memory_id = request.path_params["memory_id"]
    found = await readable(con, principal, memory_id)
    if found is None:
        return page(request, "Not found", Html("<p>No such memory.</p>"), "memories", status=404)
    records = await con.providers.history.for_memory(found.id, limit=200)
    around = None
    neighbours: list[Memory] = []
    if con.providers.graph is not None:
        around = await con.providers.graph.around_memory(found.id)
        for other in around.memory_ids:
            seen = await readable(con, principal, other)
            if seen is not None:
                neighbours.append(seen)
    successor = None
    if found.superseded_by and ":" not in found.superseded_by:
        successor = await readable(con, principal, found.superseded_by)
    predecessor_ids = {r.memory_id for r in records if r.target_id == found.id and r.memory_id != found.id}
    predecessors = [m for m in [await readable(con, principal, i) for i in sorted(predecessor_ids)] if m is not None]
    con.known.remember([found])
    main = pages.memory(
        found,
        records,
        around,
        neighbours,
        successor,
        predecessors,
        csrf_of(request),
        may_act=may_act(principal, found),
        graph_enabled=con.providers.graph is not None,
        in_block=await views.block_verdict(
            con.reads_for(principal, found.scope_key if found.scope_key.startswith("p_") else ""),
            found,
            block_keys(principal, found),
        ),
    )
    return page(request, "Memory", main, "memories", notice=request.query_params.get("notice", ""))


async def act(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    action = request.path_params["action"]
    try:
        fields = await form(request)
    except AuthError as exc:
        return page(request, "Refused", Html(""), "memories", status=403, error=str(exc))
    found = await readable(con, principal, request.path_params["memory_id"])
    if found is None:
        return page(request, "Not found", Html("<p>No such memory.</p>"), "memories", status=404)
    if not may_act(principal, found) or con.ctx.send_memory_op is None:
        return page(
            request, "Refused", Html(""), "memories", status=403, error="this token cannot change memories here"
        )
    if action == "restore":
        try:
            vector = await con.providers.store.vector(found.id)
            if vector is None:
                raise actions.ActionError("its vector is gone: it cannot be restored")
            back = actions.restore(found, first(fields, "reason"), vector, by=principal.name)
        except actions.ActionError as exc:
            return back_to(found.id, "", error=str(exc))
        await con.ctx.send_memory_op(back)
        await wait_for(lambda: recorded(con, found.id, back.op_id))
        return back_to(found.id, "restored")
    if found.superseded_by is not None:
        return back_to(found.id, "it is already superseded: nothing changed")
    by = principal.name
    try:
        if action == "forget":
            op = actions.forget(found, first(fields, "reason"), by=by)
            await con.ctx.send_memory_op(op)
            done = await wait_for(lambda: recorded(con, found.id, op.op_id))
            return RedirectResponse(
                f"{BASE}/?" + urllib.parse.urlencode({"notice": "forgotten" if done else "forget on its way"}),
                status_code=303,
            )
        if action == "wrong":
            wrong = actions.mark_wrong(found, first(fields, "reason"), by=by)
            await con.ctx.send_memory_op(wrong)
            await wait_for(lambda: recorded(con, found.id, wrong.op_id))
            return back_to(found.id, "marked wrong")
        if action in ("pin", "unpin"):
            pinning = actions.pin(found, pinned=action == "pin", by=by)
            await con.ctx.send_memory_op(pinning)
            await wait_for(lambda: recorded(con, found.id, pinning.op_id))
            return back_to(found.id, f"{action}ned")
        if action == "correct":
            text = actions.corrected_text(first(fields, "text"))
            vector = (await con.providers.embedder.embed_documents([text]))[0]
            create, supersede = actions.correct(
                found,
                text,
                first(fields, "reason"),
                vector,
                by=by,
                embedding_model=con.providers.embedder.model,
                now=datetime.now(UTC),
            )
            await con.ctx.send_memory_op(create)
            await con.ctx.send_memory_op(supersede)
            await wait_for(lambda: recorded(con, found.id, supersede.op_id))
            return back_to(create.memory.id, "corrected: this is the new memory")
    except actions.ActionError as exc:
        return back_to(found.id, "", error=str(exc))
    return page(request, "Not found", Html("<p>No such action.</p>"), "memories", status=404)


async def forget_many(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    try:
        fields = await form(request)
    except AuthError as exc:
        return page(request, "Refused", Html(""), "memories", status=403, error=str(exc))
    if con.ctx.send_memory_op is None:
        return page(request, "Refused", Html(""), "memories", status=503, error="this process cannot change memories")
    chosen = [m for m in [await readable(con, principal, i) for i in fields.get("id", [])[:500]] if m is not None]
    chosen = [m for m in chosen if m.active and may_act(principal, m)]
    if not chosen:
        return RedirectResponse(f"{BASE}/?" + urllib.parse.urlencode({"notice": "nothing selected"}), status_code=303)
    try:
        ops = [actions.forget(m, first(fields, "reason"), by=principal.name) for m in chosen]
    except actions.ActionError as exc:
        return RedirectResponse(f"{BASE}/?" + urllib.parse.urlencode({"notice": str(exc)}), status_code=303)
    for op in ops:
        await con.ctx.send_memory_op(op)
    await wait_for(lambda: all_recorded(con, [(op.memory_id, op.op_id) for op in ops]))
    notice = f"forgot {len(chosen)} memor{'y' if len(chosen) == 1 else 'ies'}"
    return RedirectResponse(f"{BASE}/?" + urllib.parse.urlencode({"notice": notice}), status_code=303)


async def export(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    keys = await scope_keys(con, principal, "")

    async def lines() -> AsyncIterator[bytes]:
        for key in keys:
            reads = con.reads_for(principal, key if key.startswith("p_") else "")
            for m in await reads.store.list([key], include_superseded=True, limit=1_000_000):
                if may_read_scope(principal, m.scope_key):
                    yield msgspec.json.encode(answers.full_record(m)) + b"\n"  # the shape `get` returns

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="memstream-{stamp}.jsonl"'},
    )


ROUTES = [
    Route("/", memories_view),
    Route("/memories/{memory_id}", memory_view),
    Route("/memories/{memory_id}/{action}", act, methods=["POST"]),
    Route("/forget", forget_many, methods=["POST"]),
    Route("/export", export),
]

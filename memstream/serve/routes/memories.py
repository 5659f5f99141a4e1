"""Memories by id and by project, adding one (``POST /memories``), forgetting one, and their audit history."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import Forbidden, check_publish, require_admin
from memstream.identity import derived_id
from memstream.intake.remember import RememberError, expected_memory_id, make_fact
from memstream.recall import answers
from memstream.schemas import Fact, SupersedeMemory
from memstream.serve.context import (
    FORGET_CAUSE,
    FORGOTTEN,
    JSON,
    MAX_IDS,
    MAX_MEMORY_CHARS,
    WRITE_POLL_S,
    WRITE_WAIT_S,
    ApiContext,
    ApiError,
    caller,
    check_user_write,
    context_of,
    error,
    get_memory,
    handed,
    json_body,
    limit_param,
    project_param,
    read_scope_keys,
    record_usage,
    required_field,
)


async def memories(request: Request) -> Response:
    """Every stored memory, superseded ones included (for replays and audits), newest first;
    with ``project``, the active memories of the project (and the user), ``type`` to narrow."""
    ctx = context_of(request)
    if "ids" in request.query_params:
        return await memories_by_id(request)
    try:
        if request.query_params.get("project"):
            limit = limit_param(request, 50, 1000)
            keys = read_scope_keys(request)
            kind = request.query_params.get("type", "").strip()
            detail = request.query_params.get("detail", "full")
            if detail not in answers.DETAILS:
                raise ApiError(f"'detail' must be one of {', '.join(answers.DETAILS)}")
            speaker = ctx.speaker_for(caller(request), keys)
            listed = await ctx.providers.store.list(keys, types=[kind] if kind else None, limit=limit, speaker=speaker)
            if detail == "index":
                return JSON(answers.timeline_index(listed))
            return JSON({"memories": [answers.full_record(m) for m in listed]})
        require_admin(caller(request))  # every scope's memories
        limit = limit_param(request, 10_000, 100_000)
    except ApiError as exc:
        return error(str(exc))
    stored = await ctx.providers.store.list(None, include_superseded=True, limit=limit)
    return JSON({"memories": [msgspec.to_builtins(m) for m in stored]})


async def memories_by_id(request: Request) -> Response:
    """The full records of several memories at once (``ids``, comma-separated), in the order asked;
    ids that name no memory the caller may read are listed as ``missing``."""
    ctx = context_of(request)
    asked = list(dict.fromkeys(i.strip() for i in request.query_params["ids"].split(",") if i.strip()))
    if not asked:
        return error("'ids' must list one or more memory ids, separated by commas")
    if len(asked) > MAX_IDS:
        return error(f"'ids' lists {len(asked)} memories; ask for at most {MAX_IDS} at once")
    principal = caller(request)
    found = await asyncio.gather(*(get_memory(ctx, memory_id, principal) for memory_id in asked))
    shown = [memory for memory in found if memory is not None]
    await record_usage(ctx, shown)
    missing = [memory_id for memory_id, memory in zip(asked, found, strict=True) if memory is None]
    return handed("get", {"memories": [answers.full_record(m) for m in shown], "missing": missing})


async def memory(request: Request) -> Response:
    ctx = context_of(request)
    found = await get_memory(ctx, request.path_params["memory_id"], caller(request))
    if found is None:
        return error(f"no memory {request.path_params['memory_id']}", 404)
    return JSON({"memory": answers.full_record(found)})


async def add(request: Request) -> Response:
    ctx = context_of(request)
    if ctx.send_fact is None:
        return error("this process serves reads only: add memories through `memstream up`", 503)
    principal = caller(request)
    try:
        body = await json_body(request)
        project = str(body.get("project", "") or "")
        claimed = str(body.get("user", ""))
        if project or body.get("scope") != "user":
            project = project or required_field("project")
            # As the caller only: its projects, its own user (a turn's rule, POST /turns's too).
            check_publish(principal, project_param(project), claimed)
        else:
            # A user memory belongs to no project: only the caller's own user scope is written.
            check_user_write(principal, claimed)
        text = str(body.get("text", ""))
        if len(text) > MAX_MEMORY_CHARS:
            raise ApiError(f"the text is longer than {MAX_MEMORY_CHARS} characters (a memory is a statement)")
        fact = make_fact(
            text,
            project=project,
            user=principal.user,
            type=body.get("type") or None,
            scope=body.get("scope") or None,
            origin=str(body.get("origin", "")) or "api:add",
        )
    except (ApiError, RememberError) as exc:
        return error(str(exc))
    await ctx.send_fact(fact)
    return JSON(await _added(ctx, fact), status_code=200)


async def _added(ctx: ApiContext, fact: Fact) -> dict[str, Any]:
    """The fact's outcome once the store shows it, else that it is still in flight."""
    expected = expected_memory_id(fact)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WRITE_WAIT_S
    while True:
        stored = await ctx.providers.store.get(expected)
        if stored is not None and stored.active and stored.updated_at >= fact.ts:
            return {
                "status": "stored",
                "id": stored.id,
                "fact_id": fact.fact_id,
                "memory": answers.full_record(stored),
            }
        for record in await ctx.providers.history.for_scope(fact.scope_key, limit=50):
            if record.fact_id != fact.fact_id:
                continue
            if record.memory_id:
                found = await ctx.providers.store.get(record.memory_id)
                if found is not None:
                    return {
                        "status": "stored" if record.outcome == "created" else record.outcome,
                        "id": found.id,
                        "fact_id": fact.fact_id,
                        "memory": answers.full_record(found),
                    }
            if record.outcome in ("skipped", "recorded", "blocked", "proposed"):
                return {
                    "status": record.outcome,
                    "id": record.memory_id,
                    "fact_id": fact.fact_id,
                    "reason": record.reason,
                }
        if loop.time() >= deadline:
            return {"status": "in-flight", "id": expected, "fact_id": fact.fact_id}
        await asyncio.sleep(WRITE_POLL_S)


async def forget(request: Request) -> Response:
    ctx = context_of(request)
    if ctx.send_memory_op is None:
        return error("this process serves reads only: forget memories through `memstream up`", 503)
    memory_id = request.path_params["memory_id"]
    try:
        body = await json_body(request)
    except ApiError as exc:
        return error(str(exc))
    reason = " ".join(str(body.get("reason", "")).split())
    if not reason:
        return error("give the 'reason' for forgetting (it goes into the memory's audit trail)")
    principal = caller(request)
    found = await get_memory(ctx, memory_id, principal)
    if found is None:
        return error(f"no memory {memory_id}", 404)
    if not principal.is_admin and not principal.user:
        raise Forbidden("a token without a user does not forget memories")
    if not found.active:
        return JSON({"status": "already-forgotten", "id": memory_id, "superseded_by": found.superseded_by})
    now = datetime.now(UTC)
    op_id = derived_id("forget", memory_id, now.isoformat())
    await ctx.send_memory_op(
        SupersedeMemory(
            op_id=op_id,
            scope_key=found.scope_key,
            memory_id=memory_id,
            superseded_by=f"{FORGOTTEN}{op_id}",
            cause=f"{FORGET_CAUSE}{reason}",
            requested_by=principal.name,
        )
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WRITE_WAIT_S
    while loop.time() < deadline:
        current = await ctx.providers.store.get(memory_id)
        if current is None or not current.active:
            return JSON({"status": "forgotten", "id": memory_id, "reason": reason})
        await asyncio.sleep(WRITE_POLL_S)
    return JSON({"status": "in-flight", "id": memory_id, "reason": reason})


async def history(request: Request) -> Response:
    """Audit records about a memory, or the newest of a scope's, oldest first."""
    ctx = context_of(request)
    memory_id = request.query_params.get("memory_id", "").strip()
    scope = request.query_params.get("scope", "").strip()
    project = request.query_params.get("project", "").strip()
    if not (memory_id or scope or project):
        return error("one of the 'memory_id', 'scope' or 'project' parameters is required")
    try:
        limit = limit_param(request, 100, 10_000)
    except ApiError as exc:
        return error(str(exc))
    principal = caller(request)
    about: dict[str, Any]
    if memory_id:
        if not principal.is_admin and await get_memory(ctx, memory_id, principal) is None:
            return error(f"no memory {memory_id}", 404)  # a memory the caller may not read
        about = {"memory_id": memory_id}
        records = await ctx.providers.history.for_memory(memory_id, limit=limit)
    else:
        require_admin(principal)  # a whole scope's audit trail
        try:
            scope_key = scope or project_param(project)
        except ApiError as exc:
            return error(str(exc))
        about = {"scope_key": scope_key}
        # The newest ``limit`` of the scope, read newest first, served in time order.
        records = list(reversed(await ctx.providers.history.for_scope(scope_key, limit=limit)))
    return JSON({**about, "records": [msgspec.to_builtins(r) for r in records]})


ROUTES = [
    Route("/memories", memories, methods=["GET"]),
    Route("/memories", add, methods=["POST"]),
    Route("/memories/{memory_id}", memory, methods=["GET"]),
    Route("/memories/{memory_id}/forget", forget, methods=["POST"]),
    Route("/history", history),
]

"""What enters through the API: turns (``POST /turns``) and forgetting a user or a project (admin)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import Principal, check_publish, require_admin
from memstream.identity import project_key
from memstream.schemas import Turn
from memstream.serve.context import JSON, ApiContext, ApiError, caller, context_of, error, project_param, read_body
from memstream.store.base import MemoryStore


async def turns(request: Request) -> Response:
    """Publish turns as the caller: each turn's project must be one of its projects, its user
    (if given) the caller's; the caller's user is filled in. All or nothing."""
    ctx = context_of(request)
    principal = caller(request)
    if ctx.publish_turns is None:
        return error("this process does not publish turns", 503)
    from memstream.schemas import DecodeError, decode

    try:
        raw = msgspec.json.decode(await read_body(request))
        if not isinstance(raw, list):
            raise DecodeError("not a list")
        # Through the codec: turn.v1 events decode into today's Turn, as on the topic.
        given = [decode(msgspec.json.encode(item)) for item in raw]
        if not all(isinstance(turn, Turn) for turn in given):
            raise DecodeError("every item must be a turn")
    except (msgspec.DecodeError, DecodeError) as exc:
        return error(f"the body must be a JSON list of turns: {exc}")
    checked: list[Turn] = []
    for turn in given:
        assert isinstance(turn, Turn)
        if not turn.project.startswith("/"):
            return error("a turn's project must be an absolute directory path")
        check_publish(principal, project_key(turn.project), turn.user)
        checked.append(msgspec.structs.replace(turn, user=principal.user))
    await ctx.publish_turns(checked)
    return JSON({"published": len(checked)}, status_code=202)


async def forget_scope(request: Request) -> Response:
    """Forget a user or a project, through the pipeline (memstream.agents.forget)."""
    ctx = context_of(request)
    from memstream.intake.forget import ForgetError

    principal = caller(request)
    require_admin(principal)
    if ctx.publish_forget is None:
        return error("this process does not publish forgets", 503)
    try:
        body = msgspec.json.decode(await read_body(request), type=dict[str, str])
        if set(body) - {"user", "project"}:
            raise ForgetError("the body takes 'user' or 'project'")
        report = await forget_now(ctx, principal, user=body.get("user", ""), project=body.get("project", ""))
    except (msgspec.ValidationError, msgspec.DecodeError, ForgetError, ApiError) as exc:
        return error(str(exc))
    return JSON(report, status_code=202)


async def forget_now(ctx: ApiContext, principal: Principal, *, user: str = "", project: str = "") -> dict[str, Any]:
    """Forget a user or a project as ``principal`` (an admin) and say what was removed, per scope: the one
    way every entry point forgets a scope (``POST /admin/forget``, hence the CLI and MCP's ``forget_user``;
    the console's form). Raises ``ForgetError`` or ``ApiError`` for a bad scope, ``Forbidden`` for a non-admin."""
    from memstream.intake.forget import ForgetError, forget_event

    require_admin(principal)
    if ctx.publish_forget is None:
        raise ForgetError("this process does not publish forgets")
    if project:
        project_param(project)
    event = forget_event(
        user=user,
        project=project,
        requested_by=principal.describe(),
        words_retention_ms=int(ctx.providers.settings.words_retention_days * 86_400_000),
    )
    held = await memories_held(ctx.providers.store, event.scope_key, user=event.scope == "user")
    await ctx.publish_forget(event)
    removed, done = await removed_by_scope(ctx.providers.store, held)
    return {
        "scope": event.scope,
        "scope_key": event.scope_key,
        "forgotten_at": event.forgotten_at.isoformat(),
        # Per scope: the memories holding the scope's words (a user's: their exchanges in every
        # project too) when the forget was sent, and how many of them the pipeline has removed.
        "memories": {scope: len(ids) for scope, ids in held.items()},
        "removed": removed,
        "done": done,
        # What the forget cannot reach: the topics still holding the scope's words, until when.
        "words_held_until": {
            topic: until.isoformat() if until else None for topic, until in event.words_held_until.items()
        },
    }


async def forget_preview(ctx: ApiContext, *, user: str) -> dict[str, int]:
    """What a forget of ``user`` would remove, per scope (nothing is sent): the console's confirmation."""
    from memstream.identity import user_key

    held = await memories_held(ctx.providers.store, user_key(user), user=True)
    return {scope: len(ids) for scope, ids in held.items()}


#: The most memories of one forgotten scope the reply counts (the pipeline removes them all).
FORGET_REPORT_MAX = 100_000
#: How long the reply waits for the pipeline to remove them before it says how far it got.
FORGET_WAIT_S = 10.0


async def memories_held(store: MemoryStore, scope_key: str, *, user: bool) -> dict[str, set[str]]:
    """The ids of the memories a forget of ``scope_key`` removes, by scope: the scope's own and, for a
    user, every memory of another scope that holds their words (their exchanges, ``Memory.speaker``)."""
    found = await store.list([scope_key], include_superseded=True, limit=FORGET_REPORT_MAX)
    if user:
        found += await store.list(None, include_superseded=True, limit=FORGET_REPORT_MAX, spoken_by=scope_key)
    held: dict[str, set[str]] = {scope_key: set()}
    for memory in found:
        held.setdefault(memory.scope_key, set()).add(memory.id)
    return held


async def removed_by_scope(store: MemoryStore, held: dict[str, set[str]]) -> tuple[dict[str, int], bool]:
    """How many of ``held`` are gone from the store, by scope, waiting up to FORGET_WAIT_S for all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FORGET_WAIT_S
    while True:
        stored = {m.id for m in await store.list(list(held), include_superseded=True, limit=FORGET_REPORT_MAX)}
        removed = {scope: len(ids - stored) for scope, ids in held.items()}
        done = all(removed[scope] == len(ids) for scope, ids in held.items())
        if done or loop.time() >= deadline:
            return removed, done
        await asyncio.sleep(0.1)


ROUTES = [
    Route("/turns", turns, methods=["POST"]),
    Route("/admin/forget", forget_scope, methods=["POST"]),
]

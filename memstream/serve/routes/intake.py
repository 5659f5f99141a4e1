"""What enters through the API: turns (``POST /turns``) and forgetting a user or a project (admin)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memstream.auth import check_publish, require_admin
from memstream.identity import project_key
from memstream.schemas import Turn
from memstream.serve.context import JSON, ApiError, caller, context_of, error, project_param, read_body


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
    from memstream.intake.forget import ForgetError, forget_event

    principal = caller(request)
    require_admin(principal)
    if ctx.publish_forget is None:
        return error("this process does not publish forgets", 503)
    try:
        body = msgspec.json.decode(await read_body(request), type=dict[str, str])
        if set(body) - {"user", "project"}:
            raise ForgetError("the body takes 'user' or 'project'")
        project = body.get("project", "")
        if project:
            project_param(project)
        event = forget_event(
            user=body.get("user", ""),
            project=project,
            requested_by=principal.describe(),
            words_retention_ms=int(ctx.providers.settings.words_retention_days * 86_400_000),
        )
    except (msgspec.ValidationError, msgspec.DecodeError, ForgetError, ApiError) as exc:
        return error(str(exc))
    await ctx.publish_forget(event)
    return JSON(
        {
            "scope": event.scope,
            "scope_key": event.scope_key,
            "forgotten_at": event.forgotten_at.isoformat(),
            # What the forget cannot reach: the topics still holding the scope's words, until when.
            "words_held_until": {
                topic: until.isoformat() if until else None for topic, until in event.words_held_until.items()
            },
        },
        status_code=202,
    )


ROUTES = [
    Route("/turns", turns, methods=["POST"]),
    Route("/admin/forget", forget_scope, methods=["POST"]),
]

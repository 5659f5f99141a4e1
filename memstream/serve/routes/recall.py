"""The read side: ``/search``, ``/timeline``, ``/block`` and the ``/events`` stream."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from memstream.recall import answers, staleness
from memstream.recall import search as recall
from memstream.recall import timeline as timelines
from memstream.serve.context import (
    ApiError,
    caller,
    context_of,
    count_param,
    error,
    get_memory,
    handed,
    limit_param,
    query_param,
    read_scope_keys,
    record_usage,
)
from memstream.telemetry import metrics

log = logging.getLogger(__name__)


async def search(request: Request) -> Response:
    ctx = context_of(request)
    documents = request.query_params.get("documents", "include")
    if documents not in recall.DOCUMENT_FILTERS:
        return error(f"'documents' must be one of {', '.join(recall.DOCUMENT_FILTERS)}")
    detail = request.query_params.get("detail", "index")
    if detail not in answers.DETAILS:
        return error(f"'detail' must be one of {', '.join(answers.DETAILS)}")
    try:
        query = query_param(request, required=True)
        keys = read_scope_keys(request)
        limit = limit_param(request, 10, 100)
    except ApiError as exc:
        return error(str(exc))
    speaker = ctx.speaker_for(caller(request), keys)
    hits = await recall.search_scopes(ctx.providers, query, keys, limit=limit, documents=documents, speaker=speaker)
    await record_usage(ctx, [hit.memory for hit in hits])
    if detail == "full":
        return handed("search", {"query": query, "score": "fused", "results": [answers.full_hit(h) for h in hits]})
    index = answers.search_index(hits)
    handed_index = handed("search", index)  # what the agent is handed is counted, not what a client checks with
    if request.query_params.get("cited") == "1":  # as /block's: the rows that cite code, for a client to check
        checked = staleness.checker_for(ctx.providers.settings) is not None
        cited = staleness.cited_entries([hit.memory for hit in hits])
        return JSONResponse({**index, "checked": checked, "cited": cited})
    return handed_index


async def timeline(request: Request) -> Response:
    """The compact rows stored around a memory (``id``) or of a session (``session``), in order."""
    ctx = context_of(request)
    anchor_id = request.query_params.get("id", "").strip()
    session = request.query_params.get("session", "").strip()
    if bool(anchor_id) == bool(session):
        return error("give either 'id' (a memory to look around) or 'session' (a session to follow)")
    try:
        keys = read_scope_keys(request)
        before = count_param(request, "before", timelines.AROUND)
        after = count_param(request, "after", timelines.AROUND)
        limit = limit_param(request, timelines.SESSION_LIMIT, timelines.MOST)
    except ApiError as exc:
        return error(str(exc))
    speaker = ctx.speaker_for(caller(request), keys)
    if session:
        found = await timelines.of_session(ctx.providers.store, keys, session, limit=limit, speaker=speaker)
        return handed("timeline", {"session": session, **answers.timeline_index(found)})
    anchor = await get_memory(ctx, anchor_id, caller(request))
    if anchor is None or anchor.scope_key not in keys:
        return error(f"no memory {anchor_id} in this project or your user scope", 404)
    shown = await timelines.around(ctx.providers.store, keys, anchor, before=before, after=after, speaker=speaker)
    return handed("timeline", answers.timeline_index(shown, anchor=anchor.id))


async def block(request: Request) -> Response:
    ctx = context_of(request)
    try:
        query = query_param(request, required=False)
        keys = read_scope_keys(request)
    except ApiError as exc:
        return error(str(exc))
    try:
        max_tokens = int(request.query_params.get("max_tokens", "0") or "0") or None
    except ValueError:
        return error("'max_tokens' must be a whole number")
    if max_tokens is not None and max_tokens < 100:
        return error("'max_tokens' must be at least 100")
    speaker = ctx.speaker_for(caller(request), keys)
    shown = await recall.block_scopes(ctx.providers, keys, query, max_tokens=max_tokens, speaker=speaker)
    await record_usage(ctx, shown.memories)
    metrics.INJECTED_TOKENS.labels("block").observe(recall.estimate_tokens(shown.text))
    if request.query_params.get("cited") == "1":
        # For a client where the work tree is (hook, MCP stdio): the cited entries, and whether this
        # server checked them itself (docs/recall.md, "Citations").
        checked = staleness.checker_for(ctx.providers.settings) is not None
        cited = staleness.cited_entries(shown.memories)
        return JSONResponse({"text": shown.text, "checked": checked, "cited": cited})
    return PlainTextResponse(shown.text)


async def events(request: Request) -> Response:
    """Memory-updated events the caller may read, as Server-Sent Events (memstream.serve.events)."""
    ctx = context_of(request)
    principal = caller(request)
    if ctx.events is None:
        return error("this process does not follow memory-updated events", 503)
    try:
        stream = await ctx.events.open_stream(principal, request.headers.get("last-event-id"), ctx.shares)
    except Exception as exc:  # the topic cannot be read (yet): say so, the client retries
        log.warning("GET /events: cannot follow memory-updated: %s", exc)
        return error(f"cannot follow memory-updated events right now: {exc}", 503)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        # no-transform and X-Accel-Buffering: proxies must pass each event on as it comes.
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
    )


ROUTES = [
    Route("/search", search),
    Route("/timeline", timeline),
    Route("/block", block),
    Route("/events", events),
]

"""Overviews: the [MEMORY] block a project's next session gets, Live, and Stats."""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from memstream import hosts
from memstream.auth import AuthError, Forbidden, Principal, may_read_scope, read_scopes
from memstream.console import actions, pages, views
from memstream.console.context import (
    BASE,
    capture_state,
    console_of,
    csrf_of,
    first,
    form,
    page,
    project_key_of,
    projects,
    scope_keys,
    viewer,
)
from memstream.console.html import Html
from memstream.identity import derived_id
from memstream.recall import injected, session_start
from memstream.recall import search as recall
from memstream.schemas import HistoryRecord
from memstream.schemas.injected import ContextSettings

#: The budgets a project may set (the API's /block takes at least 100; MCP's at most 50,000).
MIN_BUDGET, MAX_BUDGET = 100, 50_000


#: Every section title the settings can leave out, in the block's order.
SECTION_TITLES: tuple[str, ...] = (
    recall.CONSOLIDATED_TITLE,
    *(title for title, _ in recall.SECTIONS),
    recall.RELEVANT,
)
#: Every type the block shows, in the block's order.
BLOCK_TYPES: tuple[str, ...] = (recall.CONSOLIDATED, *(t for _, types in recall.SECTIONS for t in types))


def may_configure(principal: Principal, key: str) -> bool:
    """An admin, or a user the project is given (its owner), may change its injected context."""
    return may_read_scope(principal, key) and (principal.is_admin or bool(principal.user))


def host_previews(text: str, chosen: ContextSettings) -> list[pages.HostPreview]:
    shown = []
    for host in hosts.HOSTS:
        if not host.session_start:
            why = "has no SessionStart hook: nothing is injected when its session starts"
            shown.append(pages.HostPreview(host.name, "", why))
            continue
        output = session_start.output_for(text)
        why = "prints nothing: injected context is off for this project" if not chosen.enabled else ""
        shown.append(pages.HostPreview(host.name, output, why or "prints nothing: no memory would be injected"))
    return shown


async def block_view(request: Request) -> Response:
    con = console_of(request)
    principal = viewer(request)
    project = request.query_params.get("project", "").strip()
    query = request.query_params.get("q", "").strip()[:4_000]
    text: str | None = None
    tokens = 0
    form: pages.BlockSettings | None = None
    previews: list[pages.HostPreview] = []
    if project:
        try:
            key = project_key_of(project)
            keys = read_scopes(principal, key)
        except (AuthError, ValueError) as exc:
            return page(request, "[MEMORY] block", Html(""), "block", status=403, error=str(exc))
        reads = con.reads_for(principal, keys[0])
        shown = await views.block_preview(reads, keys, query)
        text, tokens = shown.text, recall.estimate_tokens(shown.text)
        hook = shown if not query else await views.block_preview(reads, keys)
        chosen = injected.settings_file(con.providers.settings.data_dir).of(key)
        previews = host_previews(hook.text, chosen)
        changes = await con.providers.history.for_memory(injected.trail_id(key), limit=20)
        budget = chosen.max_tokens or con.providers.settings.block_max_tokens
        form = pages.BlockSettings(
            chosen, may_configure(principal, key), csrf_of(request), SECTION_TITLES, BLOCK_TYPES, budget, changes
        )
    main = pages.block(
        project_key_of(project) if project else "",
        query,
        await projects(con, principal),
        text,
        tokens,
        form,
        previews,
    )
    return page(request, "[MEMORY] block", main, "block", notice=request.query_params.get("notice", ""))


def chosen_of(fields: dict[str, list[str]], key: str, principal: Principal, now: datetime | None) -> ContextSettings:
    """The settings the form's fields choose for the project ``key`` (an ActionError for a bad budget)."""
    kept_sections = set(fields.get("section", []))
    kept_types = set(fields.get("type", []))
    try:
        max_tokens = int(first(fields, "max_tokens").strip() or "0")
    except ValueError:
        raise actions.ActionError("the token budget must be a whole number") from None
    if max_tokens and not MIN_BUDGET <= max_tokens <= MAX_BUDGET:
        raise actions.ActionError(f"the token budget must be 0 or between {MIN_BUDGET} and {MAX_BUDGET}")
    return ContextSettings(
        scope_key=key,
        enabled=first(fields, "enabled") == "on",
        hidden_sections=[t for t in SECTION_TITLES if t not in kept_sections],
        hidden_types=[t for t in BLOCK_TYPES if t not in kept_types],
        max_tokens=max_tokens,
        changed_by=principal.name,
        changed_at=now,
        reason=actions.reason_of(first(fields, "reason"), required=False),
    )


async def configurable(request: Request) -> tuple[dict[str, list[str]], str, Principal]:
    """The settings form's fields (CSRF-checked), its project and the caller, who may change them."""
    principal = viewer(request)
    fields = await form(request)
    key = project_key_of(first(fields, "project").strip())
    if not may_configure(principal, key):
        raise Forbidden("only an admin or the project's owner may change what its sessions get injected")
    return fields, key, principal


async def block_settings_change(request: Request) -> Response:
    """Saves a project's injected-context settings (admin or owner; CSRF-checked) and audits the change."""
    con = console_of(request)
    fields, key, principal = await configurable(request)
    now = datetime.now(UTC)
    chosen = chosen_of(fields, key, principal, now)
    injected.settings_file(con.providers.settings.data_dir).save(chosen)
    record = HistoryRecord(
        record_id=derived_id("context-settings", key, now.isoformat()),
        memory_id=injected.trail_id(key),
        scope_key=key,
        outcome="configured",
        reason=injected.describe(chosen),
        origin="console",
        requested_by=principal.name,
        ts=now,
    )
    await con.providers.history.append([record])
    notice = "injected context saved: " + injected.describe(chosen)
    target = f"{BASE}/block?" + urllib.parse.urlencode({"project": key, "notice": notice})
    return RedirectResponse(target, status_code=303)


async def block_settings_preview(request: Request) -> Response:
    """What the next session would get with the form's choices, before they are saved: the same checks as
    saving (CSRF, admin or owner), and nothing written (no settings, no audit record). JSON for the page's
    script (``Accept: application/json``), else the block page showing the preview under the unsaved form."""
    con = console_of(request)
    fields, key, principal = await configurable(request)
    # Only what shapes the block: the same choices give the same kept preview.
    chosen = chosen_of(fields, key, principal, None)
    shaping = ContextSettings(
        scope_key=key,
        enabled=chosen.enabled,
        hidden_sections=chosen.hidden_sections,
        hidden_types=chosen.hidden_types,
        max_tokens=chosen.max_tokens,
    )
    keys = read_scopes(principal, key)
    shown = await views.block_preview(con.reads_for(principal, keys[0]), keys, settings=shaping)
    budget = chosen.max_tokens or con.providers.settings.block_max_tokens
    previews = host_previews(shown.text, chosen)
    # Off, or nothing left: the hooks print nothing, and the preview says so rather than show empty brackets.
    text = shown.text if session_start.has_memories(shown.text) else ""
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(
            {
                "text": text,
                "tokens": recall.estimate_tokens(text),
                "budget": budget,
                "settings": injected.describe(chosen),
                "hosts": [{"host": h.host, "output": h.output, "why": h.why} for h in previews],
            }
        )
    changes = await con.providers.history.for_memory(injected.trail_id(key), limit=20)
    form_shown = pages.BlockSettings(chosen, True, csrf_of(request), SECTION_TITLES, BLOCK_TYPES, budget, changes)
    main = pages.block(
        key,
        "",
        await projects(con, principal),
        None,
        0,
        form_shown,
        preview=pages.SettingsPreview(text, recall.estimate_tokens(text), budget, previews),
    )
    return page(request, "[MEMORY] block: preview", main, "block")


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
    Route("/block/settings", block_settings_change, methods=["POST"]),
    Route("/block/preview", block_settings_preview, methods=["POST"]),
    Route("/live", live_view),
    Route("/stats", stats_view),
]

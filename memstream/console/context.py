"""What every console handler shares: the console's context on its app, and the request helpers.

:class:`Console` holds the API's context (``memstream.serve.context.ApiContext``), the sign-in sessions and
the reads the console keeps warm; ``memstream.console.app.build`` puts it on the console's app, and each
handler (``memstream.console.routes``) takes it from its request with :func:`console_of`.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memstream.auth import AuthError, Principal, may_read_scope, read_scopes, read_speaker
from memstream.console import actions, pages, reads, views
from memstream.console.html import Html
from memstream.console.session import PRE_COOKIE, SESSION_COOKIE, Session, Sessions
from memstream.ports import Providers
from memstream.schemas import Memory
from memstream.serve.context import MAX_BODY_BYTES, ApiContext
from memstream.serve.guard import principal_of
from memstream.store.base import MemoryStore
from memstream.store.reader import ReadAs

BASE = pages.BASE
#: How long an action waits to see its outcome in the memory's history before the page says "on its way".
ACTION_WAIT_S = 5.0


@dataclass
class Console:
    """The console's state beside the API's: sessions, the projects it has seen, the Pipeline's slow reads."""

    ctx: ApiContext
    sessions: Sessions
    known: views.Projects
    pipeline_reads: views.PipelineReads

    @property
    def providers(self) -> Providers:
        return self.ctx.providers

    def reads_for(self, principal: Principal, project: str = "") -> Providers:
        """The providers whose store this caller reads through: their own conversations and what is
        shared (``memstream.auth.read_speaker``; ``project``, a ``p_…`` key: the one read, whose sharing
        setting counts; none: every project, each read as not sharing)."""
        speaker = read_speaker(principal, shared=bool(project) and self.ctx.shares(project))
        if speaker is None:
            return self.providers
        return replace(self.providers, store=cast(MemoryStore, ReadAs(self.providers.store, speaker)))


def console_of(request: Request) -> Console:
    """The console of the app serving ``request`` (set by ``memstream.console.app.build``)."""
    con: Console = request.app.state.console
    return con


def viewer(request: Request) -> Principal:
    principal = principal_of(request.scope)
    if principal is None:
        raise AuthError("sign in to the console first")
    return principal


def session_of(request: Request) -> Session | None:
    found = (request.scope.get("state") or {}).get("console_session")
    return found if isinstance(found, Session) else None


def csrf_of(request: Request) -> str:
    con = console_of(request)
    found = session_of(request)
    return con.sessions.csrf(found.nonce) if found else ""


def chrome(request: Request, current: str) -> pages.Chrome:
    return pages.Chrome(viewer(request), csrf_of(request), current)


def page(request: Request, title: str, main: Html, current: str, *, status: int = 200, **flash: str) -> Response:
    return HTMLResponse(pages.layout(title, main, chrome(request, current), **flash), status_code=status)


async def form(request: Request) -> dict[str, list[str]]:
    """The urlencoded body, after the CSRF check every state-changing request passes."""
    con = console_of(request)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise actions.ActionError("the form is too large")
    fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    found = session_of(request)
    if found is not None:  # a browser: a bearer-token caller carries no ambient credential
        presented = request.headers.get("x-csrf-token") or (fields.get("csrf") or [""])[0]
        con.sessions.check_csrf(found.nonce, presented)
    return fields


def first(fields: Mapping[str, list[str]], name: str) -> str:
    return (fields.get(name) or [""])[0]


async def readable(con: Console, principal: Principal, memory_id: str) -> Memory | None:
    """The memory, if this caller may read it; None for one it may not, exactly as for a missing one."""
    checked = reads.memory_id_or_none(memory_id)
    if checked is None:  # not an id at all: "not found", never the store's parse error
        return None
    found = await con.providers.store.get(checked)
    if found is None or not con.ctx.may_read(principal, found):
        return None
    return found


async def projects(con: Console, principal: Principal) -> list[tuple[str, str]]:
    """(key, "path (active memories)") of the projects this caller may read."""
    held = await con.known.active()
    keys = [k for k in held if may_read_scope(principal, k)]
    keys += [k for k in principal.projects if k not in held]
    return await con.known.choices(keys)


async def scope_keys(con: Console, principal: Principal, project: str) -> list[str]:
    if project:
        return read_scopes(principal, project_key_of(project))
    keys = [k for k, _ in await projects(con, principal)]
    return [*keys, principal.user_key] if principal.user else keys


async def wait_for(check: Any) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ACTION_WAIT_S
    while loop.time() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


def may_act(principal: Principal, memory: Memory) -> bool:
    return may_read_scope(principal, memory.scope_key) and (principal.is_admin or bool(principal.user))


def sign_in_page(request: Request, *, error: str = "", status: int = 200) -> Response:
    con = console_of(request)
    import secrets

    pre = secrets.token_urlsafe(16)
    main = pages.sign_in(con.sessions.csrf(f"pre.{pre}"), open_mode=con.ctx.tokens is None)
    response = HTMLResponse(pages.layout("Sign in", main, None, error=error), status_code=status)
    response.set_cookie(PRE_COOKIE, pre, max_age=600, path=f"{BASE}/signin", httponly=True, samesite="strict")
    return response


async def recorded(con: Console, memory_id: str, op_id: str) -> bool:
    """Is the operation applied and in the memory's history? (What the page then shows is true.)"""
    return any(r.origin == op_id for r in await con.providers.history.for_memory(memory_id, limit=500))


async def all_recorded(con: Console, done: Sequence[tuple[str, str]]) -> bool:
    return all([await recorded(con, memory_id, op_id) for memory_id, op_id in done])


def back_to(memory_id: str, notice: str, *, error: str = "") -> Response:
    params = {"notice": error or notice}
    return RedirectResponse(f"{BASE}/memories/{memory_id}?" + urllib.parse.urlencode(params), status_code=303)


def sessions_code_ttl() -> float:
    from memstream.console.session import CODE_TTL_S

    return CODE_TTL_S


def block_keys(principal: Principal, memory: Memory) -> list[str]:
    """The scopes of the block the memory's project's next session gets (its project and the user's)."""
    if not memory.scope_key.startswith("p_"):
        return []
    return [memory.scope_key, *([principal.user_key] if principal.user else [])]


def signed_in(cookie: str, lifetime_s: float, *, secure: bool) -> Response:
    # The code leaves the address bar with this redirect; the cookie is never readable by script, and
    # behind HTTPS it is never sent over plain HTTP.
    response = RedirectResponse(f"{BASE}/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, max_age=int(lifetime_s), path="/", httponly=True, samesite="strict", secure=secure
    )
    response.delete_cookie(PRE_COOKIE, path=f"{BASE}/signin")
    return response


def project_key_of(value: str) -> str:
    from memstream.serve.context import project_param

    return project_param(value)


def pipeline_metrics(ctx: ApiContext) -> tuple[list[tuple[str, str, float]], list[tuple[str, float]], float]:
    """Consumer lag per topic partition, events processed per stage, and parked extractions."""
    from memstream.telemetry import metrics

    with contextlib.suppress(Exception):  # metrics never break the page
        ctx.update_lag()
    lag: list[tuple[str, str, float]] = []
    processed: list[tuple[str, float]] = []
    for family in metrics.CONSUMER_LAG.collect():
        lag += [(s.labels.get("topic", ""), s.labels.get("partition", ""), s.value) for s in family.samples]
    for family in metrics.EVENTS_PROCESSED.collect():
        processed += [(s.labels.get("stage", ""), s.value) for s in family.samples if s.name.endswith("_total")]
    parked = sum(s.value for family in metrics.PARKED.collect() for s in family.samples)
    return sorted(lag), sorted(processed), parked


def capture_state(settings: Any) -> dict[str, Any]:
    """This host's capture: the spool's backlog, and per CLI the files followed and when one was last read."""
    from memstream.capture.state import CaptureState

    path = Path(settings.capture_db)
    if not path.exists():
        return {"capture": "has not run on this host"}
    shown: dict[str, Any] = {}
    try:
        with CaptureState.open(path) as state:
            shown["spooled turns waiting"] = state.spool_size()
            for source, files, last in state.last_reads():
                when = datetime.fromtimestamp(last, UTC).strftime("%Y-%m-%d %H:%M UTC")
                shown[f"{source}"] = f"{files} session file(s), last read {when}"
    except Exception as exc:  # a broken state file is shown, not raised
        shown["capture state"] = f"unreadable: {exc}"
    return shown


def cookie(scope: Any, name: str) -> str:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v
    return ""

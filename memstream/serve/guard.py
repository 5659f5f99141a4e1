"""The API's door: an ASGI middleware that lets in only callers with a valid bearer token.

It wraps the whole ASGI app, so every route and every mounted app (the MCP endpoint at
``/mcp``, say) is behind it; no route can forget to ask. It needs no web framework: the
principal goes into ``scope["state"]["principal"]``, where Starlette's ``request.state``
and any mounted app find it.

- No ``Authorization: Bearer …`` header: 401 with ``WWW-Authenticate: Bearer``.
- A token that verifies is let in, always: no other caller's failures can refuse it.
- A wrong or malformed token: 401 ``invalid_token``. The failure counts against the client's
  address and against the token id it names (if it is shaped like one of ours); an address
  or a token id with too many recent failures gets 429 for its next failures until its window
  passes, so tokens cannot be guessed at speed -- yet a valid token from that address, or the
  real holder of that id, still gets in.
- A revoked token: 401 ``invalid_token``, every time, counted against no one: it is an old
  client still retrying, not a guesser, and must not lock out the address it shares.
- The client's address is the connection's own; ``X-Forwarded-For`` is read only on a
  connection from a configured proxy (``MEMSTREAM_TRUSTED_PROXIES``), and then its last
  address that is not itself a trusted proxy counts. (uvicorn's own proxy-header handling,
  which trusts loopback, is off: memstream.front.query_api and memstream.worker.api_thread.)
- Only ``PUBLIC_PATHS`` (the readiness and liveness probes) pass without a token, matched exactly: no
  prefix, so ``/health/../memories`` is not public.
- Open mode (``MEMSTREAM_API_OPEN``, loopback only): every caller is the given principal.
- The console (``memstream.console``) is a browser's: on the paths its door covers, a request
  without an ``Authorization`` header is let in by its session cookie or sent to sign in, in
  open mode too (so a page of another site cannot act through a loopback console). The
  door's public paths (the sign-in page, the static assets) pass without either.

Tokens never appear in a log line or a response.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from memstream.auth import AuthError, FailureLimiter, Principal, RevokedToken, TokenStore, token_id_of
from memstream.settings import IPNetwork

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The principal of the request being served, for work it starts in the same context (an MCP
#: tool calling the API in process); None outside any request the guard let in.
CURRENT_PRINCIPAL: ContextVar[Principal | None] = ContextVar("memstream_principal", default=None)

#: Paths served without a token, matched exactly.
PUBLIC_PATHS = frozenset({"/health", "/health/live"})


#: The token id an open-mode caller is recorded under (a console session opened in open mode names it).
OPEN_TOKEN_ID = "open"


class SessionDoor(Protocol):
    """How a browser's session cookie gets in (the console's); bearer tokens work beside it."""

    def public(self, path: str) -> bool:
        """Served without a token or a session (the sign-in page, static assets)."""

    def covers(self, path: str) -> bool:
        """A path a session cookie may open."""

    def session(self, scope: Scope) -> tuple[Principal, Any] | None:
        """The principal and session of the request's cookie; None without a live one."""

    async def refuse(self, scope: Scope, send: Send) -> None:
        """Answer a covered request that has no live session (a page: to the sign-in form)."""


def bearer_token(scope: Scope) -> str | None:
    """The token of the request's ``Authorization: Bearer`` header; None when there is none."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""  # present but not a bearer token: a wrong credential, not a missing one
    return None


def _trusted(address: str, proxies: Sequence[IPNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(scope: Scope, trusted_proxies: Sequence[IPNetwork] = ()) -> str:
    """The address the failure limiter counts: the connection's peer, or, when the peer is a
    trusted proxy, the last ``X-Forwarded-For`` address that is not a trusted proxy itself
    (addresses left of it were written by the client, who can write anything)."""
    peer = str((scope.get("client") or ("unknown", 0))[0])
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return peer
    hops: list[str] = []
    for name, value in scope.get("headers", []):
        if name.lower() == b"x-forwarded-for":
            hops += [hop.strip() for hop in value.decode("latin-1").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted_proxies):
            return hop
    return peer


def principal_of(scope: Scope) -> Principal | None:
    """The principal the middleware let in (None on a public path)."""
    state = scope.get("state") or {}
    principal = state.get("principal")
    return principal if isinstance(principal, Principal) else None


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenStore | None,
        open_principal: Principal | None = None,
        limiter: FailureLimiter | None = None,
        public_paths: frozenset[str] = PUBLIC_PATHS,
        door: SessionDoor | None = None,
        trusted_proxies: Sequence[IPNetwork] = (),
    ) -> None:
        if tokens is None and open_principal is None:
            raise ValueError("the API needs a token store, or open mode")
        self.app = app
        self.tokens = tokens
        self.open_principal = open_principal
        self.limiter = limiter or FailureLimiter()
        self.public_paths = public_paths
        self.door = door
        self.trusted_proxies = tuple(trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan and the like carry no caller
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in self.public_paths or (self.door is not None and self.door.public(path)):
            await self.app(scope, receive, send)
            return
        if self.door is not None and self.door.covers(path) and bearer_token(scope) is None:
            found = self.door.session(scope)
            if found is None:
                await self.door.refuse(scope, send)
                return
            principal, session = found
            scope.setdefault("state", {})["console_session"] = session
            await self._let_in(principal, scope, receive, send)
            return
        if self.open_principal is not None:
            scope.setdefault("state", {})["token_id"] = OPEN_TOKEN_ID
            await self._let_in(self.open_principal, scope, receive, send)
            return
        client = client_address(scope, self.trusted_proxies)
        token = bearer_token(scope)
        if token is None:
            await _refuse(scope, send, 401, "a bearer token is required", challenge='Bearer realm="memstream"')
            return
        invalid = 'Bearer realm="memstream", error="invalid_token"'
        try:
            assert self.tokens is not None
            principal = self.tokens.authenticate(token)
        except RevokedToken:
            log.warning("refused a request to %s from %s: revoked token", scope.get("path"), client)
            await _refuse(scope, send, 401, "invalid or revoked token", challenge=invalid)
            return
        except AuthError:
            token_id = token_id_of(token)
            keys = [f"address:{client}", *([f"token:{token_id}"] if token_id else [])]
            if any(self.limiter.blocked(key) for key in keys):
                await _refuse(
                    scope, send, 429, "too many failed attempts; try again later", retry_after=int(self.limiter.window)
                )
                return
            for key in keys:
                self.limiter.failed(key)
            log.warning("refused a request to %s from %s: invalid token", scope.get("path"), client)
            await _refuse(scope, send, 401, "invalid or revoked token", challenge=invalid)
            return
        # Which token let it in: a console sign-in code issued to this caller names it.
        scope.setdefault("state", {})["token_id"] = token_id_of(token)
        await self._let_in(principal, scope, receive, send)

    async def _let_in(self, principal: Principal, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("state", {})["principal"] = principal
        token = CURRENT_PRINCIPAL.set(principal)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_PRINCIPAL.reset(token)


async def _refuse(
    scope: Scope, send: Send, status: int, message: str, *, challenge: str = "", retry_after: int = 0
) -> None:
    if scope["type"] == "websocket":  # 1008: policy violation, before the handshake is accepted
        await send({"type": "websocket.close", "code": 1008, "reason": message})
        return
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge:
        headers.append((b"www-authenticate", challenge.encode()))
    if retry_after:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

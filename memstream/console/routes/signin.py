"""Signing in and out of the console, and the one-time links ``memstream console`` asks for."""

from __future__ import annotations

import urllib.parse

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from memstream.auth import AuthError, token_id_of
from memstream.console.context import (
    BASE,
    console_of,
    cookie,
    first,
    form,
    session_of,
    sessions_code_ttl,
    sign_in_page,
    signed_in,
    viewer,
)
from memstream.console.session import PRE_COOKIE, SESSION_COOKIE
from memstream.serve.context import MAX_BODY_BYTES
from memstream.serve.guard import client_address


async def signin(request: Request) -> Response:
    con = console_of(request)
    code = request.query_params.get("code", "")
    if request.method == "GET" and code:
        try:
            issued = con.sessions.redeem(code)
        except AuthError as exc:
            return sign_in_page(request, error=str(exc), status=400)
        return signed_in(issued, con.sessions.lifetime_s, secure=request.url.scheme == "https")
    if request.method == "POST":
        # The same rule as the API's door (memstream.serve.guard): a token that verifies always gets
        # in; failures are counted per client address and per token id, and only slow the guessing.
        client = client_address(request.scope, con.ctx.trusted_proxies)
        pre = cookie(request.scope, PRE_COOKIE)
        fields = urllib.parse.parse_qs((await request.body())[:MAX_BODY_BYTES].decode("utf-8", "replace"))
        token = first(fields, "token").strip()
        try:
            con.sessions.check_csrf(f"pre.{pre}", first(fields, "csrf"))
            issued = con.sessions.token_sign_in(token)
        except AuthError as exc:
            token_id = token_id_of(token)
            keys = [f"address:{client}", *([f"token:{token_id}"] if token_id else [])]
            if any(con.ctx.limiter.blocked(key) for key in keys):
                return sign_in_page(request, error="too many failed attempts; try again later", status=429)
            for key in keys:
                con.ctx.limiter.failed(key)
            return sign_in_page(request, error=str(exc), status=401)
        return signed_in(issued, con.sessions.lifetime_s, secure=request.url.scheme == "https")
    return sign_in_page(request)


async def signout(request: Request) -> Response:
    con = console_of(request)
    await form(request)
    found = session_of(request)
    if found is not None:
        con.sessions.sign_out(found)
    response = RedirectResponse(f"{BASE}/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def codes(request: Request) -> Response:
    """A one-time sign-in link for the bearer token's principal (``memstream console``)."""
    con = console_of(request)
    viewer(request)
    if session_of(request) is not None:
        return JSONResponse({"error": "sign-in links are issued to a bearer token, not a console session"}, 403)
    token_id = (request.scope.get("state") or {}).get("token_id")
    if not token_id:
        return JSONResponse({"error": "a bearer token is required"}, 401)
    code = con.sessions.issue_code(token_id)
    return JSONResponse({"path": f"{BASE}/signin?code={code}", "expires_in_s": int(sessions_code_ttl())})


ROUTES = [
    Route("/signin", signin, methods=["GET", "POST"]),
    Route("/signout", signout, methods=["POST"]),
    Route("/codes", codes, methods=["POST"]),
]

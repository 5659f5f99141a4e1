"""The bearer-token middleware on its own, in front of a dummy ASGI app with a mounted sub-app
(as the MCP endpoint will be mounted at /mcp): every path is behind it, whatever the framework."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

from memstream.auth import FailureLimiter, TokenStore, admin_principal, user_principal
from memstream.serve.guard import AuthMiddleware, principal_of

ALICE = user_principal("alice@example.com", ["/repos/a"])


async def dummy_app(scope: Any, receive: Any, send: Any) -> None:
    """Answers with the principal it was handed; '/mcp/…' is a separately mounted app."""
    if scope["type"] == "lifespan":
        await send({"type": "lifespan.startup.complete"})
        return
    principal = principal_of(scope)
    who = principal.describe() if principal else "anonymous"
    mounted = scope["path"].startswith("/mcp")
    body = f"{'mcp' if mounted else 'api'}:{who}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def call(
    app: Any, path: str, *, token: str | None = None, header: str | None = None, client: str = "10.0.0.1"
) -> tuple[int, dict[str, str], str]:
    headers = []
    if header is not None:
        headers.append((b"authorization", header.encode()))
    elif token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {"type": "http", "method": "GET", "path": path, "headers": headers, "client": (client, 5000)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    headers_out = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], headers_out, b"".join(m.get("body", b"") for m in sent[1:]).decode()


@pytest.fixture
def tokens(tmp_path: Path) -> TokenStore:
    return TokenStore(tmp_path / "tokens.json")


def test_every_path_and_the_mounted_app_need_a_token(tokens: TokenStore) -> None:
    app = AuthMiddleware(dummy_app, tokens=tokens)
    for path in ("/search", "/memories", "/mcp", "/mcp/messages", "/metrics", "/", "/health/", "/Health"):
        status, headers, body = call(app, path)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer"), path
        assert "api:" not in body and "mcp:" not in body


def test_a_valid_token_reaches_the_route_and_the_mounted_app_as_its_principal(tokens: TokenStore) -> None:
    token, _ = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens)
    assert call(app, "/search", token=token) == (200, {"content-type": "text/plain"}, f"api:{ALICE.describe()}")
    assert call(app, "/mcp/messages", token=token)[2] == f"mcp:{ALICE.describe()}"
    assert call(app, "/search", header=f"bearer   {token}")[0] == 200, "the scheme is case-insensitive"


def test_wrong_malformed_and_revoked_tokens_are_refused(tokens: TokenStore) -> None:
    token, record = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=100))
    for header in (
        f"Bearer {token}x",
        "Bearer ",
        f"Basic {token}",
        token,
        "Bearer mst_0123456789ab_x",
        "Bearer " + "a" * 5000,
    ):
        status, headers, _ = call(app, "/search", header=header)
        assert status == 401, header
    tokens.revoke(record.id)
    status, headers, body = call(app, "/search", token=token)
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"] and "api:" not in body


def test_only_the_exact_health_path_is_public(tokens: TokenStore) -> None:
    app = AuthMiddleware(dummy_app, tokens=tokens)
    assert call(app, "/health") == (200, {"content-type": "text/plain"}, "api:anonymous")
    for trick in ("/health/../memories", "/health%2F..%2Fmemories", "/health/x", "/health;/memories", "//health"):
        assert call(app, trick)[0] == 401, trick


def test_failed_attempts_lock_the_client_out_even_with_a_good_token(tokens: TokenStore) -> None:
    token, _ = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    for _ in range(3):
        assert call(app, "/search", token="mst_0123456789ab_guess", client="10.0.0.9")[0] == 401
    status, headers, _ = call(app, "/search", token=token, client="10.0.0.9")
    assert status == 429 and headers["retry-after"] == "60"
    assert call(app, "/search", token=token, client="10.0.0.10")[0] == 200, "other clients are not locked out"


def test_no_token_is_ever_logged(tokens: TokenStore, caplog: pytest.LogCaptureFixture) -> None:
    token, _ = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens)
    with caplog.at_level(logging.DEBUG):
        call(app, "/search", token=token + "wrong")
        call(app, "/search", token=token)
    secret = token.rsplit("_", 1)[1]
    assert caplog.records and all(secret not in r.getMessage() for r in caplog.records)


def test_open_mode_lets_every_caller_in_as_the_one_principal(tokens: TokenStore) -> None:
    app = AuthMiddleware(dummy_app, tokens=None, open_principal=admin_principal("open"))
    assert call(app, "/memories")[2] == "api:admin"
    with pytest.raises(ValueError):
        AuthMiddleware(dummy_app, tokens=None)


def test_a_websocket_without_a_token_is_closed_before_the_handshake(tokens: TokenStore) -> None:
    app = AuthMiddleware(dummy_app, tokens=tokens)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    asyncio.run(app({"type": "websocket", "path": "/mcp", "headers": [], "client": ("1.2.3.4", 1)}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": "a bearer token is required"}]

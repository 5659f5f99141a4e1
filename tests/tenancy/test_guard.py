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
from memstream.serve.guard import AuthMiddleware, client_address, principal_of
from memstream.settings import proxy_networks

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


def test_others_failures_never_refuse_a_valid_token(tokens: TokenStore) -> None:
    """Ten bad tokens from loopback used to make every caller there, the admin included, get 429."""
    alice, _ = tokens.create(ALICE)
    admin, _ = tokens.create(admin_principal())
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    for i in range(10):
        call(app, "/search", token=f"mst_0123456789a{i % 10}_guess", client="127.0.0.1")
    assert call(app, "/search", token=alice, client="127.0.0.1")[0] == 200
    assert call(app, "/search", token=admin, client="127.0.0.1")[0] == 200


def test_guesses_are_limited_per_address_and_per_token_id(tokens: TokenStore) -> None:
    alice, record = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    for _ in range(3):
        assert call(app, "/search", token="mst_0123456789ab_guess", client="10.0.0.9")[0] == 401
    status, headers, _ = call(app, "/search", token="mst_0123456789ab_guess", client="10.0.0.9")
    assert status == 429 and headers["retry-after"] == "60"
    assert call(app, "/search", token="mst_ffffffffffff_other", client="10.0.0.9")[0] == 429, "the address"
    assert call(app, "/search", token="mst_0123456789ab_guess", client="10.0.0.10")[0] == 429, "the token id"
    assert call(app, "/search", token="mst_eeeeeeeeeeee_other", client="10.0.0.10")[0] == 401, "others are not"
    # Guessing the secret of Alice's token id from many addresses locks that id's guesses, not Alice.
    for n in range(3):
        call(app, "/search", token=f"mst_{record.id}_guess", client=f"10.1.0.{n}")
    assert call(app, "/search", token=f"mst_{record.id}_guess", client="10.1.0.99")[0] == 429
    assert call(app, "/search", token=alice, client="10.0.0.9")[0] == 200


def test_a_revoked_token_retrying_gets_401_and_locks_out_no_one(tokens: TokenStore) -> None:
    old, record = tokens.create(ALICE)
    bob, _ = tokens.create(user_principal("bob@example.com", ["/repos/b"]))
    tokens.revoke(record.id)
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    for _ in range(20):  # an old laptop behind the same address, still retrying
        assert call(app, "/search", token=old, client="127.0.0.1")[0] == 401
    assert call(app, "/search", token=bob, client="127.0.0.1")[0] == 200
    # and a mistyped token from that address is counted as its own first failure, not the 21st
    assert call(app, "/search", token=bob + "x", client="127.0.0.1")[0] == 401


def forwarded(app: Any, token: str, peer: str, chain: str) -> int:
    """Status of a request from ``peer`` whose X-Forwarded-For is ``chain``."""
    headers = [(b"authorization", f"Bearer {token}".encode()), (b"x-forwarded-for", chain.encode())]
    scope = {"type": "http", "method": "GET", "path": "/search", "headers": headers, "client": (peer, 5000)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"])


def test_x_forwarded_for_is_ignored_unless_the_peer_is_a_configured_proxy(tokens: TokenStore) -> None:
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    # Rotating the header from one address buys no extra attempts: the address is the peer's.
    statuses = [forwarded(app, "mst_0123456789ab_guess", "10.0.0.5", f"203.0.113.{n}") for n in range(6)]
    assert statuses == [401, 401, 401, 429, 429, 429]
    # Sending another client's address in the header does not lock that client out.
    victim, _ = tokens.create(ALICE)
    assert call(app, "/search", token="mst_eeeeeeeeeeee_guess", client="203.0.113.7")[0] == 401
    assert call(app, "/search", token=victim, client="203.0.113.7")[0] == 200


def test_behind_a_configured_proxy_the_forwarded_client_counts(tokens: TokenStore) -> None:
    proxies = proxy_networks("10.0.0.1, 10.9.0.0/16")
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=2, window=60), trusted_proxies=proxies)
    # The client wrote the left part; the proxy appended the real client address on the right.
    for _ in range(2):
        assert forwarded(app, "mst_0123456789ab_guess", "10.0.0.1", "1.1.1.1, 198.51.100.4, 10.9.0.3") == 401
    assert forwarded(app, "mst_aaaaaaaaaaaa_guess", "10.0.0.1", "2.2.2.2, 198.51.100.4") == 429
    assert forwarded(app, "mst_bbbbbbbbbbbb_guess", "10.0.0.1", "198.51.100.5") == 401, "another client"
    assert client_address({"client": ("10.0.0.1", 1), "headers": []}, proxies) == "10.0.0.1"
    assert client_address({"client": ("10.0.0.2", 1), "headers": [(b"x-forwarded-for", b"9.9.9.9")]}, proxies) == (
        "10.0.0.2"
    )


# token_urlsafe's alphabet holds "_": a secret may carry one anywhere, even last.
@pytest.mark.parametrize(
    "drawn", [None, "s3cr3t_part-0n3_x", "s3cr3t_part_"], ids=["random", "underscores", "ends-in-underscore"]
)
def test_no_token_is_ever_logged(
    tokens: TokenStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, drawn: str | None
) -> None:
    if drawn is not None:
        monkeypatch.setattr("memstream.auth.secrets.token_urlsafe", lambda _n: drawn)
    token, _ = tokens.create(ALICE)
    app = AuthMiddleware(dummy_app, tokens=tokens)
    with caplog.at_level(logging.DEBUG):
        call(app, "/search", token=token + "wrong")
        call(app, "/search", token=token)
    secret = token.split("_", 2)[2]  # mst_<id>_<secret>: the id never holds "_", the secret may
    assert drawn is None or secret == drawn
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


def test_a_served_api_ignores_x_forwarded_for_from_loopback(tokens: TokenStore) -> None:
    """Served by uvicorn with the worker's options: uvicorn's own proxy-header handling (which
    trusts loopback by default) used to make the rotated header a new client every time. The token
    ids rotate too, so only the address can lock these guesses out."""
    import httpx
    import uvicorn

    from memstream.kafka.broker import free_port
    from memstream.worker.api_thread import UVICORN_OPTIONS

    port = free_port()
    app = AuthMiddleware(dummy_app, tokens=tokens, limiter=FailureLimiter(limit=3, window=60))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", **UVICORN_OPTIONS)
    server = uvicorn.Server(config)

    async def scenario() -> list[int]:
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if serving.done():
                    serving.result()
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                return [
                    (
                        await client.get(
                            "/search",
                            headers={
                                "Authorization": f"Bearer mst_0123456789a{n}_guess",
                                "X-Forwarded-For": f"203.0.113.{n}",
                            },
                        )
                    ).status_code
                    for n in range(5)
                ]
        finally:
            server.should_exit = True
            await serving

    assert asyncio.run(scenario()) == [401, 401, 401, 429, 429]

"""Tokens, principals and scoping as pure functions: no server involved."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from memstream.auth import (
    AuthError,
    FailureLimiter,
    Forbidden,
    TokenStore,
    admin_principal,
    check_open_mode,
    check_publish,
    ensure_local_token,
    is_loopback,
    read_scopes,
    require_admin,
    token_id_of,
    user_principal,
)
from memstream.identity import project_key, user_key
from memstream.settings import Settings, SettingsError

ALICE = user_principal("alice@example.com", ["/repos/a"])
BOB = user_principal("bob@example.com", ["/repos/b"])


def test_tokens_are_stored_hashed_in_a_private_file(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "data" / "tokens.json")
    token, record = store.create(ALICE)
    raw = store.path.read_text()
    # mst_<hex id>_<secret>: the secret is base64url and may itself hold "_" (then rsplit took a 1-char tail).
    secret = token.split("_", 2)[2]
    assert token not in raw and secret not in raw
    assert record.sha256 in raw
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert not [p for p in store.path.parent.iterdir() if p.name.startswith(".tokens.json.")], "temp file left"
    assert store.authenticate(token) == ALICE


def test_a_wrong_a_malformed_and_a_revoked_token_are_refused_alike(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    token, record = store.create(ALICE)
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (wrong, "", "Bearer x", "mst_", "mst_abc_def", "x" * 10_000, token + " ", token.upper()):
        with pytest.raises(AuthError, match="invalid or revoked token"):
            store.authenticate(bad)
    store.revoke(record.id)
    with pytest.raises(AuthError, match="invalid or revoked token"):
        store.authenticate(token)
    assert [r.id for r in store.records() if not r.active] == [record.id]


def test_a_revocation_reaches_a_store_that_read_the_file_before(tmp_path: Path) -> None:
    server, cli = TokenStore(tmp_path / "tokens.json"), TokenStore(tmp_path / "tokens.json")
    token, record = cli.create(ALICE)
    assert server.authenticate(token) == ALICE
    cli.revoke(record.id)
    with pytest.raises(AuthError):
        server.authenticate(token)


def test_token_ids_name_records_without_revealing_the_secret() -> None:
    assert token_id_of("mst_0123456789ab_secret") == "0123456789ab"
    assert token_id_of("mst_short_secret") is None
    assert token_id_of("nope") is None
    assert token_id_of("mst_0123456789ab_" + "s" * 500) is None


def test_a_user_reads_its_own_scope_and_its_projects_only() -> None:
    a, b = project_key("/repos/a"), project_key("/repos/b")
    assert read_scopes(ALICE, a) == [a, user_key("alice@example.com")]
    with pytest.raises(Forbidden):
        read_scopes(ALICE, b)
    with pytest.raises(AuthError):
        read_scopes(ALICE, "")
    assert read_scopes(admin_principal(), b) == [b], "an admin has no user scope to mix in"


def test_the_local_token_reads_every_project_as_its_user(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "tokens.json")
    token = ensure_local_token(store, tmp_path / "local-token", "me@example.com")
    assert ensure_local_token(store, tmp_path / "local-token", "me@example.com") == token, "made once"
    principal = store.authenticate(token)
    assert read_scopes(principal, project_key("/anywhere")) == [project_key("/anywhere"), user_key("me@example.com")]
    assert stat.S_IMODE((tmp_path / "local-token").stat().st_mode) == 0o600


def test_a_user_publishes_only_as_itself_into_its_projects() -> None:
    a, b = project_key("/repos/a"), project_key("/repos/b")
    check_publish(ALICE, a, "alice@example.com")
    check_publish(ALICE, a, "  ALICE@example.com ")  # the same identity, as user_key normalises it
    check_publish(ALICE, a, "")
    with pytest.raises(Forbidden, match="another user"):
        check_publish(ALICE, a, "bob@example.com")
    with pytest.raises(Forbidden, match="project"):
        check_publish(ALICE, b, "alice@example.com")
    with pytest.raises(Forbidden):
        check_publish(admin_principal(), a, "")


def test_admin_routes_refuse_users() -> None:
    require_admin(admin_principal())
    with pytest.raises(Forbidden):
        require_admin(ALICE)


def test_a_user_principal_needs_an_identity_and_a_project() -> None:
    with pytest.raises(AuthError):
        user_principal("", ["/repos/a"])
    with pytest.raises(AuthError):
        user_principal("carol@example.com", [])
    assert user_principal("c@x", [project_key("/r")]).projects == (project_key("/r"),)


def test_open_mode_is_refused_off_loopback() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        check_open_mode(True, host)
    for host in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "127.0.0.1.nip.io", ""):
        assert not is_loopback(host)
        with pytest.raises(AuthError, match="loopback"):
            check_open_mode(True, host)
        check_open_mode(False, host)
    with pytest.raises(SettingsError, match="MEMSTREAM_API_OPEN"):
        Settings.from_env({"MEMSTREAM_API_OPEN": "1", "MEMSTREAM_HTTP_HOST": "0.0.0.0"})
    assert Settings.from_env({"MEMSTREAM_API_OPEN": "1"}).api_open


def test_the_failure_limiter_blocks_a_client_for_a_window() -> None:
    now = [0.0]
    limiter = FailureLimiter(limit=3, window=60.0, clock=lambda: now[0])
    for _ in range(3):
        assert not limiter.blocked("1.2.3.4")
        limiter.failed("1.2.3.4")
    assert limiter.blocked("1.2.3.4")
    assert not limiter.blocked("5.6.7.8"), "other clients are not affected"
    now[0] = 61.0
    assert not limiter.blocked("1.2.3.4")


def test_the_failure_limiter_forgets_the_oldest_clients_past_its_bound() -> None:
    limiter = FailureLimiter(limit=1, max_clients=2)
    for client in ("a", "b", "c"):
        limiter.failed(client)
    assert not limiter.blocked("a") and limiter.blocked("b") and limiter.blocked("c")

"""Console sign-in: codes are good once and briefly, cookies cannot be forged or outlive their token,
sign-out ends a session, and the CSRF token is the session's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstream.auth import AuthError, Principal, TokenStore, user_principal
from memstream.console.session import CODE_TTL_S, CsrfError, Sessions, SignInError, load_key


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Sessions, TokenStore, str, str, Clock]:
    tokens = TokenStore(tmp_path / "tokens.json")
    token, record = tokens.create(user_principal("alice@example.com", ["/repos/alpha"]))
    clock = Clock()
    sessions = Sessions(
        key=load_key(tmp_path / "console.key"), tokens=tokens, open_principal=None, lifetime_s=3600, clock=clock
    )
    return sessions, tokens, token, record.id, clock


def test_the_key_is_made_once_and_private(tmp_path: Path) -> None:
    key = load_key(tmp_path / "d" / "console.key")
    assert load_key(tmp_path / "d" / "console.key") == key and len(key) == 32
    assert (tmp_path / "d" / "console.key").stat().st_mode & 0o777 == 0o600


def test_a_code_signs_in_once_within_its_time(setup: tuple[Sessions, TokenStore, str, str, Clock]) -> None:
    sessions, _, _, token_id, clock = setup
    code = sessions.issue_code(token_id)
    cookie = sessions.redeem(code)
    assert sessions.check(cookie).principal.user == "alice@example.com"
    with pytest.raises(SignInError):
        sessions.redeem(code)
    late = sessions.issue_code(token_id)
    clock.now += CODE_TTL_S + 1
    with pytest.raises(SignInError):
        sessions.redeem(late)
    with pytest.raises(SignInError):
        sessions.redeem("made-up")


def test_a_cookie_cannot_be_forged_or_outlive_its_session(setup: tuple[Sessions, TokenStore, str, str, Clock]) -> None:
    sessions, tokens, _, token_id, clock = setup
    cookie = sessions.new_session(token_id)
    version, tid, expires, nonce, signature = cookie.split(".")
    for forged in (
        f"{version}.{tid}.{int(expires) + 99999}.{nonce}.{signature}",  # a longer life
        f"{version}.000000000000.{expires}.{nonce}.{signature}",  # another token
        f"{version}.{tid}.{expires}.{nonce}.{'0' * 64}",
        "v1.garbage",
        "",
    ):
        with pytest.raises(SignInError):
            sessions.check(forged)
    other = Sessions(key=b"k" * 32, tokens=tokens, open_principal=None, lifetime_s=3600, clock=clock)
    with pytest.raises(SignInError):
        other.check(cookie)  # signed with another server's key
    clock.now += 3601
    with pytest.raises(SignInError):
        sessions.check(cookie)


def test_revoking_the_token_or_signing_out_ends_the_session(
    setup: tuple[Sessions, TokenStore, str, str, Clock],
) -> None:
    sessions, tokens, _, token_id, _ = setup
    first, second = sessions.new_session(token_id), sessions.new_session(token_id)
    sessions.sign_out(sessions.check(first))
    with pytest.raises(SignInError):
        sessions.check(first)
    assert sessions.check(second).token_id == token_id  # only the one signed out
    tokens.revoke(token_id)
    with pytest.raises(SignInError):
        sessions.check(second)


def test_the_token_form_checks_the_token(setup: tuple[Sessions, TokenStore, str, str, Clock]) -> None:
    sessions, _, token, token_id, _ = setup
    assert sessions.check(sessions.token_sign_in(token)).token_id == token_id
    with pytest.raises(AuthError):
        sessions.token_sign_in(token[:-2] + ("yy" if token.endswith("xx") else "xx"))


def test_open_mode_sessions_need_the_open_principal(tmp_path: Path) -> None:
    me = Principal(user="me@example.com", all_projects=True, admin=True)
    sessions = Sessions(key=load_key(tmp_path / "k"), tokens=None, open_principal=me, lifetime_s=60)
    assert sessions.check(sessions.redeem(sessions.issue_code("open"))).principal == me
    with pytest.raises(SignInError):
        sessions.token_sign_in("mst_000000000000_x")


def test_the_csrf_token_is_the_sessions_own(setup: tuple[Sessions, TokenStore, str, str, Clock]) -> None:
    sessions, _, _, token_id, _ = setup
    mine, theirs = sessions.check(sessions.new_session(token_id)), sessions.check(sessions.new_session(token_id))
    sessions.check_csrf(mine.nonce, sessions.csrf(mine.nonce))
    for presented in ("", sessions.csrf(theirs.nonce), "0" * 64):
        with pytest.raises(CsrfError) as refused:
            sessions.check_csrf(mine.nonce, presented)
        assert refused.value.status == 403

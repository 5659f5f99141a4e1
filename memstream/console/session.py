"""Console sign-in: one-time codes, the session cookie, and CSRF tokens. No I/O but the key file.

- ``memstream console`` asks the API (with its bearer token) for a sign-in code: 32 random bytes,
  good once, for ``CODE_TTL_S``, kept in this process's memory. The link carries the code, never
  the token; the exchange answers with a redirect, so the code leaves the address bar at once.
- The session cookie is ``v1.<token id>.<expiry>.<nonce>.<HMAC>``: HttpOnly, SameSite=Strict,
  Path=/, signed with the console key (``<data dir>/console.key``, 0600). It names the token
  the sign-in was made with, not its principal, so a revoked token signs its sessions out at
  once: every request looks the token up again. Open mode signs ``open`` in its place.
- Sign-out forgets the nonce in this process until the cookie would have expired.
- The CSRF token of a session is the HMAC of its nonce: a form carries it in a hidden field,
  a script in ``X-CSRF-Token``; a page of another site cannot read it, and a request without
  it is refused. The sign-in form has a pre-session cookie of its own, checked the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memstream.auth import AuthError, Forbidden, Principal, TokenStore, token_id_of, write_private

#: The session cookie and the sign-in form's pre-session cookie.
SESSION_COOKIE = "memstream_console"
PRE_COOKIE = "memstream_console_pre"
#: How long a sign-in code may wait to be used.
CODE_TTL_S = 120.0
#: The most sign-in codes waiting at once (the oldest go first): issuing needs a token anyway.
MAX_CODES = 1_000
#: The token id open mode's sessions carry.
OPEN = "open"
KEY_BYTES = 32


def load_key(path: Path) -> bytes:
    """The console's signing key, created (0600) on first use."""
    try:
        key = path.read_bytes()
        if len(key) >= KEY_BYTES:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(KEY_BYTES)
    write_private(path, key)
    return key


class SignInError(AuthError):
    """A code or cookie that cannot be used (401: sign in again)."""


class CsrfError(Forbidden):
    """A state-changing request without the page's CSRF token (403: refused, whoever sent it)."""


@dataclass
class Session:
    token_id: str
    nonce: str
    expires: float
    principal: Principal


@dataclass
class Sessions:
    """Issues and checks codes, cookies and CSRF tokens for one API process."""

    key: bytes
    tokens: TokenStore | None
    open_principal: Principal | None
    lifetime_s: float
    clock: Callable[[], float] = time.time
    _codes: dict[str, tuple[str, float]] = field(default_factory=dict)
    _signed_out: dict[str, float] = field(default_factory=dict)

    # -- one-time codes ---------------------------------------------------------------

    def issue_code(self, token_id: str) -> str:
        """A code that signs its bearer in as ``token_id``'s principal, once, within CODE_TTL_S."""
        now = self.clock()
        self._codes = {c: v for c, v in self._codes.items() if v[1] > now}
        while len(self._codes) >= MAX_CODES:
            del self._codes[next(iter(self._codes))]
        code = secrets.token_urlsafe(32)
        self._codes[_digest(code)] = (token_id, now + CODE_TTL_S)
        return code

    def redeem(self, code: str) -> str:
        """The cookie value a code is exchanged for; the code is spent whether or not it was still good."""
        found = self._codes.pop(_digest(code), None)
        if found is None or found[1] <= self.clock():
            raise SignInError("this sign-in link was used already or has expired: run `memstream console` again")
        return self.new_session(found[0])

    def token_sign_in(self, token: str) -> str:
        """The cookie value for a bearer token typed into the form (remote deployments)."""
        if self.tokens is None:
            raise SignInError("this server runs in open mode: use the link `memstream console` prints")
        self.tokens.authenticate(token)  # AuthError: invalid or revoked
        token_id = token_id_of(token)
        assert token_id is not None  # authenticate() accepted it, so it is shaped like ours
        return self.new_session(token_id)

    # -- the session cookie -----------------------------------------------------------

    def new_session(self, token_id: str) -> str:
        expires = int(self.clock() + self.lifetime_s)
        body = f"v1.{token_id}.{expires}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._sign(body)}"

    def check(self, cookie: str) -> Session:
        """The live session a cookie stands for; SignInError otherwise (one message for all)."""
        parts = cookie.split(".")
        if len(parts) != 5 or parts[0] != "v1" or len(cookie) > 300:
            raise SignInError("not signed in")
        body, signature = ".".join(parts[:4]), parts[4]
        if not hmac.compare_digest(signature, self._sign(body)):
            raise SignInError("not signed in")
        _, token_id, expires_text, nonce = parts[:4]
        expires = float(expires_text) if expires_text.isdigit() else 0.0
        if expires <= self.clock() or nonce in self._signed_out:
            raise SignInError("the console session has ended: sign in again")
        return Session(token_id, nonce, expires, self._principal(token_id))

    def sign_out(self, session: Session) -> None:
        now = self.clock()
        self._signed_out = {n: t for n, t in self._signed_out.items() if t > now}
        self._signed_out[session.nonce] = session.expires

    def _principal(self, token_id: str) -> Principal:
        if token_id == OPEN and self.open_principal is not None:
            return self.open_principal
        if self.tokens is None:
            raise SignInError("not signed in")
        principal = self.tokens.principal_of_id(token_id)
        if principal is None:
            raise SignInError("the token this session was opened with is revoked: sign in again")
        return principal

    # -- CSRF -------------------------------------------------------------------------

    def csrf(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")

    def check_csrf(self, nonce: str, presented: str) -> None:
        if not presented or not hmac.compare_digest(presented, self.csrf(nonce)):
            raise CsrfError("the form's CSRF token is missing or wrong: reload the page and try again")

    def _sign(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()


def _digest(code: str) -> str:
    """Codes are kept by hash: a memory dump of the process shows no usable code."""
    return hashlib.sha256(code.encode()).hexdigest()

"""Who is calling: bearer tokens, the principals they stand for, and what each may read and write.

A token is ``mst_<id>_<secret>``: the id names its record (it is not secret and shows in
``memstream token list``), the secret is 256 random bits. Only the SHA-256 of the whole
token is stored. A fast hash is the right one here: scrypt or bcrypt exist to slow down
guessing *low-entropy* passwords, and nobody guesses 256 random bits, fast hash or not;
a deliberately slow hash would only make every API request cost tens of milliseconds of
CPU and turn a flood of bad tokens into a denial of service. The presented token's hash
is compared with the stored one by ``hmac.compare_digest`` (constant time).

The token file (``<data dir>/tokens.json``) is written atomically (a temporary file in the
same directory, fsynced, then renamed) with mode 0600 in a 0700 directory. Servers re-read
it when it changes, so ``memstream token revoke`` takes effect without a restart.

Nothing here logs a token; ``repr`` of a principal carries no secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memstream.identity import project_key, user_key

TOKEN_PREFIX = "mst_"
#: Random bytes in a token's secret part.
SECRET_BYTES = 32
#: Failed attempts one client may make within ``FAILURE_WINDOW_S`` before it is refused for that long.
MAX_FAILURES = 10
FAILURE_WINDOW_S = 60.0
#: Clients remembered by the failure limiter (the oldest are forgotten first).
LIMITER_CLIENTS = 10_000
#: The longest a presented token may be: anything longer is refused before it is hashed.
MAX_TOKEN_CHARS = 200


class AuthError(Exception):
    """A token or principal cannot be used; ``status`` is the HTTP status it maps to."""

    status = 401


class RevokedToken(AuthError):
    """A token that was issued and has been revoked (its secret matches; it is no guess)."""


class Forbidden(AuthError):
    """The caller is known but may not do this."""

    status = 403


class Principal(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Who a token stands for.

    A user reads its own user scope and the projects it is given (``all_projects``: every
    project), and publishes turns only as itself, only into those projects. An admin reads
    every scope through the admin routes (``/memories``, ``/history``, ``/metrics``) and
    forgets scopes. The local token of a one-person install is both: its user, on every
    project, and the admin of its own machine. A team deployment gives users user tokens
    and keeps admin tokens (with no user) for operators.
    """

    #: The user's identity (an email, say); hashed into the user scope. Empty: no user scope.
    user: str = ""
    #: Project keys (``p_…``) the user may read and write.
    projects: tuple[str, ...] = ()
    all_projects: bool = False
    admin: bool = False
    #: A human label (``alice laptop``); shown by ``memstream token list``.
    label: str = ""

    @property
    def is_admin(self) -> bool:
        return self.admin

    @property
    def user_key(self) -> str:
        return user_key(self.user)

    @property
    def name(self) -> str:
        """Who, in an audit record: the user, else the token's label, else its role."""
        return self.user or self.label or ("admin" if self.admin else "nobody")

    def describe(self) -> str:
        parts = []
        if self.user:
            where = "every project" if self.all_projects else f"{len(self.projects)} project(s)"
            parts.append(f"user {self.user} on {where}")
        if self.admin:
            parts.append("admin")
        return ", ".join(parts) or "nobody"


def user_principal(
    user: str, projects: Iterable[str] = (), *, all_projects: bool = False, admin: bool = False, label: str = ""
) -> Principal:
    """A user principal; ``projects`` are directories or ``p_…`` keys."""
    if not user.strip():
        raise AuthError("a user token needs the user's identity (e.g. an email)")
    keys = tuple(sorted({p if _is_project_key(p) else project_key(p) for p in projects}))
    if not keys and not all_projects:
        raise AuthError("a user token needs at least one project (or all projects)")
    return Principal(user=user.strip(), projects=keys, all_projects=all_projects, admin=admin, label=label)


def admin_principal(label: str = "") -> Principal:
    return Principal(admin=True, label=label)


def _is_project_key(value: str) -> bool:
    return len(value) == 18 and value.startswith("p_") and all(c in "0123456789abcdef" for c in value[2:])


# --- scoping: pure decisions ------------------------------------------------------------


def may_read_project(principal: Principal, project: str) -> bool:
    return principal.is_admin or may_write_project(principal, project)


def may_read_scope(principal: Principal, scope_key: str) -> bool:
    """May this caller read a memory of this scope (a project's ``p_…`` or a user's ``u_…``)?"""
    if principal.is_admin:
        return True
    if scope_key.startswith("u_"):
        return bool(principal.user) and scope_key == principal.user_key
    return may_read_project(principal, scope_key)


def may_write_project(principal: Principal, project: str) -> bool:
    return bool(principal.user) and (principal.all_projects or project in principal.projects)


def read_scopes(principal: Principal, project: str) -> list[str]:
    """The scope keys a search or block for ``project`` (a ``p_…`` key) reads for this caller.

    Never from a parameter the caller chose: the user scope is the principal's own. An admin
    without a user reads the project only; a user not given the project is refused.
    """
    if not project:
        raise AuthError("a project is required")
    if not may_read_project(principal, project):
        raise Forbidden("this token may not read that project")
    return [key for key in (project, principal.user_key) if key]


def read_speaker(principal: Principal, *, shared: bool = False) -> str | None:
    """Whose conversations a read of a project keeps: None every speaker's (an admin, the local
    token, or a project that shares its members' conversations), else the reader's own user key
    (their own exchanges and what is shared with the project: facts, documents)."""
    return None if principal.is_admin or shared else principal.user_key


def may_read_memory(principal: Principal, scope_key: str, speaker: str, *, shared: bool = False) -> bool:
    """May this caller read a memory of this scope and speaker (a get by id, a live event)?"""
    if not may_read_scope(principal, scope_key):
        return False
    allowed = read_speaker(principal, shared=shared)
    return allowed is None or speaker in ("", allowed)


def check_publish(principal: Principal, project: str, claimed_user: str) -> None:
    """Refuse a turn whose project or user is not the principal's.

    ``project`` is a ``p_…`` key; ``claimed_user`` the turn's ``user`` field (empty: the
    principal's own identity will be filled in by the caller).
    """
    if not principal.user:
        raise Forbidden("a token without a user does not publish turns: use the user's own token")
    if not may_write_project(principal, project):
        raise Forbidden("this token may not publish to that project")
    if claimed_user and user_key(claimed_user) != principal.user_key:
        raise Forbidden("this token may not publish turns for another user")


def require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("this route is for admin tokens only")


# --- tokens -------------------------------------------------------------------------------


class TokenRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    #: SHA-256 hex of the whole token; the token itself is never stored.
    sha256: str
    principal: Principal
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class _TokenFile(msgspec.Struct, kw_only=True):
    version: int = 1
    tokens: list[TokenRecord] = []


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(_TokenFile)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """(id, token): a fresh token and the id of its record."""
    token_id = secrets.token_hex(6)
    return token_id, f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(SECRET_BYTES)}"


def token_id_of(token: str) -> str | None:
    """The record id a token names, or None when it is not shaped like one of ours."""
    if len(token) > MAX_TOKEN_CHARS or not token.startswith(TOKEN_PREFIX):
        return None
    token_id, sep, secret = token[len(TOKEN_PREFIX) :].partition("_")
    if not sep or len(token_id) != 12 or not secret:
        return None
    return token_id


class TokenStore:
    """The token file: create, list, revoke, and authenticate against it."""

    def __init__(self, path: Path):
        self.path = path
        self._cache: tuple[float, int, dict[str, TokenRecord]] | None = None

    # reading ---------------------------------------------------------------------------

    def records(self) -> list[TokenRecord]:
        return list(self._load().values())

    def _load(self) -> dict[str, TokenRecord]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        if self._cache is not None and self._cache[:2] == (stat.st_mtime, stat.st_size):
            return self._cache[2]
        try:
            data = _DECODER.decode(self.path.read_bytes())
        except (msgspec.DecodeError, OSError) as exc:
            raise AuthError(f"cannot read the token file {self.path}: {exc}") from None
        by_id = {record.id: record for record in data.tokens}
        self._cache = (stat.st_mtime, stat.st_size, by_id)
        return by_id

    def authenticate(self, token: str) -> Principal:
        """The principal of a valid, unrevoked token; AuthError otherwise (one message for all).

        A token that was valid and is revoked raises :class:`RevokedToken` (the same message):
        a client still retrying it is no guesser, and the guard answers it without counting it
        against anyone."""
        token_id = token_id_of(token)
        record = self._load().get(token_id) if token_id else None
        # Hash and compare even when no record matched, so both paths cost the same.
        expected = record.sha256 if record is not None else "0" * 64
        if not hmac.compare_digest(hash_token(token), expected) or record is None:
            raise AuthError("invalid or revoked token")
        if not record.active:
            raise RevokedToken("invalid or revoked token")
        return record.principal

    def principal_of_id(self, token_id: str) -> Principal | None:
        """The principal of the active token with this id (a console session names its token so)."""
        record = self._load().get(token_id)
        return record.principal if record is not None and record.active else None

    # writing ---------------------------------------------------------------------------

    def create(self, principal: Principal) -> tuple[str, TokenRecord]:
        """A new token for ``principal``: the token (shown once) and its record."""
        token_id, token = new_token()
        record = TokenRecord(id=token_id, sha256=hash_token(token), principal=principal, created_at=_now())
        self._write([*self.records(), record])
        return token, record

    def revoke(self, token_id: str) -> TokenRecord:
        records = self.records()
        for i, record in enumerate(records):
            if record.id == token_id:
                if record.active:
                    record = msgspec.structs.replace(record, revoked_at=_now())
                    records[i] = record
                    self._write(records)
                return record
        raise AuthError(f"no token with id {token_id!r}")

    def _write(self, records: list[TokenRecord]) -> None:
        write_private(self.path, _ENCODER.encode(_TokenFile(tokens=records)))
        self._cache = None


class SharingChange(msgspec.Struct, frozen=True, kw_only=True):
    """One change of a project's sharing setting: its audit record."""

    project: str
    shared: bool
    by: str
    at: datetime


class _SharingFile(msgspec.Struct, kw_only=True):
    version: int = 1
    #: Project keys (``p_…``) whose members read each other's conversations.
    shared: list[str] = []
    #: Every change, oldest first (the audit trail ``GET /admin/sharing`` shows).
    changes: list[SharingChange] = []


_SHARING_DECODER = msgspec.json.Decoder(_SharingFile)


class ProjectSharing:
    """Which projects share their members' conversations (default: none), in ``sharing.json`` beside
    the token file; only an admin changes it (``POST /admin/sharing``, ``memstream share``), and
    every change is kept with who made it and when. Re-read when the file changes."""

    def __init__(self, path: Path):
        self.path = path
        self._cache: tuple[float, int, _SharingFile] | None = None

    def _load(self) -> _SharingFile:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return _SharingFile()
        if self._cache is not None and self._cache[:2] == (stat.st_mtime, stat.st_size):
            return self._cache[2]
        try:
            data = _SHARING_DECODER.decode(self.path.read_bytes())
        except (msgspec.DecodeError, OSError) as exc:
            raise AuthError(f"cannot read the sharing file {self.path}: {exc}") from None
        self._cache = (stat.st_mtime, stat.st_size, data)
        return data

    def shares(self, project: str) -> bool:
        return project in self._load().shared

    def shared(self) -> list[str]:
        return list(self._load().shared)

    def changes(self, project: str = "") -> list[SharingChange]:
        return [c for c in self._load().changes if not project or c.project == project]

    def set(self, project: str, shared: bool, *, by: str) -> SharingChange:
        """Share (or stop sharing) a project's conversations with its members; the change is recorded."""
        data = self._load()
        keys = set(data.shared)
        keys = keys | {project} if shared else keys - {project}
        change = SharingChange(project=project, shared=shared, by=by, at=_now())
        write_private(self.path, _ENCODER.encode(_SharingFile(shared=sorted(keys), changes=[*data.changes, change])))
        self._cache = None
        return change


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by this user only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _now() -> datetime:
    return datetime.now(UTC)


# --- the local token of a one-person install ---------------------------------------------


def ensure_local_token(tokens: TokenStore, token_file: Path, user: str) -> str:
    """The token the CLI, hooks and stdio MCP of this machine use; created on first start.

    Its principal is the local user on every project, and the admin of this install. Kept
    in ``token_file`` (0600) beside the token store, so only this OS user (who owns the data
    dir) can use it.
    """
    try:
        token = token_file.read_text().strip()
        tokens.authenticate(token)
        return token
    except (FileNotFoundError, AuthError):
        pass
    token, _ = tokens.create(
        Principal(user=user.strip(), all_projects=True, admin=True, label="local (created by memstream up)")
    )
    write_private(token_file, token.encode())
    return token


def read_token(token_file: Path) -> str:
    try:
        return token_file.read_text().strip()
    except (FileNotFoundError, PermissionError):
        return ""


# --- network rules ----------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; a wildcard bind (0.0.0.0, ::) is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_open_mode(open_mode: bool, host: str) -> None:
    """Open (token-less) mode is for one user on one machine: refuse it on any other bind."""
    if open_mode and not is_loopback(host):
        raise AuthError(
            f"MEMSTREAM_API_OPEN serves the API without tokens and is allowed on a loopback address only, not {host!r}"
        )


# --- failed attempts ---------------------------------------------------------------------


@dataclass
class FailureLimiter:
    """Refuses a key (a client address, a token id) that failed ``limit`` times within
    ``window`` seconds, for ``window`` seconds. The guard counts only failed guesses and never
    refuses a token that verifies (memstream.serve.guard)."""

    limit: int = MAX_FAILURES
    window: float = FAILURE_WINDOW_S
    clock: Callable[[], float] = time.monotonic
    max_clients: int = LIMITER_CLIENTS
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def blocked(self, client: str) -> bool:
        recent = self._recent(client)
        return len(recent) >= self.limit

    def failed(self, client: str) -> None:
        recent = self._recent(client)
        recent.append(self.clock())
        self._failures[client] = recent
        if len(self._failures) > self.max_clients:
            del self._failures[next(iter(self._failures))]

    def _recent(self, client: str) -> list[float]:
        since = self.clock() - self.window
        recent = [t for t in self._failures.pop(client, []) if t > since]
        if recent:
            self._failures[client] = recent
        return recent

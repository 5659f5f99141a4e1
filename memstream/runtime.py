"""What a running ``memstream up`` wrote about itself (``runtime.json``), read without importing the
pipeline: the read commands, hooks and MCP over stdio use it to find the API."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstream.process import identity as process_identity

if TYPE_CHECKING:  # annotations only: a hook reads the runtime file without importing the settings
    from memstream.settings import Settings

__all__ = [
    "api_url",
    "auth_headers",
    "bootstrap_of",
    "client_token",
    "git_email",
    "process_identity",
    "publish_target",
    "read_runtime",
    "read_runtime_file",
    "remove_runtime_file",
    "user_identity",
    "write_process_file",
    "write_runtime_file",
]


def read_runtime_file(settings: Settings) -> dict[str, Any] | None:
    """What a running ``memstream up`` wrote about itself, if it is still alive."""
    return read_runtime(settings.runtime_file)


def read_runtime(path: Path) -> dict[str, Any] | None:
    """The runtime file at ``path``, if that very ``memstream up`` process is still alive."""
    try:
        data = json.loads(path.read_text())
        pid = int(data["pid"])
    except (FileNotFoundError, NotADirectoryError, ValueError, KeyError, TypeError):
        return None
    # Pids are reused: after a crash or a reboot the file's pid may name any process, even another
    # memstream one (a hook, `memstream mcp`). Only the process that wrote the file holds its identity.
    if pid == os.getpid() or data.get("process") != process_identity(pid):
        return None
    return dict(data)


def write_runtime_file(settings: Settings, data: dict[str, Any]) -> None:
    """Record this process (``up``) for the other commands, with the identity that only it holds."""
    write_process_file(settings.runtime_file, data)


def write_process_file(path: Path, data: dict[str, Any]) -> None:
    """Record this process at ``path`` with the identity only it holds (:func:`read_runtime` reads it)."""
    record = {**data, "pid": os.getpid(), "process": process_identity(os.getpid())}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=2))
    partial.replace(path)  # a reader never sees half a file


def remove_runtime_file(settings: Settings) -> None:
    with contextlib.suppress(FileNotFoundError):
        settings.runtime_file.unlink()


def bootstrap_of(settings: Settings) -> str | None:
    """Where to publish: the configured Kafka, else the broker of a running ``memstream up``, else None."""
    target = publish_target(settings)
    return target[0] if target else None


def publish_target(settings: Settings) -> tuple[str, str] | None:
    """(bootstrap, topic prefix) to publish to: the configured Kafka with the configured prefix, else what
    the running ``memstream up`` wrote in its runtime file (a hook's environment may not repeat its
    settings), else None: memstream is down."""
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap, settings.topic_prefix
    runtime = read_runtime_file(settings)
    if runtime is None:
        return None
    return str(runtime["bootstrap"]), str(runtime.get("topic_prefix") or settings.topic_prefix)


def api_url(settings: Settings) -> str:
    """Where the running memstream's API listens (its runtime file), else where settings say."""
    runtime = read_runtime_file(settings)
    return str(runtime["api_url"]) if runtime else settings.api_url


def git_email() -> str:
    """The user's git email ("" without git or one set)."""
    import subprocess

    try:
        out = subprocess.run(["git", "config", "user.email"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def user_identity(settings: Settings) -> str:
    """Who user-scoped memories belong to: MEMSTREAM_USER, else the git email."""
    return settings.user or git_email()


def client_token(settings: Settings) -> str:
    """The bearer token this machine's clients send: MEMSTREAM_TOKEN, else the local token `up` made."""
    from memstream.auth import read_token

    return settings.token or read_token(settings.local_token_file)


def auth_headers(settings: Settings) -> dict[str, str]:
    token = client_token(settings)
    return {"Authorization": f"Bearer {token}"} if token else {}


def write_principal(settings: Settings) -> Any:
    """The principal every writing verb (publish, init, remember, ingest, watch, the hooks'
    flusher) acts as: the caller's token (MEMSTREAM_TOKEN, else the local token `memstream up`
    made on this machine), checked against the token file as POST /turns checks it; in open
    mode, the open principal, as the API's. With neither, AuthError says why: a write as
    whoever ``--user`` names is what a raw Kafka producer can do, not what memstream's CLI does."""
    from memstream.auth import AuthError, Principal, TokenStore

    # Open mode (loopback only) lets any local process write through the API without a token; a CLI
    # beside an `up` that serves open writes the same way, whether its own settings or `up`'s say so.
    if settings.api_open or (read_runtime_file(settings) or {}).get("api_open"):
        return Principal(user=settings.user, all_projects=True, admin=True, label="open mode")
    token = client_token(settings)
    if not token:
        raise AuthError(
            "refused: writing needs a token: set MEMSTREAM_TOKEN, or run `memstream up` on this machine "
            f"(it creates the local token in {settings.local_token_file})"
        )
    try:
        return TokenStore(settings.tokens_file).authenticate(token)
    except AuthError:
        raise AuthError(
            f"refused: the token in use is not a valid token of {settings.tokens_file} "
            "(revoked, mistyped, or another install's)"
        ) from None


def capture_user(settings: Settings) -> str:
    """The user captured turns are published as: :func:`write_principal`'s, which must cover every
    project, since capture reads the sessions of every project on this machine; else AuthError."""
    from memstream.auth import AuthError

    principal = write_principal(settings)
    if not principal.user:
        raise AuthError("refused: a token without a user does not publish turns: use the user's own token")
    if not principal.all_projects:
        raise AuthError(
            "refused: capture reads the sessions of every project on this machine, so it needs a token "
            "for all projects (the local token `memstream up` creates is one); use `memstream publish` "
            "for a token's own projects"
        )
    return str(principal.user)

"""Memory at session start: the [MEMORY] block as a coding agent's SessionStart hook output.

``memstream hook <host>`` hands SessionStart events here. The block comes from the running
memstream's ``/block`` for the session's working directory, within ``MEMSTREAM_BLOCK_MAX_TOKENS``.

Hosts and their formats (all three take the same JSON on stdout, exit code 0):

- Claude Code (``claude-code``): ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": ...}}`` for sources startup, resume, clear and compact.
- Codex (``codex``): the same object; Codex's parser (codex-rs/hooks/src/schema.rs,
  ``SessionStartHookSpecificOutputWire``) denies unknown fields and requires ``hookEventName``.
- Gemini CLI (``gemini``): ``hookSpecificOutput.additionalContext`` (docs/hooks/reference.md),
  sources startup, resume and clear.

When memstream is down, slow or answers an error, the output is empty: the session starts as if
memstream were not installed. Nothing here imports more than the standard library and settings,
so the hook answers in tens of milliseconds; when a remote server sends cited entries it could not
check, the hook checks them against the work tree (issue 39), loading the checker only then.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from memstream import hosts
from memstream.runtime import api_url, auth_headers, user_identity
from memstream.settings import Settings

#: Host names (and aliases) whose SessionStart gets the block, and the host each names (memstream.hosts).
HOSTS: dict[str, str] = {
    name: host.name for host in hosts.HOSTS if host.session_start for name in (host.name, *host.aliases)
}
#: The SessionStart sources each host sends that should get the block.
SOURCES: dict[str, frozenset[str]] = {host.name: host.session_start for host in hosts.HOSTS if host.session_start}
#: Connecting to a running memstream on loopback takes well under this; a closed port fails at once.
CONNECT_TIMEOUT_S = 0.15
#: How long a running memstream may take to build the block before the session starts without it.
READ_TIMEOUT_S = 2.0
SESSION_START = "SessionStart"


def hook_output(host: str, payload: dict[str, Any], settings: Settings | None = None) -> str:
    """The exact stdout of ``host``'s SessionStart hook for ``payload`` ("" to add nothing)."""
    family = HOSTS.get(host)
    if family is None:
        return ""
    source = str(payload.get("source") or "startup")
    if source not in SOURCES[family]:
        return ""
    cwd = str(payload.get("cwd") or "")
    if not cwd:
        return ""
    try:
        settings = settings or Settings.from_env()
        chosen = settings
        block = fetch_block(
            api_url(settings),
            cwd,
            lambda: user_identity(chosen),
            settings.block_max_tokens,
            headers=auth_headers(settings),
        )
    except Exception:  # a hook must never break the session it starts
        return ""
    if not block or not has_memories(block):
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": SESSION_START, "additionalContext": block}})


def has_memories(block: str) -> bool:
    """A block with at least one section (an empty store renders only the brackets)."""
    return "\n## " in block


def fetch_block(
    base_url: str, project: str, user: Callable[[], str], max_tokens: int, *, headers: dict[str, str] | None = None
) -> str:
    """GET /block from the API at ``base_url``; "" on any failure. ``user`` is asked only once the
    API answers the connection (it may run git): a memstream that is down costs one refused connect."""
    url = urllib.parse.urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.connect()
        asked = {"project": project, "user": user(), "max_tokens": str(max_tokens), "cited": "1"}
        query = urllib.parse.urlencode(asked)
        if connection.sock is not None:
            connection.sock.settimeout(READ_TIMEOUT_S)
        connection.request("GET", f"{url.path.rstrip('/')}/block?{query}", headers=headers or {})
        response = connection.getresponse()
        if response.status != 200:
            return ""
        body = response.read().decode()
    except (OSError, http.client.HTTPException):
        return ""
    finally:
        connection.close()
    if not response.getheader("content-type", "").startswith("application/json"):
        return body  # a server from before cited blocks: its text as it is
    return checked_here(json.loads(body))


def checked_here(answer: dict[str, Any]) -> str:
    """The block of a ``/block?cited=1`` answer. When the server could not check the cited code (a remote
    deployment: it never reads the user's disk), this process, which runs in the work tree, checks it:
    a memory whose code is gone leaves the block, a changed or moved one is marked (docs/recall.md)."""
    if answer.get("checked") or not answer.get("cited"):
        return str(answer.get("text") or "")
    from memstream.recall import staleness  # only here: it loads msgspec and the schemas

    return staleness.recheck_block(answer, staleness.shared_checker())

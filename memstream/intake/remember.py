"""One explicit memory as a fact for the pipeline: what ``memstream remember``, ``POST /memories``
and MCP's ``add_memory`` send to the facts topic. Pure: no I/O, no Faust."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.identity import derived_id, memory_id, normalize_content, project_key, user_key
from memstream.rules.explicit import guess_type
from memstream.rules.secrets import redact
from memstream.schemas import MEMORY_TYPES, Fact

#: Shortest text worth remembering.
MIN_CHARS = 10


class RememberError(ValueError):
    """Why a memory cannot be made, in one line."""


def make_fact(
    text: str,
    *,
    project: str,
    user: str = "",
    type: str | None = None,
    scope: str | None = None,
    origin: str = "cli:remember",
    now: datetime | None = None,
) -> Fact:
    """The fact an explicit request to remember ``text`` becomes (secrets redacted, type guessed)."""
    text = redact(text.strip())
    if len(text) < MIN_CHARS:
        raise RememberError(f"a memory needs at least {MIN_CHARS} characters")
    guessed_type, guessed_scope = guess_type(text)
    kind = type or guessed_type
    if kind not in MEMORY_TYPES:
        raise RememberError(f"unknown type {kind!r} (expected one of: {', '.join(MEMORY_TYPES)})")
    if scope not in (None, "", "project", "user"):
        raise RememberError(f"unknown scope {scope!r} (expected project or user)")
    chosen = scope or ("user" if kind == "preference" else guessed_scope if not type else "project")
    if chosen == "user":
        if not user:
            raise RememberError("a user-scoped memory needs MEMSTREAM_USER or a git user.email")
        scope_key = user_key(user)
    else:
        scope_key = project_key(project)
    now = now or datetime.now(UTC)
    return Fact(
        fact_id=derived_id(scope_key, "remember", text, now.isoformat()),
        text=text,
        type=kind,  # type: ignore[arg-type]
        scope=chosen,  # type: ignore[arg-type]
        scope_key=scope_key,
        project=project,
        origin=origin,
        confidence=1.0,
        ts=now,
    )


def expected_memory_id(fact: Fact) -> str:
    """The id the fact's memory gets when it is stored as new (a duplicate refreshes another)."""
    return memory_id(fact.scope_key, normalize_content(fact.text).content_hash)

"""Forgetting a user or a project: the event that starts it, as the CLI and the admin API send it.

The purge itself runs in the pipeline (see ``memstream.agents.forget``): this module only
names the scope and says when, so ``memstream forget`` and ``POST /admin/forget`` send the
same thing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.identity import derived_id, project_key, user_key
from memstream.schemas import ForgetScope
from memstream.topics.catalog import words_held_until


class ForgetError(ValueError):
    pass


def forget_event(
    *,
    user: str = "",
    project: str = "",
    requested_by: str = "",
    at: datetime | None = None,
    words_retention_ms: int = 0,
) -> ForgetScope:
    """The ``ForgetScope`` for one user (an identity) or one project (a directory or ``p_…`` key)."""
    if bool(user.strip()) == bool(project.strip()):
        raise ForgetError("forget exactly one scope: a user or a project")
    at = at or datetime.now(UTC)
    if user.strip():
        scope, key = "user", user_key(user)
    else:
        project = project.strip()
        scope, key = "project", project if project.startswith("p_") and len(project) == 18 else project_key(project)
    return ForgetScope(
        op_id=derived_id(key, "forget", at.isoformat()),
        scope_key=key,
        cause="forget",
        scope=scope,  # type: ignore[arg-type]
        forgotten_at=at,
        requested_by=requested_by,
        words_held_until=words_held_until(at, words_retention_ms),
    )

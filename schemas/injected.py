"""What a project's sessions get injected at start: the [MEMORY] block's settings (issue 38, build 4).

One record per project, changed in the console by an admin or a project's owner. Every field has a
default, and the defaults are the block as it was before settings existed: on, every section, every
type, the server's (or the hook's) token budget. So a project that never had settings, and a record
written before a field was added, both decode to today's behaviour.
"""

from __future__ import annotations

from datetime import datetime

import msgspec


class ContextSettings(msgspec.Struct, tag="context-settings.v1", tag_field="schema", kw_only=True, frozen=True):
    """The injected-context settings of one project (key: the project's scope key)."""

    scope_key: str
    #: Off: SessionStart injects nothing for this project (the hook adds no context).
    enabled: bool = True
    #: Block sections left out (their titles, as ``memstream.recall.search`` names them).
    hidden_sections: list[str] = []
    #: Memory types left out of every section (a relevant hit of such a type too).
    hidden_types: list[str] = []
    #: The block's token budget; 0: the one the session asks for (MEMSTREAM_BLOCK_MAX_TOKENS).
    max_tokens: int = 0
    #: Who changed them last, when, and why (the audit trail keeps every change).
    changed_by: str = ""
    changed_at: datetime | None = None
    reason: str = ""


#: Settings of a project nobody configured: the block exactly as before settings existed.
def defaults(scope_key: str) -> ContextSettings:
    return ContextSettings(scope_key=scope_key)

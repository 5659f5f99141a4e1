"""Audit records (Pipeline v2's memory_history): how each proposal and change becomes one.

The decision stage records its proposals and what became of them; the store records the
changes other stages asked for (aging, condensation, contradiction), since it alone sees
them applied. Record ids derive from what they record, so a replay rewrites, never adds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memstream.identity import derived_id
from memstream.schemas import HistoryRecord, Memory, Outcome

#: Causes the store records when it applies them; the decision stage records its own.
CAUSE_OUTCOMES: tuple[tuple[str, str, Outcome], ...] = (
    ("deleted", "aging:progress", "aged-out"),
    ("deleted", "aging:session-summary", "condensed"),
    # Every file it cites deleted for MEMSTREAM_CODE_GONE_DAYS (issue 39): taken out as forgotten, so restorable.
    ("superseded", "aging:code-gone", "aged-out"),
    ("superseded", "contradiction", "superseded"),
    # A caller asked to forget it (MCP's forget_memory, POST /memories/{id}/forget): tombstoned,
    # kept for audit until retention purges it, the caller's reason in the record.
    ("superseded", "forget", "deleted"),
    # The console's actions (memstream.console.actions), each with who asked and why.
    ("created", "correct", "created"),  # the corrected text, as a new memory
    ("created", "restore", "created"),  # a forgotten or wrong-marked memory, active again
    ("superseded", "correct", "updated"),  # the old one, superseded by it
    ("superseded", "marked wrong", "deleted"),
    ("refreshed", "pin", "pinned"),
    ("refreshed", "unpin", "unpinned"),
)


def store_outcome(change: str, cause: str) -> Outcome | None:
    """The audit outcome of a change the store applied, or None if its author recorded it."""
    for kind, prefix, outcome in CAUSE_OUTCOMES:
        if change == kind and cause.startswith(prefix):
            return outcome
    return None


def record(outcome: Outcome, *, scope_key: str, ts: datetime, about: str, **fields: Any) -> HistoryRecord:
    """A record whose id is derived from ``about`` (what makes it unique) and its outcome."""
    return HistoryRecord(
        record_id=derived_id("history", about, outcome, fields.get("memory_id", "")),
        scope_key=scope_key,
        outcome=outcome,
        ts=ts,
        **fields,
    )


def store_record(
    outcome: Outcome, memory: Memory, *, op_id: str, cause: str, ts: datetime, **fields: Any
) -> HistoryRecord:
    return record(
        outcome,
        scope_key=memory.scope_key,
        ts=ts,
        about=op_id,
        memory_id=memory.id,
        target_id=memory.superseded_by or "",
        reason=cause,
        origin=op_id,
        **fields,
    )

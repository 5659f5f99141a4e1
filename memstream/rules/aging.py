"""The memory spec's aging rules.

Progress: only the latest progress memory survives. Session summaries: above the cap
(3 per project) the oldest is condensed by the LLM into a learned-pattern and deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memstream.schemas import Memory


def stale_progress(new: Memory, progress: Sequence[Memory]) -> list[Memory]:
    """Progress memories that ``new`` makes obsolete: every other one not newer than it.

    A progress memory newer than ``new`` is left alone: when events of one scope are
    seen late, the newest still wins.
    """
    return [m for m in progress if m.id != new.id and m.superseded_by is None and m.updated_at <= new.updated_at]


def summaries_to_condense(summaries: Sequence[Memory], cap: int) -> list[Memory]:
    """The oldest session summaries beyond ``cap``, oldest first."""
    active = sorted((m for m in summaries if m.superseded_by is None), key=lambda m: (m.created_at, m.id))
    excess = len(active) - cap
    return active[:excess] if excess > 0 else []


def condense_prompt(summary: Memory) -> str:
    return f"Session summary to condense:\n{summary.text}\n\nReturn the JSON array now."


def gone_long_enough(gone_since: Sequence[datetime | None], now: datetime, days: float) -> bool:
    """Whether a memory whose every cited file is gone has been so for ``days`` (issue 39): each file's
    deleting commit is at least that old. A file whose deletion git cannot date (not committed yet, or
    unknown) is not old enough: a file deleted in the work tree may come back. ``days`` 0: never."""
    if days <= 0 or not gone_since:
        return False
    return all(when is not None and (now - when).total_seconds() >= days * 86_400 for when in gone_since)

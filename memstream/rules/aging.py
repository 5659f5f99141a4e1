"""Seed 001's aging rules.

Progress: only the latest progress memory survives. Session summaries: above the cap
(3 per project) the oldest is condensed by the LLM into a learned-pattern and deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

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

"""Why a memory is, or is not, in a project's next [MEMORY] block (issue 38, point 9).

The block is built by ``memstream.recall.search.build_block`` from the project's memories; this module
builds the same block from the same read and says, for one memory, the section that shows it, or the
first rule that leaves it out: its status, its type, a repeat of another memory's text, its section's
limit (newest first), or the token budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstream.recall import search as recall
from memstream.schemas import CONSOLIDATED, Memory
from memstream.schemas.injected import ContextSettings


@dataclass(frozen=True)
class Verdict:
    included: bool
    #: The section that shows it, or the rule that leaves it out, in words.
    why: str

    def __str__(self) -> str:
        return ("in the next block: " if self.included else "not in the next block: ") + self.why


def section_of(memory: Memory) -> str | None:
    if memory.type == CONSOLIDATED:
        return recall.CONSOLIDATED_TITLE
    for title, types in recall.SECTIONS:
        if memory.type in types:
            return title
    return None


def verdict(
    memory: Memory, block: recall.Block, listed: Sequence[Memory], budget: int, injected: ContextSettings | None = None
) -> Verdict:
    """``block`` is the project's next block, built from ``listed`` (the memories its read returned) and
    the project's injected-context settings ``injected``."""
    section = section_of(memory)
    if memory.superseded_by is not None:
        return Verdict(False, "it is superseded or forgotten; only active memories are injected")
    if injected is not None and not injected.enabled:
        return Verdict(False, "injected context is off for this project (its block settings)")
    if injected is not None and memory.type in injected.hidden_types:
        return Verdict(False, f"its type “{memory.type}” is left out of this project's block (its block settings)")
    if (
        injected is not None
        and section in injected.hidden_sections
        and not any(m.id == memory.id for m in block.memories)
    ):
        return Verdict(False, f"section “{section}” is left out of this project's block (its block settings)")
    if any(m.id == memory.id for m in block.memories):
        return Verdict(True, f"section “{section}”" if section else "relevant to the query")
    if section is None:
        return Verdict(False, f"its type “{memory.type}” has no section in the block (it is found by search)")
    if memory.id in recall.repeated([*listed, memory]):
        return Verdict(False, "another memory already holds its text (the block shows each text once)")
    limit = recall.LAST_SESSION_LIMIT if section == "Last Session" else recall.SECTION_LIMIT
    limit = 1 if section == recall.CONSOLIDATED_TITLE else limit
    newer = [
        m for m in listed if section_of(m) == section and m.superseded_by is None and m.updated_at > memory.updated_at
    ]
    if len(newer) >= limit:
        return Verdict(False, f"section “{section}” shows its newest {limit}; {len(newer)} are newer")
    return Verdict(False, f"section “{section}” was trimmed to fit the block's budget of {budget} tokens")

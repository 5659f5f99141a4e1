"""The audit trail of memory: one record per proposal and per outcome (Pipeline v2's memory_history).

Every change memory goes through is an event on the ``history`` topic, and the history
store keeps them queryable per memory (``memstream history MEMORY_ID``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import msgspec

from memstream.schemas.memory import Provenance

#: What happened to a proposal or a memory.
Outcome = Literal[
    # the decision stage's proposals and what became of them
    "created",  # ADD applied: a new memory
    "deduped",  # ADD of content already stored (exact hash or within dedup distance): refreshed
    "skipped",  # ADD not applied (reason: low_fact_confidence, empty_fact_content, …)
    "recorded",  # NONE: nothing to do, recorded for audit
    "blocked",  # UPDATE/DELETE not applied (allowUpdateDelete off)
    "proposed",  # shadow mode or mutationsFrozen: the decision was made, nothing was written
    "updated",  # UPDATE applied: the target superseded by the fact's new memory
    "deleted",  # DELETE applied: the target superseded (hidden, kept, linked)
    # what later stages did
    "superseded",  # the contradiction check found a newer memory replacing this one
    "aged-out",  # aging removed an older progress memory
    "condensed",  # aging condensed a session summary into a learned-pattern
    "purged",  # retention hard-deleted a tombstone past its window
    "code-status",  # the code a memory cites changed status (current, changed, moved, gone): once per change
    # what a person did (the console)
    "pinned",  # importance set to 1.0
    "unpinned",  # importance cleared
]
OUTCOMES: Final[tuple[str, ...]] = Outcome.__args__  # type: ignore[attr-defined]

Action = Literal["ADD", "UPDATE", "DELETE", "NONE", ""]

#: Pipeline modes of Pipeline v2: shadow (decide, audit, write nothing), controlled (ADD and
#: NONE applied, UPDATE/DELETE blocked), full (UPDATE/DELETE applied as supersedes).
Mode = Literal["shadow", "controlled", "full"]


class HistoryRecord(msgspec.Struct, tag="history.v1", tag_field="schema", kw_only=True, frozen=True):
    """One audit record. Key on the history topic: scope.

    ``record_id`` derives from what it records, so a replay rewrites the same records.
    """

    record_id: str
    #: The memory this record is about (the new one for created, the target otherwise);
    #: empty for a proposal that touched no memory (skipped, NONE without candidates).
    memory_id: str = ""
    scope_key: str
    outcome: Outcome
    action: Action = ""
    #: The memory a proposal pointed at (UPDATE/DELETE/NONE), or the successor of a
    #: superseded memory.
    target_id: str = ""
    fact_id: str = ""
    fact_text: str = ""
    confidence: float = 0.0
    reason: str = ""
    #: Pipeline v2's lexical contradiction detector flagged this proposal for a human.
    review_needed: bool = False
    mode: Mode = "controlled"
    #: The model that decided, and the version of the prompt it was given ("" if no LLM).
    model: str = ""
    prompt_version: str = ""
    #: Where it came from: a snapshot id, ``condense:<id>``, an op id.
    origin: str = ""
    #: The session files and lines the fact's text came from (the capture spec provenance), where known.
    sources: list[Provenance] = []
    #: Who asked for the change, when a person did (the console, the API): a principal's name.
    requested_by: str = ""
    ts: datetime

"""Pipeline v2's pipeline modes, and what each mode lets become of a decision proposal.

shadow      every proposal is decided and audited (``proposed``), nothing is written
controlled  ADD written (after its gates), NONE recorded, UPDATE/DELETE blocked
full        as controlled, and UPDATE/DELETE applied as supersedes

Unlike the spec, where full mode still blocks destructive decisions, memstream applies
them, but never as a hard delete: the target is superseded (kept, hidden from search and
the [MEMORY] block, linked to its successor), so the audit trail can always undo it.

The spec's ``enabled`` master switch has no flag here: in memstream the decision stage is
on when its agent runs. ``autonomousFrozen`` governs a maintenance worker memstream lacks.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgspec

from memstream.schemas.history import Mode, Outcome

#: Pipeline v2's ``minFactConfidenceForWrite``: facts below it are not written.
MIN_FACT_CONFIDENCE = 0.7

#: Gate reasons, as they appear in the audit record's ``reason``.
REASON_SHADOW: Final = "shadow_mode"
REASON_FROZEN: Final = "mutations_frozen"
REASON_LOW_CONFIDENCE: Final = "low_fact_confidence"
REASON_EMPTY_CONTENT: Final = "empty_fact_content"
REASON_EXACT_DUPLICATE: Final = "exact_duplicate"
REASON_UPDATE_DELETE_NOT_ALLOWED: Final = "update_delete_not_allowed"


class PipelineFlags(msgspec.Struct, kw_only=True, frozen=True):
    """Pipeline v2's flags. ``mutations_frozen`` is the emergency brake: it beats every other."""

    #: Decide and audit every proposal, write nothing.
    shadow_mode: bool = False
    #: Let UPDATE and DELETE proposals supersede the memories they target.
    allow_update_delete: bool = False
    #: No writes at all, whatever the other flags say.
    mutations_frozen: bool = False
    #: Persist extracted entity triples to the graph (no bearing on the mode).
    graph_enabled: bool = False

    @property
    def mode(self) -> Mode:
        if self.shadow_mode or self.mutations_frozen:
            return "shadow"
        return "full" if self.allow_update_delete else "controlled"

    @property
    def shadow_reason(self) -> str:
        """Why nothing is written ("" when writes are on); the brake is named first."""
        if self.mutations_frozen:
            return REASON_FROZEN
        return REASON_SHADOW if self.shadow_mode else ""


class Gate(NamedTuple):
    """What becomes of one proposal.

    ``reason`` names the gate that stopped or diverted it; it is "" when the proposal goes
    through as decided (created, recorded, updated, deleted), where the audit record keeps
    the model's own reason instead.
    """

    outcome: Outcome
    reason: str = ""


def gate(
    action: str,
    flags: PipelineFlags,
    *,
    fact_confidence: float,
    normalized_content: str,
    min_confidence: float = MIN_FACT_CONFIDENCE,
) -> Gate:
    """The outcome of a proposal under ``flags``, before the exact-duplicate check.

    ``normalized_content`` is ``identity.normalize_content(fact).normalized``. In order:
    shadow or frozen → ``proposed``; NONE → ``recorded``; UPDATE/DELETE without
    ``allow_update_delete`` → ``blocked``. Then the spec's ADD gates, confidence first
    and empty content second: ``skipped`` for an ADD, ``blocked`` for an UPDATE/DELETE,
    which write or retire on the fact's word just as an ADD does. What passes is
    ``created``, ``updated`` or ``deleted``; a ``created`` still has to pass
    ``exact_duplicate`` (the third ADD gate), which needs the store.
    """
    if action not in ("ADD", "UPDATE", "DELETE", "NONE"):
        raise ValueError(f"unknown decision action {action!r}")
    if flags.mode == "shadow":
        return Gate("proposed", flags.shadow_reason)
    if action == "NONE":
        return Gate("recorded")
    destructive = action in ("UPDATE", "DELETE")
    if destructive and not flags.allow_update_delete:
        return Gate("blocked", REASON_UPDATE_DELETE_NOT_ALLOWED)
    stopped: Outcome = "blocked" if destructive else "skipped"
    # NaN is not below the threshold either, hence the negated comparison.
    if not fact_confidence >= min_confidence:
        return Gate(stopped, REASON_LOW_CONFIDENCE)
    if not normalized_content.strip():
        return Gate(stopped, REASON_EMPTY_CONTENT)
    return Gate({"ADD": "created", "UPDATE": "updated", "DELETE": "deleted"}[action])  # type: ignore[arg-type]


def exact_duplicate(verdict: Gate, existing_id: str | None) -> Gate:
    """Pipeline v2's third ADD gate: a ``created`` whose content hash is already stored.

    ``existing_id`` is the id of the stored memory with the fact's content hash, None
    (or "") if there is none; the caller records it as the audit record's memory id.
    Any other verdict passes unchanged: only a write that survived the first two gates
    is worth a store lookup.
    """
    if verdict.outcome == "created" and existing_id:
        return Gate("deduped", REASON_EXACT_DUPLICATE)
    return verdict

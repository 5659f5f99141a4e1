"""Pipeline v2's decision stage: what should a new fact do to the memories nearest it?

For each fact the LLM sees the top candidates and proposes one action: ADD (a new memory),
UPDATE (the fact replaces a candidate), DELETE (the fact says a candidate no longer holds)
or NONE (a candidate already says it). This module builds the question, reads the answer
and checks it against the candidates. What becomes of a proposal is ``rules.modes.gate``'s
concern; in memstream an applied UPDATE or DELETE is a supersede, never a hard delete.

Parsing never raises: an answer it cannot trust yields no proposal and a warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from typing import Any, Final, Literal, Protocol

import msgspec

from memstream.rules.extraction import load_json_reply

#: Recorded on every audit record the stage writes, so replies can be traced to the prompt.
PROMPT_VERSION: Final = "decision.v1"

#: Pipeline v2: "the engine retrieves the top-5 candidate memories via hybrid search".
MAX_CANDIDATES = 5

#: Given to a proposal whose reply carries no usable confidence. It only ever reaches the
#: audit record (the write gates read the fact's own confidence), and it sits below the
#: default write gate (0.7) so that nothing which might one day gate on it trusts it.
DEFAULT_CONFIDENCE = 0.5

#: Longer reasons are cut: the reason is an audit note, not a place for the model's essay.
MAX_REASON_CHARS = 500

#: Pipeline v2: the fixed reason of the ADD proposed, without an LLM call, when nothing is near.
NO_CANDIDATES_REASON: Final = "no similar memories found"


class Candidate(Protocol):
    """What the prompt shows of a candidate: a stored memory, or one just decided on."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def text(self) -> str: ...


DecisionAction = Literal["ADD", "UPDATE", "DELETE", "NONE"]
ACTIONS: Final[tuple[str, ...]] = DecisionAction.__args__  # type: ignore[attr-defined]

#: Actions whose target must be one of the candidates.
TARGETED_ACTIONS: Final[frozenset[str]] = frozenset({"UPDATE", "DELETE"})

SYSTEM = """\
You maintain a coding agent's long-term memory. A new fact was extracted from a session.
Compare it with the existing memories listed and choose exactly one action:
- ADD: the fact is new information that none of the memories already holds.
- UPDATE: the fact is about the same subject as one memory and corrects, refines or
  replaces it (a changed decision, tool, value or state). The fact will replace it.
- DELETE: the fact says that one memory no longer holds (removed, abandoned, no longer
  true) and adds nothing else worth keeping.
- NONE: a memory already says the same thing, or more; nothing needs to change.
Memories that are merely related are not a reason to UPDATE or DELETE: prefer ADD.
targetId is the id of the memory concerned, copied exactly as shown (not its list
number); it is required for UPDATE and DELETE, optional for NONE and empty for ADD.
confidence is how sure you are of the action, from 0 to 1. reason is one short sentence.
Return ONLY JSON: {"action": "ADD|UPDATE|DELETE|NONE", "targetId": "<id or empty>",
"confidence": <0..1>, "reason": "<why>"}"""


class Proposal(msgspec.Struct, kw_only=True, frozen=True):
    """What the decision stage proposes for one fact; ``target_id`` is "" for ADD."""

    action: DecisionAction
    target_id: str = ""
    confidence: float
    reason: str


def no_candidates_proposal(fact_confidence: float) -> Proposal:
    """Pipeline v2: nothing near the fact, so ADD it, without asking the LLM."""
    return Proposal(action="ADD", confidence=_clamp(fact_confidence), reason=NO_CANDIDATES_REASON)


def prompt(fact_text: str, fact_type: str, candidates: Sequence[Candidate]) -> str:
    """The fact and a numbered list of the candidates with their id, type and content.

    Texts are JSON-quoted so that quotes or newlines inside them cannot blur the list.
    """
    lines = "\n".join(
        f"{i}. id={m.id} type={m.type} content={_quote(m.text)}" for i, m in enumerate(candidates, start=1)
    )
    return (
        f"New fact (type={fact_type}): {_quote(fact_text)}\n\n"
        f"Existing memories:\n{lines}\n\n"
        "Which action does this new fact call for? Return the JSON object now."
    )


def parse_decision(raw: str, candidate_ids: Collection[str]) -> tuple[Proposal | None, list[str]]:
    """The proposal in an LLM reply, checked against the candidates, and warnings.

    Dropped (None, with a warning): an unreadable reply, an unknown action, an UPDATE or
    DELETE whose target is missing or not a candidate, a missing or empty reason. Kept,
    with a warning: a confidence that is missing or not a number (``DEFAULT_CONFIDENCE``),
    a NONE whose target is not a candidate (the target is dropped). Confidence is clamped
    to [0, 1]; the action is read case-insensitively.
    """
    try:
        data = load_json_reply(raw)
    except ValueError as exc:
        return None, [f"unparseable reply: {exc}"]
    warnings: list[str] = []
    if isinstance(data, list):
        objects = [item for item in data if isinstance(item, dict)]
        if not objects:
            return None, ["reply is a JSON array without a decision object"]
        if len(data) > 1:
            warnings.append(f"reply holds {len(data)} items, using the first decision object")
        data = objects[0]
    if not isinstance(data, dict):
        return None, [f"expected a JSON object, got {type(data).__name__}"]

    action = str(data.get("action") or "").strip().upper()
    if action not in ACTIONS:
        return None, [*warnings, f"unknown action {data.get('action')!r}, proposal dropped"]

    target = _target(data)
    if action in TARGETED_ACTIONS:
        if not target:
            return None, [*warnings, f"{action} without a targetId, proposal dropped"]
        if target not in candidate_ids:
            return None, [*warnings, f"{action} target {target!r} is not one of the candidates, proposal dropped"]
    elif action == "NONE":
        if target and target not in candidate_ids:
            warnings.append(f"NONE target {target!r} is not one of the candidates, target dropped")
            target = ""
    else:
        target = ""  # an ADD points at nothing

    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return None, [*warnings, f"{action} without a reason, proposal dropped"]
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON_CHARS:
        warnings.append(f"reason of {len(reason)} characters, truncated to {MAX_REASON_CHARS}")
        reason = reason[: MAX_REASON_CHARS - 1] + "…"

    confidence = _confidence(data.get("confidence"), warnings)
    proposal = Proposal(action=action, target_id=target, confidence=confidence, reason=reason)  # type: ignore[arg-type]
    return proposal, warnings


def _target(data: dict[str, Any]) -> str:
    value = data.get("targetId", data.get("target_id"))
    if value is None or isinstance(value, bool):
        return ""
    return str(value).strip()


def _confidence(value: Any, warnings: list[str]) -> float:
    if value is None:
        warnings.append(f"no confidence, using {DEFAULT_CONFIDENCE}")
        return DEFAULT_CONFIDENCE
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or math.isnan(number):
        warnings.append(f"confidence {value!r} is not a number, using {DEFAULT_CONFIDENCE}")
        return DEFAULT_CONFIDENCE
    return _clamp(number)


def _clamp(value: float) -> float:
    return DEFAULT_CONFIDENCE if math.isnan(value) else min(1.0, max(0.0, float(value)))


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)

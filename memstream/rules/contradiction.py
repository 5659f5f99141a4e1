"""The extraction spec step 7: does a new fact supersede nearby stored ones? The LLM decides;
this module builds its question and checks its answer against the candidates."""

from __future__ import annotations

from collections.abc import Sequence

from memstream.rules.extraction import load_json_reply
from memstream.schemas import CONTRADICTION_EXEMPT_TYPES, Memory

#: Most nearby memories put to the LLM at once.
MAX_CANDIDATES = 5
#: Recorded on every supersede this check decides (Pipeline v2's audit names the prompt).
PROMPT_VERSION = "contradiction.v1"

SYSTEM = """\
You maintain a coding agent's memory. A new fact has been stored. Decide which of the existing
facts it supersedes: facts about the same subject that the new fact contradicts or replaces
(a changed decision, tool, value or state). Facts that are merely related are NOT superseded.
Return ONLY JSON: {"superseded": ["<id>", ...]} (an empty list when none)."""


def checks_contradictions(memory: Memory) -> bool:
    """The memory spec: session-summary and conversation memories skip contradiction detection."""
    return memory.type not in CONTRADICTION_EXEMPT_TYPES


def eligible_candidates(new: Memory, nearby: Sequence[Memory]) -> list[Memory]:
    """The nearby memories ``new`` may supersede: active, not exempt, and not stated after it.

    A memory stated later cannot be superseded by an earlier one; their pair is the later
    one's own check, which runs after the earlier one is stored (one scope's memories are
    stored in order). Checked in a backlog, an early memory would otherwise be asked about
    every later one already stored (issue 18: a call per pair, twice).
    """
    return [
        m
        for m in nearby
        if m.id != new.id
        and m.superseded_by is None
        and m.type not in CONTRADICTION_EXEMPT_TYPES
        and m.updated_at <= new.updated_at
    ][:MAX_CANDIDATES]


def unweighed(candidates: Sequence[Memory], weighed: Sequence[str]) -> list[Memory]:
    """The candidates the decision stage did not already put to the LLM beside the new memory.

    The decision's LLM was shown those and chose ADD: the new fact replaces none of them, the
    same question this check asks. Any candidate it did not see keeps the whole check.
    """
    seen = set(weighed)
    return [m for m in candidates if m.id not in seen]


def prompt(new: Memory, candidates: Sequence[Memory]) -> str:
    lines = "\n".join(f'- id={m.id} type={m.type}: "{m.text}"' for m in candidates)
    return (
        f'New fact (type={new.type}): "{new.text}"\n\nExisting facts:\n{lines}\n\n'
        "Does this new fact supersede any of these existing facts?"
    )


def parse_superseded(raw: str, candidates: Sequence[Memory]) -> tuple[list[str], list[str]]:
    """The candidate ids the reply names as superseded, and warnings for anything else."""
    known = {m.id for m in candidates}
    try:
        data = load_json_reply(raw)
    except ValueError as exc:
        return [], [f"unparseable reply: {exc}"]
    if isinstance(data, dict) and "superseded" not in data:
        return [], ["reply has no 'superseded' list"]
    ids = data["superseded"] if isinstance(data, dict) else data
    if not isinstance(ids, list):
        return [], ["'superseded' is not a list"]
    chosen: list[str] = []
    warnings: list[str] = []
    for item in ids:
        value = str(item.get("id", "")) if isinstance(item, dict) else str(item)
        if value in chosen:
            continue
        if value in known:
            chosen.append(value)
        else:
            warnings.append(f"ignored id {value!r}: not one of the candidates")
    return chosen, warnings

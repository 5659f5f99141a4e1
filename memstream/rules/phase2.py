"""Phase 2 of the consolidation spec: select, diff and watermark the Phase 1 outputs, and ask for the
consolidated summary.

Selection ignores rollouts whose last usage (or, never used, generation time) is older
than ``max_unused_days``, ranks the rest by usage count, then recency, and keeps the top
N. The diff labels the selection against the last successful one: added (new, or a newer
output of a rollout than the one selected last time), retained, and removed (selected
last time, still known, no longer selected). The watermark is an offset on the
consolidation topic and never moves backwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import msgspec

from memstream.rules.extraction import load_json_reply
from memstream.rules.secrets import redact
from memstream.schemas import Phase2Input, RolloutOutput, SelectedRollout

PROMPT_VERSION = "phase2.v1"

SYSTEM = """\
You consolidate the long-term memory of a coding agent for one project. You are given the
previous consolidated memory (if any) and what changed in the selected session memories since:
ADDED sessions (new evidence), RETAINED sessions (already reflected), REMOVED sessions (no longer
selected: forget what only they supported). Write the new consolidated memory: what matters about
the project now, what changed recently, and what is stale. Be concise and factual, at most
15 bullet points, no preamble.
Return ONLY a JSON object: {"summary": "<the consolidated memory as markdown bullet points>"}"""

#: Longest consolidated summary kept.
SUMMARY_MAX = 4_000


class Diff(msgspec.Struct, frozen=True, kw_only=True):
    added: list[str] = []
    retained: list[str] = []
    removed: list[str] = []

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def last_activity(item: Phase2Input) -> datetime:
    """Last usage, or for a never-used rollout the time its output was generated."""
    assert item.output is not None
    return item.last_usage if item.last_usage is not None else item.output.generated_at


def select(inputs: Iterable[Phase2Input], now: datetime, *, max_unused_days: float, top_n: int) -> list[Phase2Input]:
    """The consolidation spec's selection: recent enough, by usage count then recency, top N."""
    horizon = now - timedelta(days=max_unused_days)
    eligible = [
        item
        for item in inputs
        if item.output is not None and item.output.outcome == "succeeded" and last_activity(item) >= horizon
    ]
    eligible.sort(key=lambda item: (item.usage_count, last_activity(item), item.offset), reverse=True)
    return eligible[:top_n]


def diff(
    selection: Sequence[Phase2Input], previous: Sequence[SelectedRollout], known: Mapping[str, Phase2Input]
) -> Diff:
    """Label the selection against the last successful one (the consolidation spec's selection diff).

    A rollout refreshed since it was selected stays *added* until a run selects its newer
    output; a rollout selected last time that still exists outside the selection is *removed*.
    """
    before = {s.rollout_id: s.offset for s in previous}
    chosen = {item.output.rollout_id for item in selection if item.output is not None}
    added: list[str] = []
    retained: list[str] = []
    for item in selection:
        assert item.output is not None
        rollout = item.output.rollout_id
        (retained if before.get(rollout) == item.offset else added).append(rollout)
    removed = [rollout for rollout in before if rollout not in chosen and rollout in known]
    return Diff(added=added, retained=retained, removed=removed)


def baseline(selection: Sequence[Phase2Input]) -> list[SelectedRollout]:
    """What a successful run records as consumed: each selected rollout's exact output."""
    return [SelectedRollout(rollout_id=i.output.rollout_id, offset=i.offset) for i in selection if i.output]


def completion_watermark(claimed: int, loaded: Iterable[Phase2Input]) -> int:
    """The max of the claimed watermark and the newest input offset loaded: never backwards."""
    return max([claimed, *(item.offset for item in loaded)])


def is_dirty(inputs: Iterable[Phase2Input], watermark: int) -> bool:
    """Has Phase 1 output arrived since the last successful run?"""
    return any(item.offset > watermark for item in inputs if item.output is not None)


def prompt(label: str, previous_summary: str, diff_: Diff, outputs: Mapping[str, RolloutOutput]) -> str:
    def section(title: str, rollouts: Sequence[str], *, detailed: bool) -> str:
        if not rollouts:
            return f"{title}: none"
        parts = []
        for rollout in rollouts:
            output = outputs[rollout]
            text = f"### {output.slug or rollout}\nSummary: {output.rollout_summary}"
            if detailed and output.raw_memory:
                text += f"\nNotes:\n{output.raw_memory}"
            parts.append(text)
        return f"{title}:\n" + "\n\n".join(parts)

    return "\n\n".join(
        [
            f"Scope: {label}",
            f"Previous consolidated memory:\n{previous_summary or '(none yet)'}",
            section("ADDED sessions", diff_.added, detailed=True),
            section("RETAINED sessions", diff_.retained, detailed=False),
            section("REMOVED sessions", diff_.removed, detailed=False),
            "Return the JSON object now.",
        ]
    )


def parse_summary(raw: str) -> str:
    """The consolidated summary from the model's reply, redacted; raises ValueError if unusable."""
    try:
        data = load_json_reply(raw)
    except ValueError:
        data = raw  # a model that answers in plain markdown still answered
    text = data.get("summary", "") if isinstance(data, dict) else data
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the reply has no summary")
    return redact(text.strip())[:SUMMARY_MAX]

"""Phase 1 of the consolidation spec: distil one idle session (a rollout) into a raw memory and a summary.

Eligible are sessions idle long enough (so a still-active session is not summarized)
and inside the age window; each is distilled again only after new turns. The model
returns a detailed ``raw_memory``, a compact ``rollout_summary`` and an optional
``rollout_slug``; secrets are redacted from all three before they leave the stage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

import msgspec

from memstream.rules.extraction import load_json_reply
from memstream.rules.secrets import redact
from memstream.schemas import RolloutState

PROMPT_VERSION = "phase1.v1"

SYSTEM = """\
You keep the long-term memory of a coding agent. Below is one finished session between a user
and the agent. Distil it for future sessions on the same project.
Return ONLY a JSON object:
{"raw_memory": "<detailed notes: what was worked on, decisions and why, commands, files,
  errors and their fixes, open questions — everything a future session would need>",
 "rollout_summary": "<2-4 sentences: what this session was about and where it ended>",
 "rollout_slug": "<3-6 lowercase words joined by dashes naming the session>"}
If the session holds nothing worth remembering, return {"raw_memory": "", "rollout_summary": ""}."""

#: Longest slug kept; it names a file.
SLUG_MAX = 60
#: Longest fields kept from a reply.
RAW_MEMORY_MAX = 8_000
SUMMARY_MAX = 1_200


class Distilled(msgspec.Struct, frozen=True):
    raw_memory: str
    rollout_summary: str
    slug: str

    @property
    def empty(self) -> bool:
        return not self.raw_memory and not self.rollout_summary


def add_exchange(exchanges: Sequence[str], exchange: str, *, max_chars: int) -> list[str]:
    """``exchanges`` with ``exchange`` appended, the oldest dropped to stay within ``max_chars``.

    An exchange that goes on (the same question, a longer reply: its text begins with the last one
    kept) replaces the last one instead of standing beside it: a session's rollout holds each
    exchange once (issue 25.3)."""
    kept = list(exchanges)
    if kept and exchange and exchange.startswith(kept[-1]):
        kept.pop()
    if exchange:
        kept.append(exchange)
    total = sum(len(e) for e in kept)
    while len(kept) > 1 and total > max_chars:
        total -= len(kept.pop(0))
    return kept


def is_due(state: RolloutState, now: datetime, *, idle: timedelta, max_age: timedelta) -> bool:
    """The consolidation spec's claim rules for one rollout: new turns since its last distillation, idle
    long enough, inside the age window, and not waiting out a retry backoff."""
    if state.last_ts is None or state.turns <= state.distilled_turns or not state.exchanges:
        return False
    if now - state.last_ts < idle or now - state.last_ts > max_age:
        return False
    return state.retry_at is None or now >= state.retry_at


def retry_at(now: datetime, failures: int, *, base: float, cap: float) -> datetime:
    """When a rollout that failed ``failures`` times in a row may be tried again."""
    return now + timedelta(seconds=min(cap, base * 2 ** max(0, failures - 1)))


def prompt(state: RolloutState) -> str:
    body = "\n\n".join(state.exchanges)
    return f"Project: {state.project or state.scope_key}\n\nSession:\n{body}\n\nReturn the JSON object now."


def slugify(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:SLUG_MAX].strip("-")


def parse(raw: str) -> Distilled:
    """The model's reply as a redacted :class:`Distilled`; raises ValueError if unusable."""
    data = load_json_reply(raw)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    fields = {name: data.get(name, "") for name in ("raw_memory", "rollout_summary", "rollout_slug")}
    for name, value in fields.items():
        if not isinstance(value, str):
            raise ValueError(f"'{name}' is not a string")
    return Distilled(
        raw_memory=redact(fields["raw_memory"].strip())[:RAW_MEMORY_MAX],
        rollout_summary=redact(fields["rollout_summary"].strip())[:SUMMARY_MAX],
        slug=slugify(redact(fields["rollout_slug"])),
    )


def without_model(state: RolloutState) -> Distilled:
    """Raw mode (no LLM): the session's own exchanges are its raw memory, and the first
    and last of them its summary. Already privacy-stripped and redacted upstream."""
    first, last = state.exchanges[0], state.exchanges[-1]
    summary = first if first == last else f"{first}\n…\n{last}"
    return Distilled(
        raw_memory="\n\n".join(state.exchanges)[-RAW_MEMORY_MAX:],
        rollout_summary=summary[:SUMMARY_MAX],
        slug=slugify(" ".join(first.splitlines()[0].removeprefix("[user] ").split()[:6])),
    )

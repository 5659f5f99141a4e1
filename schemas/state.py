"""The state each agent keeps in its Faust table, versioned like events."""

from __future__ import annotations

from datetime import datetime

import msgspec

from schemas.events import Message


class State(msgspec.Struct, tag_field="schema", kw_only=True):
    """Base of every table value."""


class SessionState(State, tag="state.session.v1", kw_only=True):
    """Snapshot agent, per session: its last public messages and assistant-turn count."""

    messages: list[Message] = []
    assistant_turns: int = 0


class ExtractState(State, tag="state.extract.v1", kw_only=True):
    """Extract agent, per session: the snapshots already extracted (bounded), and what they yielded."""

    done: list[str] = []
    facts: int = 0
    warnings: int = 0
    gated: int = 0
    parked: int = 0


class ParkStats(State, tag="state.park.v1", kw_only=True):
    """Park agent, per session: snapshots sent back for another extraction attempt."""

    retried: int = 0


class EmbedStats(State, tag="state.embed.v1", kw_only=True):
    """Embed agent, per scope: texts embedded and in how many batches."""

    texts: int = 0
    batches: int = 0


class RecentMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A memory the dedup agent created or refreshed, kept until the store surely has it."""

    id: str
    type: str
    text: str
    vector: list[float]
    decided_at: float


class DedupState(State, tag="state.dedup.v1", kw_only=True):
    """Dedup agent, per scope: memories decided on but perhaps not yet visible in the store."""

    recent: list[RecentMemory] = []
    created: int = 0
    refreshed: int = 0


class StoreStats(State, tag="state.store.v1", kw_only=True):
    """Store agent, per scope: what it applied."""

    created: int = 0
    refreshed: int = 0
    deleted: int = 0
    superseded: int = 0
    skipped: int = 0


class AgeState(State, tag="state.age.v1", kw_only=True):
    """Age agent, per scope: the newest progress memory seen and summaries condensed."""

    progress_id: str = ""
    progress_updated_at: datetime | None = None
    condensed: list[str] = []


class ContradictionState(State, tag="state.contradiction.v1", kw_only=True):
    """Contradiction agent, per scope: memories already checked (bounded) and outcomes."""

    checked: list[str] = []
    superseded: int = 0


AnyState = SessionState | ExtractState | ParkStats | EmbedStats | DedupState | StoreStats | AgeState | ContradictionState

"""The state each agent keeps in its Faust table, versioned like events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # numpy is imported where a vector is packed or read: the hook imports schemas, never numpy
    import numpy as np

from memstream.schemas.events import Message, Provenance, Role, RolloutOutput


class State(msgspec.Struct, tag_field="schema", kw_only=True):
    """Base of every table value."""

    #: Writes of this key so far, counted by a versioned table (agents.base.StateTable): of two
    #: records of one key in its changelog, table recovery keeps the higher. 0 in values written
    #: before it was counted, and in tables that do not count.
    version: int = 0


class AppliedTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One turn the snapshot stage has applied to a session, where it came from, and what it left."""

    #: The turns partition and offset it was read at: a redelivery is recognised by them.
    partition: int
    offset: int
    role: Role
    #: Its public content, cut to ``MEMSTREAM_MESSAGE_MAX_CHARS``; "" when it was entirely private.
    content: str
    #: The session's assistant-turn count once this turn was applied.
    assistant_turns: int
    #: Where the turn came from (file and line for a captured session), if it said.
    provenance: Provenance | None = None
    #: The session's assistant-turn count when the exchange this turn belongs to began (its first
    #: user message arrived): every snapshot of one exchange names it, however far the exchange
    #: has gone. -1 on turns applied before it was kept.
    exchange: int = -1


class SessionState(State, tag="state.session.v1", kw_only=True):
    """Snapshot agent, per session: its last public messages and assistant-turn count.

    ``applied`` holds the last turns applied, each with its offset: enough to rebuild the
    window as of any of the last ``REDELIVERY_KEEP`` turns, so a turn redelivered after a
    crash re-emits the snapshot it produced the first time instead of being applied again.
    ``messages`` is what states written before ``applied`` existed hold (read, never written).
    """

    messages: list[Message] = []
    assistant_turns: int = 0
    applied: list[AppliedTurn] = []
    #: What a snapshot of user turns that got no reply needs, when the session goes idle.
    project: str = ""
    user: str = ""
    last_ts: datetime | None = None
    #: Processing time (epoch seconds) of the session's last turn, and the turns partition it came on.
    last_seen: float = 0.0
    partition: int = -1
    #: The user turns awaiting a reply were stored already (the session went idle on them).
    pending_flushed: bool = False
    #: The session's own id. The table's key is memstream.identity.session_key (the id within
    #: its project and user); a state kept under the bare id (before keys named the tenant) has "".
    session_id: str = ""
    #: [partition, offset] of the first turn the session applied ([] in states from before it was
    #: kept): a turn read there before it was never applied, whatever ``applied`` has forgotten.
    first_applied: list[int] = []
    #: What this state's snapshot and exchange ids are salted with (memstream.rules.snapshot.lineage):
    #: set from the first turn it applied, never changed. A session's state is lost when the
    #: embedded broker starts afresh, and the session goes on counting its turns from 0; without
    #: the salt its ids would be those of its first exchanges, already stored. "" in states from
    #: before it was kept, whose ids stay as they were.
    lineage: str = ""


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
    #: Facts of raw exchanges not embedded, since a newer fact of their exchange in the same batch held them.
    coalesced: int = 0


class RecentMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A memory the decide agent created or refreshed, kept until the store surely has it."""

    id: str
    type: str
    text: str
    #: The vector as float32 bytes (little-endian): a busy project's table value holds
    #: dozens of these, and as JSON numbers 256 of them made a 2 MiB changelog message,
    #: over Kafka's default 1 MB limit.
    packed: bytes = b""
    #: The vector as numbers, as values written before ``packed`` existed carry it.
    vector: list[float] = []
    decided_at: float
    #: Whose exchange it is (``Memory.speaker``, "" for a shared fact) and when their fact was said: a
    #: forget of that user takes it out (``memstream.rules.speakers``).
    speaker: str = ""
    said_at: datetime | None = None

    @classmethod
    def of(
        cls,
        *,
        id: str,
        type: str,
        text: str,
        vector: Sequence[float],
        decided_at: float,
        speaker: str = "",
        said_at: datetime | None = None,
    ) -> RecentMemory:
        import numpy as np

        packed = np.asarray(vector, dtype="<f4").tobytes()
        return cls(id=id, type=type, text=text, packed=packed, decided_at=decided_at, speaker=speaker, said_at=said_at)

    def array(self) -> np.ndarray:
        import numpy as np

        return np.frombuffer(self.packed, dtype="<f4") if self.packed else np.asarray(self.vector, dtype=np.float32)


class DedupState(State, tag="state.dedup.v1", kw_only=True):
    """Dedup agent, per scope: memories decided on but perhaps not yet visible in the store."""

    recent: list[RecentMemory] = []
    created: int = 0
    refreshed: int = 0
    #: When the scope was last forgotten: facts dated no later are dropped.
    forgotten_at: datetime | None = None


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


class GraphStats(State, tag="state.graph.v1", kw_only=True):
    """Graph agent, per scope: memories recorded in the knowledge graph, rows written, failures."""

    applied: int = 0
    entities_written: int = 0
    relations_written: int = 0
    #: Graph writes that failed (logged and skipped: the memory itself stands).
    failures: int = 0


class HistoryStats(State, tag="state.history.v1", kw_only=True):
    """History agent, per scope: audit records kept, and those flagged for review."""

    records: int = 0
    review_needed: int = 0


class ForgottenScope(State, tag="state.forgotten.v1", kw_only=True):
    """Store and history agents, per scope: when it was last forgotten (``memstream forget``).

    Kept apart from their counters (summed on a timer): ops and records of the scope dated no
    later than this are dropped.
    """

    forgotten_at: datetime


class RolloutState(State, tag="state.rollout.v1", kw_only=True):
    """Phase 1 agent, per session (rollout): its redacted exchanges and Phase 1 progress."""

    #: The source partition of the session, so a worker only distills sessions it owns.
    partition: int = -1
    project: str = ""
    scope_key: str = ""
    #: The session's user/assistant exchanges, privacy-stripped and redacted, oldest first
    #: (bounded: the oldest are dropped first).
    exchanges: list[str] = []
    turns: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    #: Assistant turns covered by the last Phase 1 output (0: never distilled).
    distilled_turns: int = 0
    #: Failed Phase 1 attempts since the last success, and when the next may start.
    failures: int = 0
    retry_at: datetime | None = None
    outcome: str = ""


class Phase2Input(State, tag="state.phase2-input.v1", kw_only=True):
    """Consolidation agent, per rollout: its newest Phase 1 output and its usage."""

    output: RolloutOutput | None = None
    #: Offset of ``output`` on the consolidation topic: its place in the watermark.
    offset: int = -1
    usage_count: int = 0
    last_usage: datetime | None = None


class SelectedRollout(msgspec.Struct, frozen=True, kw_only=True):
    """One rollout a successful Phase 2 consumed, and which of its outputs (by offset)."""

    rollout_id: str
    offset: int


class Phase2State(State, tag="state.phase2.v1", kw_only=True):
    """Consolidation agent, one key (``global``): the last successful run and the watermark."""

    #: Newest consolidation-topic offset of the inputs the last successful run consumed;
    #: never moves backwards.
    watermark: int = -1
    #: The exact Phase 1 outputs the last successful run selected (the consolidation spec's
    #: ``selected_for_phase2`` baseline).
    selected: list[SelectedRollout] = []
    last_success_at: datetime | None = None
    runs: int = 0
    failures: int = 0
    #: Forgotten projects (scope key: when): their Phase 1 outputs of sessions active no later
    #: are not taken in again.
    forgotten: dict[str, datetime] = {}


AnyState = (
    SessionState
    | ExtractState
    | ParkStats
    | EmbedStats
    | DedupState
    | StoreStats
    | AgeState
    | ContradictionState
    | GraphStats
    | HistoryStats
    | ForgottenScope
    | RolloutState
    | Phase2Input
    | Phase2State
)

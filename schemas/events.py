"""Every event that crosses a topic, as versioned, tagged msgspec Structs.

Evolution rules (msgspec's): a new field gets a default; a field never changes type;
a breaking change is a new tag (``turn.v2``) decoded beside the old one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from memstream.identity import content_features, normalized_turn_content, turn_hash
from memstream.schemas.memory import Memory, MemoryType, Provenance, Scope

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = Role.__args__  # type: ignore[attr-defined]

ExtractionMode = Literal["normal", "summary", "init", "raw"]


class Event(msgspec.Struct, tag_field="schema", kw_only=True, frozen=True):
    """Base of every event; the tag names the event and its schema version."""


class TurnTimestamps(msgspec.Struct, frozen=True, kw_only=True):
    """The capture spec's timestamps: when the message was said, and when memstream read it."""

    occurred: datetime
    extracted_at: datetime


class TurnMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The capture spec's metadata, computed from the normalized content."""

    content_length: int = 0
    has_code: bool = False
    has_markdown: bool = False


class Turn(Event, tag="turn.v2", kw_only=True, frozen=True):
    """One message of a coding-agent session, in the capture spec's universal message format. Key: session.

    ``turn.v1`` events (without the universal fields) still decode, into this type: see
    :func:`memstream.schemas.codec.decode`.
    """

    session_id: str
    #: The project directory the session works in; hashed into the project scope.
    project: str
    role: Role
    content: str
    ts: datetime
    #: The user's identity (e.g. git email); hashed into the user scope.
    user: str = ""
    #: Which agent host sent it (claude-code, codex, …).
    source: str = ""
    #: SHA-256 hex of the normalized content (trimmed, line endings normalized): the capture spec's dedup key.
    hash: str = ""
    #: The coding CLI the message was captured from (claude, codex, gemini, kimi); "" when published directly.
    llm_source: str = ""
    #: The model that wrote an assistant message, where its session file records it.
    llm_model: str = ""
    #: Where the message came from: the CLI's session file and line, or how it was published.
    provenance: Provenance | None = None
    timestamps: TurnTimestamps | None = None
    metadata: TurnMetadata | None = None
    #: The host says the session ended with this turn (its ``SessionEnd``, the last turn of a finished
    #: transcript): user turns left without a reply are stored at once, not after the idle window.
    ends_session: bool = False


class TurnV1(Event, tag="turn.v1", kw_only=True, frozen=True):
    """The first turn schema, still accepted on the turns topic; decoded into :class:`Turn`."""

    session_id: str
    project: str
    role: Role
    content: str
    ts: datetime
    user: str = ""
    source: str = ""


def turn_metadata(content: str) -> TurnMetadata:
    """Length, and whether the message holds code (a fence or inline code) or other Markdown."""
    length, has_code, has_markdown = content_features(content)
    return TurnMetadata(content_length=length, has_code=has_code, has_markdown=has_markdown)


def universal_turn(turn: Turn, *, extracted_at: datetime, provenance: Provenance | None = None) -> Turn:
    """The turn with the capture spec's universal fields filled from its content (those it already has are kept)."""
    return msgspec.structs.replace(
        turn,
        hash=turn.hash or turn_hash(turn.content),
        provenance=turn.provenance or provenance,
        timestamps=turn.timestamps or TurnTimestamps(occurred=turn.ts, extracted_at=extracted_at),
        metadata=turn.metadata or turn_metadata(turn.content),
    )


def upgrade_turn(old: TurnV1) -> Turn:
    """A ``turn.v1`` event as the pipeline's one turn type; its provenance says it was published."""
    turn = Turn(
        session_id=old.session_id,
        project=old.project,
        role=old.role,
        content=old.content,
        ts=old.ts,
        user=old.user,
        source=old.source,
    )
    return universal_turn(
        turn,
        extracted_at=old.ts,
        provenance=Provenance(source_type=old.source or "publish", session_id=old.session_id),
    )


class Message(msgspec.Struct, frozen=True):
    role: Role
    content: str
    #: Where the message came from (file and line for a captured session), if the turn said.
    provenance: Provenance | None = None


class Snapshot(Event, tag="snapshot.v1", kw_only=True, frozen=True):
    """The last messages of a session, privacy-stripped, after an assistant turn. Key: session."""

    snapshot_id: str
    session_id: str
    project: str
    project_key: str
    user_key: str
    mode: ExtractionMode
    #: ``[role] content`` lines, joined, truncated.
    text: str
    #: Ordinal of the assistant turn that triggered this snapshot (1-based).
    turn_index: int
    #: The user/assistant exchange that ended with this turn (for raw mode).
    exchange: str = ""
    #: What the user explicitly asked to remember in this exchange ("remember that …").
    explicit: list[str] = []
    #: Extraction attempts already made (a parked snapshot comes back with attempt > 0).
    attempt: int = 0
    #: When its first extraction attempt failed: the retry budget counts from here.
    parked_since: datetime | None = None
    #: Where the exchange's messages came from (the capture spec provenance), oldest first.
    sources: list[Provenance] = []
    #: The exchange's identity in its session (see ``rules.snapshot.exchange_id``): the same on every
    #: snapshot of one exchange as it goes on, so raw mode keeps it as one memory. "" if unknown.
    exchange_id: str = ""
    ts: datetime


class ParkedSnapshot(Event, tag="parked-snapshot.v1", kw_only=True, frozen=True):
    """A snapshot whose extraction failed on every provider, waiting to be retried. Key: session."""

    snapshot: Snapshot
    not_before: datetime
    reason: str


class Entity(msgspec.Struct, frozen=True, kw_only=True):
    """An entity triple of Pipeline v2, carried on facts for later graph use."""

    source: str
    relationship: str
    target: str
    confidence: float = 1.0


class Fact(Event, tag="fact.v1", kw_only=True, frozen=True):
    """One atomic, typed fact extracted from a snapshot (or condensed by aging). Key: scope."""

    fact_id: str
    text: str
    type: MemoryType
    scope: Scope
    scope_key: str
    project: str = ""
    session_id: str = ""
    source_chunk: str = ""
    #: Where the fact came from: a snapshot id, or ``condense:<memory id>``.
    origin: str = ""
    #: The model's confidence in the fact (Pipeline v2); explicit requests are 1.0.
    confidence: float = 1.0
    #: Entity triples extracted with the fact's snapshot.
    entities: list[Entity] = []
    #: Where the fact's text came from (the capture spec provenance): the snapshot's exchange, or a condensed memory.
    sources: list[Provenance] = []
    #: A raw exchange's identity (its snapshot's ``exchange_id``): its memory's id derives from it, so a
    #: later snapshot of the same exchange refreshes that memory instead of adding one. "" otherwise.
    exchange_id: str = ""
    #: A conversation's speaker (user key): its memory is theirs to read (``Memory.speaker``). "" otherwise.
    speaker: str = ""
    ts: datetime


class EmbeddedFact(Event, tag="embedded-fact.v1", kw_only=True, frozen=True):
    """A fact with its document embedding. Key: scope."""

    fact: Fact
    vector: list[float]
    embedding_model: str


class MemoryOp(Event, kw_only=True, frozen=True):
    """An operation on stored memory; only the store agent applies them. Key: scope."""

    op_id: str
    scope_key: str
    #: Why: ``extracted``, ``duplicate``, ``aging:progress``, ``contradiction``, …
    cause: str = ""
    #: The model, and the version of its prompt, that decided this operation ("" if none).
    model: str = ""
    prompt_version: str = ""
    #: Who asked for it, when a person did (the console, the API): a principal's name, never a token.
    requested_by: str = ""


class CreateMemory(MemoryOp, tag="op.create.v1", kw_only=True, frozen=True):
    memory: Memory
    vector: list[float]
    #: The entity triples extracted with the fact, for the knowledge graph.
    entities: list[Entity] = []
    #: Memories the decision's LLM compared this fact with and chose to keep beside it (ADD):
    #: the contradiction check asks nothing about them again (issue 18: fewer LLM calls).
    weighed: list[str] = []


class RefreshMemory(MemoryOp, tag="op.refresh.v1", kw_only=True, frozen=True):
    """A duplicate arrived: refresh the existing memory's text and ``updated_at``.

    ``memory`` is what the fact would have become on its own; the store creates it if the
    target is gone by the time the refresh is applied (deleted by aging, say).
    """

    memory_id: str
    memory: Memory
    vector: list[float]
    entities: list[Entity] = []


class DeleteMemory(MemoryOp, tag="op.delete.v1", kw_only=True, frozen=True):
    memory_id: str


class SupersedeMemory(MemoryOp, tag="op.supersede.v1", kw_only=True, frozen=True):
    memory_id: str
    superseded_by: str


class SetImportance(MemoryOp, tag="op.importance.v1", kw_only=True, frozen=True):
    """Pin (importance 1.0) or unpin (back to unset) a memory: the console's pin and unpin."""

    memory_id: str
    importance: float | None = None


class ForgetScope(MemoryOp, tag="op.forget-scope.v1", kw_only=True, frozen=True):
    """Forget a user or a project: every memory, vector, graph link and audit record of the scope.

    Published on ``forgotten`` (compacted: the ledger replays read), fanned out to
    ``memory-ops`` and ``history`` keyed by the scope, so it is ordered after everything
    the scope had before it. Facts of the scope dated up to ``forgotten_at`` that arrive
    later (parked, in flight, replayed) are dropped; newer ones are a new start.
    """

    scope: Scope
    forgotten_at: datetime
    #: The audit of what the forget cannot reach: per topic still holding the scope's words, until
    #: when (None: kept forever, the ``turns`` topic). Empty on forgets recorded before it existed.
    words_held_until: dict[str, datetime | None] = {}
    #: A user's forget: the memories of other scopes that held the user's words (their exchanges in every
    #: project), which the store deleted; the history agent purges their audit records too. Set by the
    #: store agent on the forget it passes on; empty otherwise.
    removed_elsewhere: list[str] = []


Change = Literal["created", "refreshed", "deleted", "superseded"]


class MemoryUpdated(Event, tag="memory-updated.v1", kw_only=True, frozen=True):
    """What the store changed, for downstream services. Key: scope."""

    change: Change
    memory: Memory
    op_id: str
    cause: str = ""
    #: The entity triples the change came with (created and refreshed memories).
    entities: list[Entity] = []
    #: A created memory's ``CreateMemory.weighed``: the decision already judged it against these.
    weighed: list[str] = []
    ts: datetime


class RolloutOutput(Event, tag="rollout-output.v1", kw_only=True, frozen=True):
    """Phase 1 (the consolidation spec): one idle session (a rollout) distilled into memory. Key: scope.

    Published on the one-partition consolidation topic, so its offset there is the
    watermark Phase 2 keeps. Every text field is secret-redacted.
    """

    #: The rollout's id: its session.
    rollout_id: str
    scope_key: str
    project: str = ""
    #: ``succeeded`` (memory produced) or ``succeeded_no_output`` (nothing worth keeping).
    outcome: Literal["succeeded", "succeeded_no_output"] = "succeeded"
    #: The detailed memory of what happened in the session.
    raw_memory: str = ""
    #: The compact summary Phase 2 keeps one file of per retained rollout.
    rollout_summary: str = ""
    #: A short file-name-safe name for the rollout, if the model gave one.
    slug: str = ""
    #: Assistant turns the rollout had when it was distilled.
    turns: int = 0
    #: When the session was last active (the consolidation spec's ``source_updated_at``).
    source_updated_at: datetime
    #: When Phase 1 produced this output.
    generated_at: datetime
    model: str = ""


class MemoryUsage(Event, tag="memory-usage.v1", kw_only=True, frozen=True):
    """Search or the [MEMORY] block returned memories: usage for Phase 2's selection.

    Usage counts for the rollouts (sessions) the memories came from. Key: scope.
    """

    rollout_ids: list[str]
    memory_ids: list[str] = []
    ts: datetime


class ConsolidationRequest(Event, tag="consolidation-request.v1", kw_only=True, frozen=True):
    """Asks for a global Phase 2 run; its topic has exactly one partition.

    ``reason``: ``phase1`` (new Phase 1 output, debounced) or ``schedule``.
    """

    reason: str
    scope_key: str = ""
    ts: datetime


#: What the one-partition consolidation topic carries: Phase 2's inputs and its triggers.
ConsolidationEvent = RolloutOutput | MemoryUsage | ConsolidationRequest | ForgetScope


class DeadLetter(Event, tag="dead-letter.v1", kw_only=True, frozen=True):
    """An event a stage could not process, with the reason and the original bytes.

    ``topic``/``partition``/``offset`` point at the original record; ``payload`` holds its
    bytes, cut to memstream.limits.DEAD_LETTER_PAYLOAD_MAX_BYTES when ``truncated`` (the
    whole record is then read at the pointer), and ``payload_bytes`` is its full size.
    """

    stage: str
    reason: str
    topic: str
    partition: int = -1
    offset: int = -1
    key: bytes | None = None
    payload: bytes = b""
    ts: datetime
    payload_bytes: int = 0
    truncated: bool = False
    #: Times this event has been dead-lettered: 1, plus one for each re-drive that failed again.
    attempts: int = 1
    #: The dead letter this event was re-driven from (its id, see :func:`dead_letter_id`), "" if none.
    redriven_from: str = ""


def dead_letter_id(partition: int, offset: int) -> str:
    """A dead letter's id: where it sits on the dead-letters topic, ``<partition>:<offset>``."""
    return f"{partition}:{offset}"


class Redriven(Event, tag="redriven.v1", kw_only=True, frozen=True):
    """A dead letter sent back to the topic it came from (``memstream redrive``). Key: its id.

    Kept on a compacted topic, one record per dead letter, so no dead letter is re-driven twice.
    """

    #: The dead letter's id (``<partition>:<offset>`` on the dead-letters topic).
    dead_letter: str
    stage: str
    #: Where the original bytes went back to.
    topic: str
    partition: int = -1
    offset: int = -1
    #: Who re-drove it: ``cli`` or ``maintenance``.
    by: str = ""
    ts: datetime


DocumentSource = Literal["url", "file", "text"]


class DocumentIngest(Event, tag="document-ingest.v1", kw_only=True, frozen=True):
    """Ingest a document (Pipeline v2): fetch a URL, or take the raw content. Key: document id.

    Sent again for a document already ingested, it is ingested again: chunks already linked
    to it are kept, new ones are added, ones its content no longer has are removed.
    """

    document_id: str
    source_type: DocumentSource
    #: The URL, the file's path, or ``-`` for standard input.
    source: str
    #: The content for ``file`` and ``text``; empty for ``url`` (fetched by the document agent).
    content: str = ""
    title: str = ""
    project: str
    scope_key: str
    ts: datetime


class DocumentRemove(Event, tag="document-remove.v1", kw_only=True, frozen=True):
    """Remove a document and every chunk linked to it, as a unit. Key: document id."""

    document_id: str
    ts: datetime


AnyEvent = (
    Turn
    | TurnV1
    | Snapshot
    | ParkedSnapshot
    | Fact
    | EmbeddedFact
    | CreateMemory
    | RefreshMemory
    | DeleteMemory
    | SupersedeMemory
    | SetImportance
    | ForgetScope
    | MemoryUpdated
    | RolloutOutput
    | MemoryUsage
    | ConsolidationRequest
    | DeadLetter
    | Redriven
    | DocumentIngest
    | DocumentRemove
)

AnyMemoryOp = CreateMemory | RefreshMemory | DeleteMemory | SupersedeMemory | SetImportance | ForgetScope

__all__ = [
    "ROLES",
    "AnyEvent",
    "AnyMemoryOp",
    "Change",
    "ConsolidationEvent",
    "ConsolidationRequest",
    "CreateMemory",
    "DeadLetter",
    "DeleteMemory",
    "DocumentIngest",
    "DocumentRemove",
    "DocumentSource",
    "EmbeddedFact",
    "Entity",
    "Event",
    "ExtractionMode",
    "Fact",
    "ForgetScope",
    "Memory",
    "MemoryOp",
    "MemoryUpdated",
    "MemoryUsage",
    "Message",
    "ParkedSnapshot",
    "Redriven",
    "RefreshMemory",
    "Role",
    "RolloutOutput",
    "Scope",
    "SetImportance",
    "Snapshot",
    "SupersedeMemory",
    "Turn",
    "TurnMetadata",
    "TurnTimestamps",
    "TurnV1",
    "dead_letter_id",
    "normalized_turn_content",
    "turn_hash",
    "turn_metadata",
    "universal_turn",
    "upgrade_turn",
]

"""Store agent: the only writer to the vector store.

Consumes ``memory-ops`` (key: scope). Emits ``memory-updated`` (key: scope), one event per
change actually made, saying what changed and why, and, for changes other stages asked
for (aging, condensation, contradiction), their audit record on ``history``. State: table
``store-stats`` — per scope, counts of what it applied, written on a timer
(``agents/counters.py``); ``store-forgotten`` — per scope, when it was last forgotten.
Writes are idempotent by memory id, so a replay or a redelivery leaves the store as it was.

A ``ForgetScope`` deletes every memory of the scope (superseded ones too) and their graph
links, and says so downstream as one ``deleted`` update per memory (cause ``forget``).
It is ordered after every earlier op of the scope by their shared key; a create or
refresh of the scope dated no later than the forget that arrives after it (a parked
snapshot's retry, a redelivery, a replay of old turns) is dropped; so is one of a forgotten user's
exchange (``Memory.speaker``), looked up in the worker's ledger of forgets (any worker may have taken it).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.agents.counters import counters
from memstream.embed.base import Embedder
from memstream.identity import normalize_content
from memstream.kafka.ledger import ledger_of
from memstream.ports import Providers
from memstream.rules import audit, provenance
from memstream.rules.forgotten import continued_id, grew_after_forget, said_since
from memstream.schemas import (
    AnyMemoryOp,
    CreateMemory,
    DeleteMemory,
    ForgetScope,
    ForgottenScope,
    Memory,
    MemoryOp,
    MemoryUpdated,
    RefreshMemory,
    SetImportance,
    StoreStats,
    SupersedeMemory,
)
from memstream.store.base import MemoryStore
from memstream.store.graph import GraphStore
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "store"
log = logging.getLogger(__name__)
#: The cause of the ``deleted`` updates a forget emits.
FORGET_CAUSE = "forget"
#: Memories read and deleted per round of a forget.
FORGET_PAGE = 500


async def forget(store: MemoryStore, graph: GraphStore | None, scope_key: str, *, spoken: bool = False) -> list[Memory]:
    """Delete every memory of a scope, superseded ones included, and their graph links; ``spoken`` (a
    user's forget): also every memory of any scope that holds the user's words (their exchanges)."""
    gone: dict[str, Memory] = {}
    scopes: list[str] | None = [scope_key]
    while True:
        if spoken and scopes is None:
            page = await store.list(None, include_superseded=True, limit=FORGET_PAGE, spoken_by=scope_key)
        else:
            page = await store.list(scopes, include_superseded=True, limit=FORGET_PAGE)
        fresh = [m for m in page if m.id not in gone]
        if not fresh:
            if page:  # the store returned memories it had just deleted: never loop on that
                raise RuntimeError(f"the store still lists {len(page)} deleted memories of a forgotten scope")
            if spoken and scopes is not None:
                scopes = None  # the scope is empty: on to the user's words in other scopes
                continue
            break
        for memory in fresh:
            await store.delete(memory.id)
            gone[memory.id] = memory
    if spoken:
        for memory in await unsource(store, scope_key):
            gone[memory.id] = memory
    if graph is not None and gone:
        await graph.purge_memory(list(gone))
    return list(gone.values())


async def unsource(store: MemoryStore, user: str) -> list[Memory]:
    """A user's forget, for the facts drawn from their turns (a source of theirs): one no other
    member's turns support is deleted (returned); one that others' also support keeps their sources
    only, and loses its excerpt (which may be the user's words)."""
    deleted: list[Memory] = []
    seen: set[str] = set()
    while page := await store.list(None, include_superseded=True, limit=FORGET_PAGE, sourced_by=user):
        if all(m.id in seen for m in page):  # the store lists what it has just rewritten: never loop on that
            raise RuntimeError(f"the store still lists {len(page)} memories sourced by a forgotten user")
        for memory in page:
            seen.add(memory.id)
            others = [s for s in memory.sources if s.speaker != user]
            if any(s.speaker for s in others):
                await store.refresh(
                    memory.id, text=memory.text, updated_at=memory.updated_at, source_chunk="", sources=others
                )
            else:
                await store.delete(memory.id)
                deleted.append(memory)
    kept = len(seen) - len(deleted)
    log.info("a user's forget: %d facts drawn only from their turns deleted, %d kept for others", len(deleted), kept)
    return deleted


def without_content(memory: Memory) -> Memory:
    """A forgotten memory as its deletion is announced: ids and dates, none of what it said.

    Announcing a forget must not copy the forgotten text onto another topic; the content
    hash goes too (a short preference could be confirmed by hashing guesses).
    """
    return msgspec.structs.replace(memory, text="", source_chunk="", content_hash="", project="", sources=[])


def forgotten_before(op: AnyMemoryOp, forgotten_at: datetime | None) -> bool:
    """Is this a create or refresh of a forgotten scope, dated no later than the forget?"""
    if forgotten_at is None or not isinstance(op, CreateMemory | RefreshMemory):
        return False
    return op.memory.updated_at <= forgotten_at


async def apply(store: MemoryStore, op: AnyMemoryOp, embedder: Embedder | None = None) -> tuple[str, Memory] | None:
    """Apply one operation; returns the change made and the memory after it, or None. ``embedder``
    embeds what a session said after a forgotten exchange (:func:`_said_since`); without one it keeps
    the operation's vector."""
    if isinstance(op, CreateMemory):
        existing = await store.get(op.memory.id)
        memory = op.memory
        if existing is not None and grew_after_forget(existing, memory):
            return await _said_since(store, existing, op, embedder)
        if existing is not None and not _reasserted(existing, memory):
            # A replay or a redelivery: keep its history (and its supersession), refresh content.
            memory = msgspec.structs.replace(
                memory,
                created_at=existing.created_at,
                superseded_by=existing.superseded_by,
                superseded_at=existing.superseded_at,
            )
            await store.upsert(memory, op.vector)
            return "refreshed", memory
        # New, or stated again after it was superseded: the newer statement brings it back,
        # as a creation, so aging and the contradiction check see it again.
        await store.upsert(memory, op.vector)
        return "created", memory
    if isinstance(op, RefreshMemory):
        existing = await store.get(op.memory_id)
        # The memory's session and sources follow the text it ends up holding (the capture spec).
        session_id, sources = provenance.refreshed(existing, op.memory) if existing is not None else (None, None)
        refreshed = await store.refresh(
            op.memory_id,
            text=op.memory.text,
            updated_at=op.memory.updated_at,
            source_chunk=op.memory.source_chunk,
            vector=op.vector,
            session_id=session_id,
            sources=sources,
        )
        if refreshed is not None:
            return "refreshed", refreshed
        # The duplicate's target is gone (aged out meanwhile): the fact stands on its own.
        return await apply(
            store,
            CreateMemory(
                op_id=op.op_id,
                scope_key=op.scope_key,
                cause=op.cause,
                memory=op.memory,
                vector=op.vector,
                entities=op.entities,
            ),
        )
    if isinstance(op, DeleteMemory):
        deleted = await store.delete(op.memory_id)
        return ("deleted", deleted) if deleted is not None else None
    if isinstance(op, SetImportance):
        current = await store.get(op.memory_id)
        if current is None or current.importance == op.importance:
            return None
        pinned = await store.set_importance(op.memory_id, op.importance)
        return ("refreshed", pinned) if pinned is not None else None
    if isinstance(op, SupersedeMemory):
        current = await store.get(op.memory_id)
        if current is None or current.superseded_by == op.superseded_by:
            return None
        superseded = await store.supersede(op.memory_id, op.superseded_by)
        return ("superseded", superseded) if superseded is not None else None
    raise TypeError(f"unknown memory operation {type(op).__name__}")


async def _said_since(
    store: MemoryStore, existing: Memory, op: CreateMemory, embedder: Embedder | None
) -> tuple[str, Memory] | None:
    """A new version of a forgotten (or marked wrong) exchange: the session went on after the forget. The
    forgotten memory is never rewritten; the turns said since become a memory of their own (issue 37.4),
    embedded alone so the forgotten words do not steer search to it either."""
    mark = str(existing.superseded_by)
    text = said_since(existing.text, op.memory.text)
    if not text:
        return None  # a redelivery or replay of what was forgotten
    memory = msgspec.structs.replace(
        op.memory,
        id=continued_id(existing.id, mark),
        text=text,
        content_hash=normalize_content(text).content_hash,
        superseded_by=None,
        superseded_at=None,
    )
    vector = (await embedder.embed_documents([text]))[0] if embedder is not None else op.vector
    return await apply(store, msgspec.structs.replace(op, memory=memory, vector=vector))


def _reasserted(existing: Memory, memory: Memory) -> bool:
    """Is ``memory`` a newer statement of a superseded memory (not a replay of the old one)?

    A replay carries the original fact's time, which is older than the supersession.
    """
    if existing.superseded_by is None:
        return False
    superseded_at = existing.superseded_at or existing.updated_at
    return memory.updated_at > superseded_at


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    table = state_table(app, "store-stats", providers.settings.partitions, use_partitioner=True)
    stats = counters(app, table, StoreStats, STAGE)
    # Keyed and partitioned as memory-ops: written while the forget's own event is processed.
    forgotten = state_table(app, "store-forgotten", providers.settings.partitions)
    # A user's forget comes keyed by the user, on one worker's partition; their exchanges come keyed by
    # their projects, on partitions other workers may own: the speaker is looked up in the worker's
    # ledger of every forget (memstream.kafka.ledger), never in this partition's table alone.
    ledger = ledger_of(app)

    async def forget_scope(op: ForgetScope) -> None:
        gone = await forget(providers.store, providers.graph, op.scope_key, spoken=op.scope == "user")
        elsewhere = [m.id for m in gone if m.scope_key != op.scope_key]
        current: ForgottenScope | None = forgotten.get(op.scope_key)
        if current is None or op.forgotten_at > current.forgotten_at:
            forgotten[op.scope_key] = ForgottenScope(forgotten_at=op.forgotten_at)
        # The scope key is a hash: logging it names nobody.
        log.warning(
            "forgot scope %s: %d memories deleted (%d in other scopes)", op.scope_key, len(gone), len(elsewhere)
        )
        now = datetime.now(UTC)
        for memory in gone:
            await topics.memory_updated.send(
                key=memory.scope_key.encode(),
                value=MemoryUpdated(
                    change="deleted", memory=without_content(memory), op_id=op.op_id, cause=FORGET_CAUSE, ts=now
                ),
            )
        # On to the history agent, after every audit record this agent wrote for the scope.
        # The records of the user's exchanges in other scopes go with it.
        passed = msgspec.structs.replace(op, removed_elsewhere=elsewhere) if elsewhere else op
        await topics.history.send(key=op.scope_key.encode(), value=passed)

    async def handle(value: Any, event: EventT) -> None:
        op = expect(value, MemoryOp)
        with stage_span("memstream.store", op=type(op).__name__, cause=op.cause) as span:
            if isinstance(op, ForgetScope):
                ledger.record(op)
                await forget_scope(op)
                return
            scope: ForgottenScope | None = forgotten.get(op.scope_key)
            speaker = op.memory.speaker if isinstance(op, CreateMemory | RefreshMemory) else ""
            if forgotten_before(op, scope.forgotten_at if scope else None) or forgotten_before(  # type: ignore[arg-type]
                op,  # type: ignore[arg-type]
                ledger.latest(speaker) if speaker else None,
            ):
                span.set_attribute("store.change", "forgotten")
                stats.add(op.scope_key, StoreStats(skipped=1))
                return
            result = await apply(providers.store, op, providers.embedder)  # type: ignore[arg-type]
            if result is None:
                span.set_attribute("store.change", "none")
                stats.add(op.scope_key, StoreStats(skipped=1))
                return
            change, memory = result
            span.set_attribute("store.change", change)
            stats.add(op.scope_key, StoreStats(**{change: 1}))
            now = datetime.now(UTC)
            await topics.memory_updated.send(
                key=op.scope_key.encode(),
                value=MemoryUpdated(
                    change=change,  # type: ignore[arg-type]
                    memory=memory,
                    op_id=op.op_id,
                    cause=op.cause,
                    entities=list(getattr(op, "entities", [])),
                    weighed=op.weighed if isinstance(op, CreateMemory) and change == "created" else [],
                    ts=now,
                ),
            )
            outcome = audit.store_outcome(change, op.cause)
            if outcome is not None:
                await topics.history.send(
                    key=op.scope_key.encode(),
                    value=audit.store_record(
                        outcome,
                        memory,
                        op_id=op.op_id,
                        cause=op.cause,
                        ts=now,
                        model=op.model,
                        prompt_version=op.prompt_version,
                        requested_by=op.requested_by,
                    ),
                )

    @app.agent(topics.memory_ops, name=STAGE)
    async def store(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return store

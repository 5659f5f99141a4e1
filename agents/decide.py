"""Decide agent: what a new fact does to memory (the extraction spec's dedup, Pipeline v2's decision stage).

Consumes ``embedded`` (key: scope). Emits ``memory-ops`` (key: scope) and, for every fact,
its audit records on ``history``. One fact at a time per scope, in order; scopes side by
side. Per fact, in order:

1. Pipeline v2's write gates that need no store: confidence, then empty content (skipped).
2. Exact duplicate: a memory with the same normalized content (its id derives from the
   content hash) is stored or was just decided: refresh it (deduped).
3. The extraction spec's dedup: a memory of the same type within the type's distance: refresh it.
4. Pipeline v2's decision: the top 5 candidates by hybrid search (vector and Qdrant's BM25);
   none, or no LLM: ADD without asking; otherwise, with the extraction spec's contradiction candidates
   added to the question (an ADD then answers for them: the contradiction check does not ask
   the same question again, issue 18), the LLM picks ADD, UPDATE, DELETE or
   NONE, checked against the candidates (a hallucinated id drops the proposal, and the
   fact is added instead, so nothing is lost; so is a fact whose decision no provider
   could make).
5. The mode (Pipeline v2's flags) decides what is applied. Shadow (or the frozen brake):
   nothing, only the audit. Controlled: ADD and NONE; an UPDATE or DELETE is blocked and
   the fact is added beside its target (the extraction spec's contradiction check still runs on
   it). Full: UPDATE and DELETE supersede the target with the fact's memory: the old one
   is kept, hidden and linked, never hard-deleted. UPDATE and DELETE proposals go through
   the lexical contradiction detector, which flags ``review_needed`` on their record.

State: table ``decide-recent`` — per scope, the memories decided on lately, so two
duplicates arriving back to back are caught before the first reaches the store, and when
the scope was last forgotten. A ``ForgetScope`` (from the forget agent) empties the scope's
recent memories and goes on to ``memory-ops`` after every op made for earlier facts; facts
of the scope dated no later than the forget are dropped from then on. A user's forget reaches the
projects their exchanges are in through the worker's ledger of forgets (``memstream.kafka.ledger``),
whichever worker took it: a fact of theirs said before it is dropped, and the recent memories of their
exchanges said before it leave the scope's recent memories.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, delivered, expect, guarded_by_key, state_table
from memstream.identity import NormalizedContent, derived_id, exchange_memory_id, memory_id, normalize_content
from memstream.kafka.ledger import ledger_of
from memstream.llm.base import LLMError
from memstream.ports import Providers
from memstream.rules import audit, contradiction, decision, lexical
from memstream.rules.dedup import EXACT_ONLY_TYPES, cosine_distances, find_duplicate, remember, threshold
from memstream.rules.modes import REASON_EXACT_DUPLICATE, REASON_UPDATE_DELETE_NOT_ALLOWED, PipelineFlags, gate
from memstream.rules.speakers import said_before_forget, without_forgotten
from memstream.schemas import (
    MEMORY_TYPES,
    AnyMemoryOp,
    CreateMemory,
    DedupState,
    EmbeddedFact,
    Fact,
    ForgetScope,
    HistoryRecord,
    HybridHit,
    Memory,
    Provenance,
    RecentMemory,
    RefreshMemory,
    SupersedeMemory,
)
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "decide"
log = logging.getLogger(__name__)
#: How long a decided memory stays in the table: far longer than store lag.
RECENT_SECONDS = 600.0
#: Most recent memories kept per scope: enough for a busy project's store lag, and a
#: table value that stays far below Kafka's 1 MB message limit (64 × 1024-d: ~360 KiB).
RECENT_KEEP = 64
#: Stored neighbours fetched per fact for the extraction spec's dedup.
NEIGHBOURS = 5
#: Why an ADD was chosen without the LLM.
RAW_MODE_REASON = "raw mode: no model to decide"
DECISION_UNAVAILABLE = "decision unavailable (every provider failed); added"
#: Why a raw exchange's memory is refreshed with a longer text: a later snapshot of the same
#: exchange (another message of the reply, or the answer to a question stored while it waited).
REASON_EXCHANGE_EXTENDED = "exchange_extended"


def revival(existing: Memory | None, fact: Fact) -> str:
    """The note a created record carries when the fact states again a memory of the same id that was
    forgotten or superseded before it was said ("" otherwise, a replay of the old fact included):
    the store brings that memory back (``agents/store.py``)."""
    if existing is None or existing.active:
        return ""
    hidden_at = existing.superseded_at or existing.updated_at
    if fact.ts <= hidden_at:
        return ""
    how = "forgotten" if (existing.superseded_by or "").startswith(FORGOTTEN_MARK) else "superseded"
    return f"revived: stated again after it was {how}"


def fact_sources(fact: Fact) -> list[Provenance]:
    """Where a fact's text came from: the sources its snapshot named (a captured session's files and
    lines), else its session and how it arrived (``cli``, ``api``, ``mcp`` from an explicit request's
    origin; ``publish`` for a session's turns)."""
    if fact.sources:  # captured from a session file (the capture spec): its file and line
        return list(fact.sources)
    if not fact.session_id:
        how = fact.origin.split(":", 1)[0] if ":" in fact.origin else ""
        return [Provenance(source_type=how)] if how in ("cli", "api", "mcp") else []
    return [Provenance(source_type="publish", session_id=fact.session_id)]


@dataclass
class Outcome:
    """What one fact comes to: the operations for the store and the audit records."""

    ops: list[AnyMemoryOp] = field(default_factory=list)
    records: list[HistoryRecord] = field(default_factory=list)
    #: The memory the fact created or refreshed (for the recent table), if any.
    decided: str = ""
    refreshed: bool = False


class Decider:
    def __init__(self, providers: Providers) -> None:
        self.providers = providers
        settings = providers.settings
        self.flags = PipelineFlags(
            shadow_mode=settings.shadow_mode,
            allow_update_delete=settings.allow_update_delete,
            mutations_frozen=settings.mutations_frozen,
            graph_enabled=settings.graph_enabled,
        )
        profile = providers.embedder.profile
        self.profile = profile
        self.alpha = settings.decision_alpha
        self.min_score = settings.decision_min_score or profile.candidate_min_score
        self.min_confidence = settings.min_fact_confidence

    async def decide(self, embedded: EmbeddedFact, recent: list[RecentMemory]) -> Outcome:
        fact = embedded.fact
        content = normalize_content(fact.text)
        new = self._memory(fact, content, embedded.embedding_model)
        now = datetime.now(UTC)
        shadow = self.flags.mode == "shadow"

        def record(outcome: str, about: str, **fields: Any) -> HistoryRecord:
            fields.setdefault("fact_id", fact.fact_id)
            fields.setdefault("fact_text", content.storage)
            fields.setdefault("origin", fact.origin)
            fields.setdefault("confidence", fact.confidence)
            fields.setdefault("sources", fact.sources)
            return audit.record(
                outcome,  # type: ignore[arg-type]
                scope_key=fact.scope_key,
                ts=now,
                about=f"{fact.fact_id}:{about}",
                mode=self.flags.mode,
                **fields,
            )

        if not shadow:
            verdict = gate(
                "ADD",
                self.flags,
                fact_confidence=fact.confidence,
                normalized_content=content.normalized,
                min_confidence=self.min_confidence,
            )
            if verdict.outcome == "skipped":
                return Outcome(records=[record("skipped", "gate", action="ADD", reason=verdict.reason)])

        existing = await self.providers.store.get(new.id)
        duplicate = await self._duplicate(fact, content, embedded.vector, new, existing, recent)
        if duplicate is not None:
            duplicate_id, reason = duplicate
            outcome = "proposed" if shadow else "deduped"
            result = Outcome(records=[record(outcome, "dedup", action="ADD", memory_id=duplicate_id, reason=reason)])
            if not shadow:
                result.ops.append(self._refresh(fact, new, embedded, duplicate_id, reason))
                result.decided, result.refreshed = duplicate_id, True
            return result

        proposal, candidates, model, judged = await self._propose(fact, new, content, embedded.vector, recent)
        verdict = gate(
            proposal.action,
            self.flags,
            fact_confidence=fact.confidence,
            normalized_content=content.normalized,
            min_confidence=self.min_confidence,
        )
        target = candidates.get(proposal.target_id)
        review = lexical.check(content.storage, target.text) if target and proposal.action != "NONE" else None
        decided = {
            "action": proposal.action,
            "target_id": proposal.target_id,
            "confidence": proposal.confidence,
            "reason": f"{verdict.reason}: {proposal.reason}" if verdict.reason else proposal.reason,
            "model": model,
            "prompt_version": decision.PROMPT_VERSION if model else "",
            "review_needed": bool(review and review.review_needed),
        }
        if review and review.review_needed:
            decided["reason"] = f"{decided['reason']} (review: {review.reason})"
        result = Outcome()
        if verdict.outcome in ("proposed", "recorded", "skipped"):
            result.records.append(record(verdict.outcome, "decision", memory_id=proposal.target_id, **decided))
            return result
        if verdict.outcome == "blocked":
            result.records.append(record("blocked", "decision", memory_id=proposal.target_id, **decided))
            if verdict.reason != REASON_UPDATE_DELETE_NOT_ALLOWED:
                return result
            # Not destructive: the fact joins its target instead of replacing it.
            beside = f"added beside {proposal.target_id}: {REASON_UPDATE_DELETE_NOT_ALLOWED}"
            return self._create(
                fact, new, embedded, result, record("created", "create", memory_id=new.id, reason=beside)
            )
        if verdict.outcome == "created":
            revived = revival(existing, fact)
            if revived:
                decided["reason"] = f"{revived}; {decided['reason']}"
            created = record("created", "create", memory_id=new.id, **{**decided, "target_id": ""})
            # The model read the candidates and kept the fact beside them: the extraction spec's
            # contradiction check need not ask it the same question about them again.
            weighed = list(candidates) if judged and proposal.action == "ADD" else []
            return self._create(fact, new, embedded, result, created, weighed=weighed)
        # updated or deleted: the target is superseded by the fact's new memory. (The
        # target is never the fact's own memory: exact duplicates were refreshed above.)
        assert target is not None
        result.records.append(
            record(verdict.outcome, "decision", memory_id=target.id, **{**decided, "target_id": new.id})
        )
        created = record("created", "create", memory_id=new.id, **{**decided, "target_id": target.id})
        self._create(fact, new, embedded, result, created)
        result.ops.append(
            SupersedeMemory(
                op_id=derived_id(target.id, "superseded-by", new.id),
                scope_key=fact.scope_key,
                cause=f"decision:{proposal.action}",
                model=model,
                prompt_version=decision.PROMPT_VERSION if model else "",
                memory_id=target.id,
                superseded_by=new.id,
            )
        )
        return result

    # -- the steps ---------------------------------------------------------------------------

    async def _duplicate(
        self,
        fact: Fact,
        content: NormalizedContent,
        vector: list[float],
        new: Memory,
        existing: Memory | None,
        recent: list[RecentMemory],
    ) -> tuple[str, str] | None:
        """The active memory this fact duplicates and why, exactly (same id) or within distance.

        Only active memories count: one forgotten or superseded since it was decided on never
        absorbs a fact (issue 25: a fact remembered again after a forget was deduplicated onto the
        hidden memory and never became searchable). A memory decided on but not stored yet counts.
        """
        if existing is not None:
            if existing.active:
                return new.id, self._same_reason(fact, content, existing.text)
        elif (just := next((m for m in recent if m.id == new.id), None)) is not None:
            return new.id, self._same_reason(fact, content, just.text)
        if fact.exchange_id:
            # A conversation memory stored before exchanges had their own ids has its content's id.
            legacy = memory_id(fact.scope_key, content.content_hash)
            stored = await self.providers.store.get(legacy)
            if stored is not None and stored.active:
                return legacy, REASON_EXACT_DUPLICATE
        if fact.type in EXACT_ONLY_TYPES:
            return None
        neighbours = await self.providers.store.search(
            vector,
            [fact.scope_key],
            limit=NEIGHBOURS,
            types=[fact.type],
            max_distance=threshold(fact.type, self.profile),
        )
        limit = threshold(fact.type, self.profile)
        same_type = [m for m in recent if m.type == fact.type]
        close = [m for m, d in zip(same_type, cosine_distances(vector, same_type).tolist(), strict=True) if d <= limit]
        near = find_duplicate(fact.type, vector, neighbours, await self._active(close), self.profile)
        return (near.memory_id, f"duplicate (distance {near.distance:.3f})") if near is not None else None

    @staticmethod
    def _same_reason(fact: Fact, content: NormalizedContent, stored_text: str) -> str:
        """Why a fact with its memory's own id refreshes it: the same content, or the exchange went on."""
        if fact.exchange_id and normalize_content(stored_text).content_hash != content.content_hash:
            return REASON_EXCHANGE_EXTENDED
        return REASON_EXACT_DUPLICATE

    async def _active(self, recent: list[RecentMemory]) -> list[RecentMemory]:
        """The recent memories that are still active, or not stored yet (their create is in flight).

        The recent table does not hear of a memory forgotten (``POST /memories/{id}/forget`` goes
        straight to the store) or superseded since it was decided on: the store says.
        """
        kept = []
        for memory in recent:
            stored = await self.providers.store.get(memory.id)
            if stored is None or stored.active:
                kept.append(memory)
        return kept

    async def _propose(
        self, fact: Fact, new: Memory, content: NormalizedContent, vector: list[float], recent: list[RecentMemory]
    ) -> tuple[decision.Proposal, dict[str, decision.Candidate], str, bool]:
        """Pipeline v2's decision: the proposal, the candidates it was chosen among, the model, and
        whether the model's own answer is the proposal (not a fallback for a failed or dropped one)."""
        hits: list[HybridHit] = await self.providers.store.hybrid_search(
            content.storage,
            vector,
            [fact.scope_key],
            limit=decision.MAX_CANDIDATES,
            alpha=self.alpha,
            min_score=self.min_score,
            types=list(MEMORY_TYPES),
        )
        candidates: dict[str, decision.Candidate] = {hit.memory.id: hit.memory for hit in hits}
        # Memories decided on but perhaps not stored yet are candidates too, on their
        # vector alone (Pipeline v2: a single leg's score stands as it is), while they are active.
        close = [
            memory
            for memory, distance in zip(recent, cosine_distances(vector, recent).tolist(), strict=True)
            if memory.id not in candidates and 1.0 - distance >= self.min_score
        ]
        for memory in await self._active(close):
            candidates[memory.id] = memory
        candidates = dict(list(candidates.items())[: decision.MAX_CANDIDATES])
        if not candidates:
            return decision.no_candidates_proposal(fact.confidence), candidates, "", False
        llm = self.providers.llm
        if llm is None:
            raw = decision.Proposal(action="ADD", confidence=fact.confidence, reason=RAW_MODE_REASON)
            return raw, candidates, "", False
        # The model is asked anyway: the extraction spec's contradiction candidates join the question, so
        # that an ADD answers for them too and the contradiction check need not ask again.
        candidates.update(await self._contradiction_candidates(new, vector, candidates))
        try:
            completion = await llm.complete(
                decision.SYSTEM, decision.prompt(content.storage, fact.type, list(candidates.values())), max_tokens=256
            )
        except LLMError as error:
            # Every provider failed: the fact is added undecided rather than lost; the
            # extraction spec's dedup already ran, and the contradiction check still will.
            log.warning("decision on fact %s unavailable, adding it: %s", fact.fact_id, error)
            return (
                decision.Proposal(action="ADD", confidence=fact.confidence, reason=f"{DECISION_UNAVAILABLE}: {error}"),
                candidates,
                "",
                False,
            )
        proposal, warnings = decision.parse_decision(completion.text, candidates)
        for warning in warnings:
            log.warning("decision on fact %s: %s", fact.fact_id, warning)
        if proposal is None:
            dropped = "; ".join(warnings) or "no usable decision"
            proposal = decision.Proposal(
                action="ADD", confidence=fact.confidence, reason=f"decision dropped ({dropped}); added"
            )
            return proposal, candidates, completion.model, False
        return proposal, candidates, completion.model, True

    async def _contradiction_candidates(
        self, new: Memory, vector: list[float], known: dict[str, decision.Candidate]
    ) -> dict[str, decision.Candidate]:
        """The stored memories the contradiction check will put beside ``new``, not among ``known``.

        The same search as the contradiction stage's (``agents/contradiction.py``), at decision time.
        """
        if not contradiction.checks_contradictions(new):
            return {}
        nearby = await self.providers.store.search(
            vector,
            [new.scope_key],
            limit=contradiction.MAX_CANDIDATES + 1,
            max_distance=self.profile.contradiction,
            exclude_ids=[new.id],
        )
        eligible = contradiction.eligible_candidates(new, [hit.memory for hit in nearby])
        return {m.id: m for m in eligible if m.id not in known}

    def _memory(self, fact: Fact, content: NormalizedContent, embedding_model: str) -> Memory:
        return Memory(
            id=(
                exchange_memory_id(fact.scope_key, fact.exchange_id)
                if fact.exchange_id
                else memory_id(fact.scope_key, content.content_hash)
            ),
            text=content.storage,
            type=fact.type,
            scope=fact.scope,
            scope_key=fact.scope_key,
            source_chunk=fact.source_chunk,
            created_at=fact.ts,
            updated_at=fact.ts,
            content_hash=content.content_hash,
            embedding_model=embedding_model,
            session_id=fact.session_id,
            project=fact.project,
            sources=fact_sources(fact),
            speaker=fact.speaker,
        )

    def _refresh(self, fact: Fact, new: Memory, embedded: EmbeddedFact, target: str, reason: str) -> RefreshMemory:
        return RefreshMemory(
            op_id=derived_id(fact.fact_id, "refresh"),
            scope_key=fact.scope_key,
            cause=reason,
            memory_id=target,
            memory=new,
            vector=embedded.vector,
            entities=fact.entities,
        )

    def _create(
        self,
        fact: Fact,
        new: Memory,
        embedded: EmbeddedFact,
        result: Outcome,
        created: HistoryRecord,
        *,
        weighed: list[str] | None = None,
    ) -> Outcome:
        result.records.append(created)
        result.ops.insert(
            0,
            CreateMemory(
                op_id=derived_id(fact.fact_id, "create"),
                scope_key=fact.scope_key,
                cause=f"extracted from {fact.origin}" if fact.origin else "extracted",
                model=created.model,
                prompt_version=created.prompt_version,
                memory=new,
                vector=embedded.vector,
                entities=fact.entities,
                weighed=weighed or [],
            ),
        )
        result.decided = new.id
        return result


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    recent_table = state_table(app, "decide-recent", providers.settings.partitions)
    decider = Decider(providers)
    # Every forget, whichever worker took it: a user's forget comes keyed by the user, their
    # exchanges keyed by their projects, on partitions other workers may own.
    ledger = ledger_of(app)

    async def handle(value: Any, event: EventT) -> None:
        if isinstance(value, ForgetScope):
            ledger.record(value)
            current: DedupState = recent_table.get(value.scope_key) or DedupState()
            if current.forgotten_at is None or value.forgotten_at > current.forgotten_at:
                recent_table[value.scope_key] = DedupState(forgotten_at=value.forgotten_at)
            await topics.memory_ops.send(key=value.scope_key.encode(), value=value)
            return
        embedded = expect(value, EmbeddedFact)
        fact = embedded.fact
        state: DedupState = recent_table.get(fact.scope_key) or DedupState()
        if state.forgotten_at is not None and fact.ts <= state.forgotten_at:
            return  # the scope was forgotten after this fact was said: it stays forgotten
        if fact.speaker and said_before_forget(fact.ts, ledger.latest(fact.speaker)):
            return  # so was its speaker
        # A forgotten speaker's exchanges leave the scope's recent memories (and its table value, below).
        recent = without_forgotten(state.recent, ledger.latest)
        with stage_span("memstream.decide", type=fact.type, mode=decider.flags.mode) as span:
            outcome = await decider.decide(embedded, recent)
            span.set_attribute("decide.outcomes", ",".join(r.outcome for r in outcome.records))
            key = fact.scope_key.encode()
            sent = [await topics.memory_ops.send(key=key, value=op) for op in outcome.ops]
            sent += [await topics.history.send(key=key, value=entry) for entry in outcome.records]
            if outcome.decided:
                # A memory in the recent table is refreshed, not created, when its fact comes again:
                # it goes there only once its create is on the broker.
                await delivered(sent)
        if not outcome.decided:
            if len(recent) < len(state.recent):
                recent_table[fact.scope_key] = msgspec.structs.replace(state, recent=recent)
            return
        decided = RecentMemory.of(
            id=outcome.decided,
            type=fact.type,
            text=normalize_content(fact.text).storage,
            vector=embedded.vector,
            decided_at=time.time(),
            speaker=fact.speaker,
            said_at=fact.ts,
        )
        recent_table[fact.scope_key] = DedupState(
            recent=remember(recent, decided, now=decided.decided_at, keep_seconds=RECENT_SECONDS, keep=RECENT_KEEP),
            created=state.created + (not outcome.refreshed),
            refreshed=state.refreshed + outcome.refreshed,
            forgotten_at=state.forgotten_at,
        )

    @app.agent(topics.embedded, name=STAGE)
    async def decide(stream: faust.StreamT) -> None:
        # Projects wait on the LLM side by side; one project's facts stay in order.
        await guarded_by_key(stream, STAGE, sink, handle, limit=providers.settings.llm_concurrency)

    return decide

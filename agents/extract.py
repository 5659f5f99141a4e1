"""Extract agent: typed facts from a snapshot, by the LLM provider chain (or raw mode).

Consumes ``snapshots`` (key: session key, memstream.identity.session_key). Emits ``facts`` (key: scope — the project, or
the user for personal preferences), with confidence and entity triples; and ``parked``
(key: session key) when every provider failed: the snapshot waits there for a retry (Pipeline
v2's backoff: 1 s doubling to 30 s plus jitter, then steady at the cap) and is
dead-lettered with its reason only once it has been failing for ``MEMSTREAM_RETRY_BUDGET``
(6 h). The parked topic holds it, so a restart loses none. A local model is one slow resource: while
it is busy and a call already waits its turn, a snapshot is parked too (not as a failure: its attempts
and retry budget stay as they were) and comes back after the backoff cap, so turns queue on the parked
topic instead of piling up in memory, and the model never idles while they wait. State:
table ``extract-sessions`` — per session key, the snapshots already extracted (bounded), so a
redelivery is not extracted twice while a parked one still is. (States kept under a bare session
id before keys named the tenant are left as they are: a snapshot redelivered across that upgrade
may be extracted again, into the same memory ids.)
"""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, delivered, expect, guarded_by_key, state_table
from memstream.identity import derived_id, normalize_content, session_key
from memstream.llm.base import LLMError, is_busy, waiting_calls
from memstream.ports import Providers
from memstream.rules import audit
from memstream.rules.citations import fact_sources
from memstream.rules.explicit import guess_type
from memstream.rules.extraction import (
    PROMPT_VERSION,
    ExtractedFact,
    ParseResult,
    answer_max_tokens,
    answer_schema,
    extraction_prompt,
    parse_facts,
    raw_facts,
    system_prompt,
)
from memstream.rules.modes import REASON_LOW_CONFIDENCE
from memstream.rules.secrets import redact
from memstream.schemas import (
    Entity,
    ExtractState,
    Fact,
    HistoryRecord,
    ParkedSnapshot,
    Provenance,
    Scope,
    Snapshot,
)
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "extract"
log = logging.getLogger(__name__)
#: Snapshot ids remembered per session: enough to recognise any redelivery.
DONE_KEEP = 64
#: The parked reason of a snapshot that waits for a busy local model (not a failure).
BUSY_REASON = "waiting for the local model"


def explicit_facts(snapshot: Snapshot) -> list[ExtractedFact]:
    facts = []
    for text in snapshot.explicit:
        kind, scope = guess_type(text)
        facts.append(ExtractedFact(text=text, type=kind, scope=scope, confidence=1.0))
    return facts


def park_delay(attempt: int, base: float, cap: float) -> float:
    """Pipeline v2's worker backoff: doubling from the base up to the cap, plus up to 0.5 s jitter."""
    return min(cap, base * 2 ** max(0, attempt - 1)) + random.uniform(0, 0.5)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    sessions = state_table(app, "extract-sessions", settings.partitions)

    def stored_raw(snapshot: Snapshot) -> bool:
        """Is the snapshot's exchange stored as it was said (raw mode), not given to a model?"""
        return snapshot.mode == "raw" or providers.llm is None

    async def infer(snapshot: Snapshot) -> ParseResult:
        """The LLM's facts for a snapshot; raises LLMError when every provider failed."""
        llm = providers.llm
        if snapshot.mode == "raw" or llm is None:  # stored_raw(snapshot)
            # A preference also asked to be remembered ("remember that I…") is an explicit fact already.
            explicit = {normalize_content(text).content_hash for text in snapshot.explicit}
            facts = [
                f
                for f in raw_facts(snapshot.exchange)
                if f.type == "conversation" or normalize_content(f.text).content_hash not in explicit
            ]
            return ParseResult(facts, [])
        with stage_span("memstream.llm", mode=snapshot.mode, prompt_version=PROMPT_VERSION) as span:
            completion = await llm.complete(
                system_prompt(snapshot.mode),
                extraction_prompt(snapshot.text, snapshot.mode),
                max_tokens=answer_max_tokens(snapshot.mode),
                schema=answer_schema(snapshot.mode),
            )
            span.set_attribute("llm.provider", completion.provider)
            span.set_attribute("llm.model", completion.model)
            span.set_attribute("llm.input_tokens", completion.input_tokens)
            span.set_attribute("llm.output_tokens", completion.output_tokens)
        result = parse_facts(completion.text)
        if snapshot.mode == "summary":
            summaries = [msgspec.structs.replace(f, type="session-summary", scope="project") for f in result.facts[:1]]
            return ParseResult(summaries, result.warnings, result.entities)
        return result

    async def park(snapshot: Snapshot, error: LLMError, event: EventT) -> None:
        attempt = snapshot.attempt + 1
        now = datetime.now(UTC)
        # A snapshot re-driven from the dead letters keeps its first failure: if its provider
        # still fails, it goes straight back with one attempt more (memstream redrive).
        since = snapshot.parked_since or now
        failing = (now - since).total_seconds()
        if failing >= settings.retry_budget or not error.retryable:
            why = "not retryable" if not error.retryable else f"for {failing:.0f}s, {attempt} attempts"
            await sink.dead_letter(STAGE, f"extraction failed ({why}); last: {error}", event.message)
            return
        delay = park_delay(attempt, settings.park_delay, settings.park_delay_max)
        log.warning("parking snapshot %s (attempt %d) for %.1fs: %s", snapshot.snapshot_id, attempt, delay, error)
        await topics.parked.send(
            key=session_key(snapshot.session_id, snapshot.project_key, snapshot.user_key).encode(),
            value=ParkedSnapshot(
                snapshot=msgspec.structs.replace(snapshot, attempt=attempt, parked_since=since),
                not_before=now + timedelta(seconds=delay),
                reason=str(error)[:1000],
            ),
        )

    def queue_full() -> bool:
        """The LLM is a local model with every slot taken and a call waiting for each: one more would
        only wait in memory, where a restart loses its place and nothing shows the queue."""
        llm = providers.llm
        return llm is not None and is_busy(llm) and waiting_calls(llm) >= settings.local_llm_concurrency

    async def wait_parked(snapshot: Snapshot) -> None:
        # Unchanged: waiting for a busy model is no failure, so no attempt or retry budget is spent.
        delay = settings.park_delay_max + random.uniform(0, 0.5)
        log.info("local model busy: snapshot %s waits %.0fs on the parked topic", snapshot.snapshot_id, delay)
        await topics.parked.send(
            key=session_key(snapshot.session_id, snapshot.project_key, snapshot.user_key).encode(),
            value=ParkedSnapshot(
                snapshot=snapshot,
                not_before=datetime.now(UTC) + timedelta(seconds=delay),
                reason=f"{BUSY_REASON} ({getattr(providers.llm, 'model', '?')} is busy)",
            ),
        )

    async def handle(value: Any, event: EventT) -> None:
        snapshot = expect(value, Snapshot)
        skey = session_key(snapshot.session_id, snapshot.project_key, snapshot.user_key)
        state: ExtractState = sessions.get(skey) or ExtractState()
        if snapshot.snapshot_id in state.done:
            return  # redelivered: extracted already
        # Checked and the call begun with no await between: no other snapshot slips in.
        if snapshot.mode != "raw" and queue_full():
            await wait_parked(snapshot)
            return
        with stage_span("memstream.extract", mode=snapshot.mode, attempt=snapshot.attempt) as span:
            try:
                result = await infer(snapshot)
            except LLMError as error:
                span.set_attribute("extract.outcome", "parked")
                await park(snapshot, error, event)
                sessions[skey] = msgspec.structs.replace(state, parked=state.parked + 1)
                return
            for warning in result.warnings:
                log.warning("extraction of %s: %s", snapshot.snapshot_id, warning)
            gate = settings.min_fact_confidence
            kept = [f for f in result.facts if f.confidence >= gate]
            facts = explicit_facts(snapshot) + kept
            entities = [_redacted_entity(e) for e in result.entities]
            span.set_attribute("extract.facts", len(facts))
            span.set_attribute("extract.gated", len(result.facts) - len(kept))
            ownerless = 0
            raw = stored_raw(snapshot)
            sent = []
            for i, fact in enumerate(facts):
                scope = fact_scope(snapshot, fact)
                if scope is None:
                    ownerless += 1
                    continue
                fact_event = _fact(snapshot, fact, scope, i, entities, raw=raw)
                sent.append(await topics.facts.send(key=scope[1].encode(), value=fact_event))
            span.set_attribute("extract.ownerless", ownerless)
            # Pipeline v2's first write gate, audited: a fact below it never travels further.
            for i, fact in enumerate(f for f in result.facts if f.confidence < gate):
                scope = fact_scope(snapshot, fact)
                if scope is not None:
                    record = _gated(snapshot, fact, scope[1], i)
                    sent.append(await topics.history.send(key=scope[1].encode(), value=record))
            # Done only once its facts are on the broker: a redelivery of a done snapshot is skipped.
            await delivered(sent)
        sessions[skey] = ExtractState(
            done=[*state.done, snapshot.snapshot_id][-DONE_KEEP:],
            facts=state.facts + len(facts),
            warnings=state.warnings + len(result.warnings),
            gated=state.gated + len(result.facts) - len(kept),
            parked=state.parked,
        )

    @app.agent(topics.snapshots, name=STAGE)
    async def extract_agent(stream: faust.StreamT) -> None:
        # Sessions wait on the LLM side by side; each session's snapshots stay in order.
        await guarded_by_key(stream, STAGE, sink, handle, limit=settings.llm_concurrency)

    return extract_agent


def fact_scope(snapshot: Snapshot, fact: ExtractedFact) -> tuple[Scope, str] | None:
    """Where a fact is stored: (scope, scope key), or None to drop it.

    A personal fact (a preference) of a turn that names no user is dropped, not kept in the
    project: there it would show one person's taste to every member as the project's
    convention, and there is no owner to keep it for, correct it or forget it. The project
    facts of the same turn are kept, and so is a raw exchange, which is always the project's
    conversation (issue 25.4). (Every turn through the CLI carries its token's user, so a
    one-person install loses nothing.)
    """
    if fact.scope == "user":
        return ("user", snapshot.user_key) if snapshot.user_key else None
    return "project", snapshot.project_key


def conversation_speaker(snapshot: Snapshot, fact: ExtractedFact, scope: tuple[Scope, str]) -> str:
    """Whose a project memory of the conversation is: the speaker's user key for the exchange (and for
    whatever a model calls a conversation), so other members do not read it; "" for a project fact,
    which stays shared. A turn that names no user has no one to keep it for: it stays the project's."""
    return snapshot.user_key if fact.type == "conversation" and scope[0] == "project" else ""


def spoken(snapshot: Snapshot, sources: list[Provenance]) -> list[Provenance]:
    """The fact's sources, each naming whose turns it is (a user's forget finds the facts drawn from
    their turns by it); a session's turns with no file still name their session and speaker."""
    if not snapshot.user_key:
        return sources
    if not sources and snapshot.session_id:
        sources = [Provenance(source_type="publish", session_id=snapshot.session_id)]
    return [msgspec.structs.replace(source, speaker=snapshot.user_key) for source in sources]


def _fact(
    snapshot: Snapshot,
    fact: ExtractedFact,
    scope: tuple[Scope, str],
    index: int,
    entities: list[Entity],
    *,
    raw: bool = False,
) -> Fact:
    """The fact event; ``raw``: the snapshot's exchange was stored as it was said (raw mode), so its
    conversation memory is the exchange's own and keeps one id as the exchange goes on."""
    return Fact(
        fact_id=derived_id(snapshot.snapshot_id, str(index)),
        text=redact(fact.text),
        type=fact.type,  # type: ignore[arg-type]
        scope=scope[0],
        scope_key=scope[1],
        project=snapshot.project,
        session_id=snapshot.session_id,
        source_chunk=snapshot.text,
        origin=snapshot.snapshot_id,
        confidence=fact.confidence,
        entities=entities,
        # A fact keeps the exchange's citations it names; the exchange itself (raw mode) keeps them all.
        sources=spoken(snapshot, fact_sources(snapshot.sources, fact.text, raw=raw and fact.type == "conversation")),
        # The exchange itself (raw mode) keeps one memory as it goes on; facts drawn from it, and
        # whatever a model calls a conversation, do not.
        exchange_id=snapshot.exchange_id if raw and fact.type == "conversation" else "",
        speaker=conversation_speaker(snapshot, fact, scope),
        ts=snapshot.ts,
    )


def _gated(snapshot: Snapshot, fact: ExtractedFact, scope_key: str, index: int) -> HistoryRecord:
    return audit.record(
        "skipped",
        scope_key=scope_key,
        # The time of what was said, as the facts carry it: a forget of the scope drops the
        # gated records of turns said before it, even when they are extracted after it.
        ts=snapshot.ts,
        about=f"{snapshot.snapshot_id}:gated:{index}",
        action="ADD",
        fact_text=redact(fact.text),
        confidence=fact.confidence,
        reason=REASON_LOW_CONFIDENCE,
        origin=snapshot.snapshot_id,
    )


def _redacted_entity(entity: Entity) -> Entity:
    return Entity(
        source=redact(entity.source),
        relationship=redact(entity.relationship),
        target=redact(entity.target),
        confidence=entity.confidence,
    )

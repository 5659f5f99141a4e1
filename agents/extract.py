"""Extract agent: typed facts from a snapshot, by the LLM (or raw mode without one).

Consumes ``snapshots`` (key: session id). Emits ``facts`` (key: scope — the project, or
the user for personal preferences). State: table ``extract-sessions`` — per session, the
last turn extracted in each mode, so a redelivered snapshot is not extracted twice.
An LLM failure dead-letters the snapshot with its reason: delayed, never silently dropped.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
from faust.types import EventT

from agents.base import DeadLetters, expect, guarded, state_table
from memstream.bootstrap import Providers
from memstream.identity import derived_id
from memstream.rules.extraction import (
    PROMPT_VERSION,
    ExtractedFact,
    extraction_prompt,
    parse_facts,
    raw_fact,
    system_prompt,
)
from memstream.tracing import stage_span
from schemas import ExtractState, Fact, Snapshot
from topics.binding import Topics

STAGE = "extract"
log = logging.getLogger(__name__)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    sessions = state_table(app, "extract-sessions", providers.settings.partitions)

    async def extract(snapshot: Snapshot) -> tuple[list[ExtractedFact], int]:
        if snapshot.mode == "raw" or providers.llm is None:
            fact = raw_fact(snapshot.exchange)
            return ([fact] if fact else []), 0
        with stage_span("memstream.llm", mode=snapshot.mode, prompt_version=PROMPT_VERSION) as span:
            completion = await providers.llm.complete(
                system_prompt(snapshot.mode), extraction_prompt(snapshot.text), max_tokens=2048
            )
            span.set_attribute("llm.provider", completion.provider)
            span.set_attribute("llm.model", completion.model)
            span.set_attribute("llm.input_tokens", completion.input_tokens)
            span.set_attribute("llm.output_tokens", completion.output_tokens)
        result = parse_facts(completion.text)
        for warning in result.warnings:
            log.warning("extraction warning for %s turn %d: %s", snapshot.session_id, snapshot.turn_index, warning)
        facts = result.facts
        if snapshot.mode == "summary":
            facts = [ExtractedFact(text=f.text, type="session-summary", scope="project") for f in facts[:1]]
        return facts, len(result.warnings)

    async def handle(value: Any, event: EventT) -> None:
        snapshot = expect(value, Snapshot)
        state: ExtractState = sessions.get(snapshot.session_id) or ExtractState()
        if state.last_turn.get(snapshot.mode, 0) >= snapshot.turn_index:
            return  # redelivered: extracted already
        with stage_span("memstream.extract", mode=snapshot.mode, session=snapshot.session_id):
            facts, warnings = await extract(snapshot)
            for i, fact in enumerate(facts):
                user_scoped = fact.scope == "user" and bool(snapshot.user_key)
                scope_key = snapshot.user_key if user_scoped else snapshot.project_key
                await topics.facts.send(
                    key=scope_key.encode(),
                    value=Fact(
                        fact_id=derived_id(snapshot.snapshot_id, str(i)),
                        text=fact.text,
                        type=fact.type,  # type: ignore[arg-type]
                        scope="user" if user_scoped else "project",
                        scope_key=scope_key,
                        project=snapshot.project,
                        session_id=snapshot.session_id,
                        source_chunk=snapshot.text,
                        origin=snapshot.snapshot_id,
                        ts=snapshot.ts,
                    ),
                )
        sessions[snapshot.session_id] = ExtractState(
            last_turn={**state.last_turn, snapshot.mode: snapshot.turn_index},
            facts=state.facts + len(facts),
            warnings=state.warnings + warnings,
        )

    @app.agent(topics.snapshots, name=STAGE)
    async def extract_agent(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return extract_agent


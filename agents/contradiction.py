"""Contradiction agent: does a new memory supersede nearby ones? (the extraction and memory specs)

Consumes ``memory-updated`` (key: scope). Emits ``memory-ops`` (SupersedeMemory): the
superseded memories stay stored, linked to their successor, and leave search and the
[MEMORY] block. Session summaries and conversation memories are skipped, and so is
everything in raw mode (no LLM to ask). Candidates are the stored memories within the
profile's contradiction distance that, for a profile calibrated for it, also reach the
decision's hybrid score; none the decision stage already weighed (``weighed``): then no
call is made (issue 18). State: table ``contradiction-state`` — per scope,
the memories already checked with the LLM (bounded), so a redelivery asks it nothing twice.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded_by_key, state_table
from memstream.identity import derived_id
from memstream.ports import Providers
from memstream.rules import contradiction as rules
from memstream.schemas import ContradictionState, Memory, MemoryUpdated, SupersedeMemory
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "contradiction"
log = logging.getLogger(__name__)
#: Checked memory ids remembered per scope.
CHECKED_KEEP = 512


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    states = state_table(app, "contradiction-state", providers.settings.partitions)
    profile = providers.embedder.profile
    settings = providers.settings
    # A profile calibrated for the decision's hybrid score gates the check the same way: "near"
    # is the calibrated score, which every measured contradiction reaches (embed/bundled.py).
    gate = settings.decision_min_score or profile.decision_min_score

    async def near_enough(memory: Memory, vector: list[float], candidates: list[Memory]) -> list[Memory]:
        """The candidates that also pass the calibrated hybrid gate; all of them when there is none."""
        if not candidates or not gate:
            return candidates
        hits = await providers.store.hybrid_search(
            memory.text,
            vector,
            [memory.scope_key],
            limit=rules.MAX_CANDIDATES * 2,
            alpha=settings.decision_alpha,
            min_score=gate,
            exclude_ids=[memory.id],
        )
        passing = {hit.memory.id for hit in hits}
        return [m for m in candidates if m.id in passing]

    async def handle(value: Any, event: EventT) -> None:
        update = expect(value, MemoryUpdated)
        memory = update.memory
        llm = providers.llm
        if update.change != "created" or llm is None or not rules.checks_contradictions(memory):
            return
        state: ContradictionState = states.get(memory.scope_key) or ContradictionState()
        # A memory stated again after it was superseded is checked again; a redelivery is not.
        checked = f"{memory.id}@{memory.updated_at.isoformat()}"
        if checked in state.checked:
            return
        with stage_span("memstream.contradiction", type=memory.type) as span:
            vector = await providers.store.vector(memory.id)
            superseded: list[str] = []
            model = ""
            if vector is not None:
                nearby = await providers.store.search(
                    vector,
                    [memory.scope_key],
                    limit=rules.MAX_CANDIDATES + 1,
                    max_distance=profile.contradiction,
                    exclude_ids=[memory.id],
                )
                candidates = await near_enough(
                    memory, vector, rules.eligible_candidates(memory, [hit.memory for hit in nearby])
                )
                span.set_attribute("contradiction.candidates", len(candidates))
                # Folded into the decision when it already weighed every candidate: no call.
                if rules.unweighed(candidates, update.weighed):
                    completion = await llm.complete(rules.SYSTEM, rules.prompt(memory, candidates), max_tokens=512)
                    model = completion.model
                    superseded, warnings = rules.parse_superseded(completion.text, candidates)
                    for warning in warnings:
                        log.warning("contradiction check of %s: %s", memory.id, warning)
            for old_id in superseded:
                await topics.memory_ops.send(
                    key=memory.scope_key.encode(),
                    value=SupersedeMemory(
                        op_id=derived_id(old_id, "superseded-by", memory.id),
                        scope_key=memory.scope_key,
                        cause="contradiction",
                        model=model,
                        prompt_version=rules.PROMPT_VERSION,
                        memory_id=old_id,
                        superseded_by=memory.id,
                    ),
                )
            span.set_attribute("contradiction.superseded", len(superseded))
        if not model:
            # Nothing was asked, so a redelivery costs no call either: no changelog record (issue 18,
            # fewer records per turn; most memories have no candidate left to ask about).
            return
        states[memory.scope_key] = ContradictionState(
            checked=[*state.checked, checked][-CHECKED_KEEP:], superseded=state.superseded + len(superseded)
        )

    @app.agent(topics.memory_updated, name=STAGE)
    async def contradiction(stream: faust.StreamT) -> None:
        # Projects wait on the LLM side by side; one project's checks stay in order.
        await guarded_by_key(stream, STAGE, sink, handle, limit=providers.settings.llm_concurrency)

    return contradiction

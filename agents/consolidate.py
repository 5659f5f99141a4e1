"""Consolidate agent: Phase 2 of the consolidation spec, one global run at a time.

Consumes ``consolidation``, the topic with exactly one partition: only the one worker that
owns it runs Phase 2, and when that worker dies the group hands the partition, and the
unfinished run, to another. Its events:

- ``RolloutOutput`` (Phase 1) and ``MemoryUsage`` (search and block) are recorded, per
  rollout, in table ``phase2-inputs``, with the offset each output arrived at.
- ``ConsolidationRequest`` (debounced after Phase 1 output, and on a schedule) runs Phase
  2 when new input arrived since the last success (dirty); a clean request is a no-op.
- ``ForgetScope`` (from the forget agent) drops a forgotten project's inputs, its place in
  the last selection and its workspace; its Phase 1 outputs of sessions active before the
  forget are not taken in again.

A run selects the outputs (usage, then recency, top N, unused ones ignored), labels them
added / retained / removed against the last successful selection, syncs the workspace
under ``<data dir>/memories`` (keeping removed evidence while the model forgets it), asks
the model for each changed project's consolidated summary, and sends that summary to the
store as the project's ``consolidated`` memory (one fixed id per project). Then it records
the new selection and the watermark in table ``phase2-state``.

The request is acked, and so its offset committed, only after the run succeeds; a failed
run is retried with a doubling backoff, and a worker that dies mid-run leaves the request
to the next owner, which redoes the run: workspace files are rewritten whole and the
summary memory keeps its id, so nothing is duplicated.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
from faust.types import EventT
from opentelemetry import trace

from memstream.agents.base import DeadLetters, finished, in_order, state_table
from memstream.identity import derived_id, normalize_content
from memstream.ports import Providers
from memstream.rules import phase2
from memstream.schemas import (
    CONSOLIDATED,
    ConsolidationRequest,
    CreateMemory,
    ForgetScope,
    Memory,
    MemoryUsage,
    Phase2Input,
    Phase2State,
    RolloutOutput,
)
from memstream.store import artifacts
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "consolidate"
log = logging.getLogger(__name__)
#: The one key of ``phase2-state``.
GLOBAL = "global"


def consolidated_memory_id(scope_key: str) -> str:
    """The id of a project's consolidated memory: one per project, replaced by every run."""
    return derived_id(scope_key, CONSOLIDATED)


class Consolidator:
    """One Phase 2 run over the recorded inputs; the agent below decides when."""

    def __init__(self, providers: Providers, topics: Topics, inputs: faust.Table, states: faust.Table) -> None:
        self.providers = providers
        self.settings = providers.settings
        self.topics = topics
        self.inputs = inputs
        self.states = states

    # -- recording -----------------------------------------------------------------------

    def record_output(self, output: RolloutOutput, offset: int) -> None:
        forgotten_at = self.state().forgotten.get(output.scope_key)
        if forgotten_at is not None and output.source_updated_at <= forgotten_at:
            return  # a session of a project forgotten since: it stays forgotten
        current: Phase2Input = self.inputs.get(output.rollout_id) or Phase2Input()
        if current.offset >= offset:
            return  # a redelivery of an output already recorded
        self.inputs[output.rollout_id] = msgspec.structs.replace(current, output=output, offset=offset)

    def record_usage(self, usage: MemoryUsage) -> None:
        for rollout_id in dict.fromkeys(usage.rollout_ids):
            current: Phase2Input = self.inputs.get(rollout_id) or Phase2Input()
            last = usage.ts if current.last_usage is None else max(current.last_usage, usage.ts)
            self.inputs[rollout_id] = msgspec.structs.replace(
                current, usage_count=current.usage_count + 1, last_usage=last
            )

    def forget(self, op: ForgetScope) -> list[str]:
        """A forgotten project leaves Phase 2: its inputs, its place in the last selection and
        its workspace go; returns the rollouts dropped. (Its consolidated memory is deleted by
        the store agent, with the scope's other memories.)"""
        gone = [
            rollout
            for rollout, item in list(self.inputs.items())
            if item is not None and item.output is not None and item.output.scope_key == op.scope_key
        ]
        for rollout in gone:
            del self.inputs[rollout]
        state = self.state()
        previous = state.forgotten.get(op.scope_key)
        when = op.forgotten_at if previous is None else max(previous, op.forgotten_at)
        selected = [s for s in state.selected if s.rollout_id not in gone]
        self.states[GLOBAL] = msgspec.structs.replace(
            state, selected=selected, forgotten={**state.forgotten, op.scope_key: when}
        )
        data_dir = self.settings.data_dir
        shutil.rmtree(artifacts.project_dir(data_dir, op.scope_key), ignore_errors=True)
        known = self.known()
        artifacts.sync(
            artifacts.global_dir(data_dir),
            [known[s.rollout_id].output for s in selected if s.rollout_id in known],  # type: ignore[misc]
        )
        return gone

    # -- running -------------------------------------------------------------------------

    def state(self) -> Phase2State:
        return self.states.get(GLOBAL) or Phase2State()

    def known(self) -> dict[str, Phase2Input]:
        return {rollout: item for rollout, item in self.inputs.items() if item is not None and item.output is not None}

    async def run(self, request: ConsolidationRequest) -> str:
        """One Phase 2 run; returns ``clean`` (nothing new) or ``succeeded``; raises on failure."""
        state = self.state()
        known = self.known()
        if not phase2.is_dirty(known.values(), state.watermark):
            return "clean"
        now = datetime.now(UTC)
        with stage_span("memstream.phase2", reason=request.reason, inputs=len(known)) as span:
            selection = phase2.select(
                known.values(),
                now,
                max_unused_days=self.settings.consolidation_max_unused_days,
                top_n=self.settings.consolidation_top_n,
            )
            diff = phase2.diff(selection, state.selected, known)
            span.set_attribute("phase2.added", len(diff.added))
            span.set_attribute("phase2.retained", len(diff.retained))
            span.set_attribute("phase2.removed", len(diff.removed))
            outputs = {rollout: item.output for rollout, item in known.items() if item.output is not None}
            selected = [outputs[r] for r in (*diff.added, *diff.retained)]
            evidence = selected + [outputs[r] for r in diff.removed]
            # Removed rollouts stay on disk while the model forgets them (the consolidation spec).
            self._sync(evidence)
            for scope_key, scope_diff in _per_scope(diff, outputs).items():
                if scope_diff.changed:
                    await self._consolidate(scope_key, scope_diff, outputs, now)
            self._sync(selected)
            watermark = phase2.completion_watermark(state.watermark, known.values())
            self.states[GLOBAL] = msgspec.structs.replace(
                state,
                watermark=watermark,
                selected=phase2.baseline(selection),
                last_success_at=now,
                runs=state.runs + 1,
                failures=0,
            )
            log.info(
                "Phase 2 run %d: %d selected (%d added, %d removed), watermark %d",
                state.runs + 1,
                len(selection),
                len(diff.added),
                len(diff.removed),
                watermark,
            )
        return "succeeded"

    def _sync(self, outputs: list[RolloutOutput]) -> None:
        data_dir = self.settings.data_dir
        artifacts.sync(artifacts.global_dir(data_dir), outputs)
        by_scope: dict[str, list[RolloutOutput]] = defaultdict(list)
        for output in outputs:
            by_scope[output.scope_key].append(output)
        projects = artifacts.root(data_dir) / "projects"
        known_scopes = {p.name for p in projects.iterdir()} if projects.exists() else set()
        for scope_key in known_scopes | set(by_scope):
            artifacts.sync(artifacts.project_dir(data_dir, scope_key), by_scope.get(scope_key, []))

    async def _consolidate(
        self, scope_key: str, diff: phase2.Diff, outputs: dict[str, RolloutOutput], now: datetime
    ) -> None:
        llm = self.providers.llm
        if llm is None:
            return  # raw mode: the workspace is synced, there is no model to consolidate it
        memory_id = consolidated_memory_id(scope_key)
        previous = await self.providers.store.get(memory_id)
        project = next((outputs[r].project for r in (*diff.added, *diff.retained, *diff.removed)), "")
        with stage_span("memstream.phase2.consolidate", scope=scope_key):
            completion = await llm.complete(
                phase2.SYSTEM,
                phase2.prompt(project or scope_key, previous.text if previous else "", diff, outputs),
                max_tokens=2048,
            )
            summary = phase2.parse_summary(completion.text)
        artifacts.write_consolidated(artifacts.project_dir(self.settings.data_dir, scope_key), summary)
        if not diff.added and not diff.retained:
            return  # every rollout of the project was removed: the workspace says so, the block keeps its last summary
        content = normalize_content(summary)
        vector = (await self.providers.embedder.embed_documents([content.storage]))[0]
        memory = Memory(
            id=memory_id,
            text=content.storage,
            type=CONSOLIDATED,
            scope="project",
            scope_key=scope_key,
            source_chunk=f"Phase 2 over {len(diff.added) + len(diff.retained)} sessions",
            created_at=now,
            updated_at=now,
            content_hash=content.content_hash,
            embedding_model=self.providers.embedder.model,
            project=project,
        )
        await self.topics.memory_ops.send(
            key=scope_key.encode(),
            value=CreateMemory(
                op_id=derived_id(memory_id, content.content_hash),
                scope_key=scope_key,
                cause=f"consolidation ({completion.model}, {phase2.PROMPT_VERSION})",
                memory=memory,
                vector=list(vector),
            ),
        )

    async def run_until_done(self, request: ConsolidationRequest) -> str:
        """Run, retrying a failed run after a doubling backoff until it succeeds."""
        failures = 0
        while True:
            try:
                outcome = await self.run(request)
                metrics.EVENTS_PROCESSED.labels(STAGE).inc()
                return outcome
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                metrics.EVENTS_FAILED.labels(STAGE).inc()
                delay = min(
                    self.settings.consolidation_retry_delay_max,
                    self.settings.consolidation_retry_delay * 2 ** (failures - 1),
                )
                state = self.state()
                self.states[GLOBAL] = msgspec.structs.replace(state, failures=state.failures + 1)
                log.warning("Phase 2 run failed (attempt %d), retrying in %.1fs: %s", failures, delay, exc)
                await asyncio.sleep(delay)


def _per_scope(diff: phase2.Diff, outputs: dict[str, RolloutOutput]) -> dict[str, phase2.Diff]:
    """The diff split by project."""
    parts: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"added": [], "retained": [], "removed": []})
    for label in ("added", "retained", "removed"):
        for rollout in getattr(diff, label):
            parts[outputs[rollout].scope_key][label].append(rollout)
    return {scope: phase2.Diff(**labels) for scope, labels in parts.items()}


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    # One partition, like the topic they are co-partitioned with.
    inputs = state_table(app, "phase2-inputs", 1)
    states = state_table(app, "phase2-state", 1)
    consolidator = Consolidator(providers, topics, inputs, states)

    async def handle(event: EventT) -> None:
        value: Any = event.value
        if isinstance(value, RolloutOutput):
            consolidator.record_output(value, event.message.offset)
        elif isinstance(value, MemoryUsage):
            consolidator.record_usage(value)
        elif isinstance(value, ConsolidationRequest):
            await consolidator.run_until_done(value)
        elif isinstance(value, ForgetScope):
            consolidator.forget(value)
        else:
            await sink.dead_letter(STAGE, f"TypeError: unexpected {type(value).__name__}", event.message)

    @app.agent(topics.consolidation, name=STAGE)
    async def consolidate(stream: faust.StreamT) -> None:
        # Acked by hand: a request only once its run succeeded, so a worker dying mid-run
        # leaves it uncommitted for the next owner of the partition. (Faust's StreamT declares no
        # noack(), which its Stream, what an agent is given, has.)
        async for event in in_order(stream.noack().events(), STAGE, ack_passed=True):  # type: ignore[attr-defined]
            process_span = trace.get_current_span()
            try:
                await handle(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("%s failed", STAGE, exc_info=True)
                await sink.dead_letter(STAGE, f"{type(exc).__name__}: {exc}", event.message)
            finished(event, STAGE)
            event.ack()
            # Faust's sensor ends the process span on a stream ack, which noack never does.
            process_span.end()

    consolidation_topic = topics.consolidation.get_topic_name()

    # Faust's on_leader needs the leader topic, which the app disables; the owner of the
    # one consolidation partition is a leader of its own, and exactly one worker is it.
    @app.timer(settings.consolidation_interval, name="consolidation-schedule")
    async def schedule() -> None:
        if not any(tp.topic == consolidation_topic for tp in app.assignor.assigned_actives()):
            return
        await topics.consolidation.send(
            key=b"schedule", value=ConsolidationRequest(reason="schedule", ts=datetime.now(UTC))
        )

    return consolidate

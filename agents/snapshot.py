"""Snapshot agent: the last 8 messages of a session after every assistant turn.

Consumes ``turns`` (key: session id). Emits ``snapshots`` (key: session id).
State: table ``snapshot-sessions`` — per session, its last applied turns (with their
partition and offset) and the count of assistant turns. A turn redelivered after a crash
re-emits the snapshot it made the first time (rules.snapshot.apply_turn), so kill -9
neither duplicates nor mispairs an exchange. A timer stores the user turns a session ended on: once no turn has
arrived for ``MEMSTREAM_PHASE1_IDLE_SECONDS`` (processing time), they go out as a snapshot
of their own, so every turn reaches memory; its id derives from the session and the turn
count, so a redelivery or a replay stores the same memory again, not a second one.
A session whose project or user was forgotten after its last turn starts its window afresh,
so its next snapshot carries none of the forgotten words: the worker follows the ``forgotten``
ledger itself, since this table is keyed by session, where the forget barrier (keyed by
scope) never passes. A turn's user is only ever its own, never the worker's identity.
Relies on the turns of one session arriving in order, which their shared key guarantees;
a turn that arrives without it is re-published keyed.
Private spans are stripped and secrets redacted here, before anything leaves the stage.
The first turn of a session in a project with no memories yet also emits an init
snapshot of the project's files, when this worker can read them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import faust
import msgspec
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.bootstrap import Providers
from memstream.identity import derived_id, project_key, user_key
from memstream.intake.project_files import read_project_files
from memstream.kafka.ledger import ledger_of, stale_window
from memstream.kafka.security import client_options
from memstream.rules.explicit import explicit_requests
from memstream.rules.secrets import redact
from memstream.rules.snapshot import (
    apply_turn,
    current_window,
    exchange_sources,
    exchange_start,
    format_snapshot,
    last_exchange,
    pending_is_due,
    snapshot_modes,
)
from memstream.schemas import Message, SessionState, Snapshot, Turn
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics

STAGE = "snapshot"
log = logging.getLogger(__name__)


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    # Written by the flush timer too, outside any stream event: through the partitioner.
    sessions = state_table(app, "snapshot-sessions", settings.partitions, use_partitioner=True)
    turns_topic = topics.turns.get_topic_name()
    ledger = ledger_of(app)

    @app.task
    async def follow_ledger() -> None:
        bootstrap = ",".join(url.authority for url in app.conf.broker)
        security = client_options(settings) if settings.kafka_bootstrap else {}
        try:
            await ledger.follow(
                bootstrap,
                topics.forgotten.get_topic_name(),
                security=security,
                fetch_max_wait_ms=settings.effective_fetch_max_wait_ms,
                # No doorbell: the worker's producer rings it at every record of a turn, which would
                # send this consumer of a topic that rarely has records fetching all through a busy
                # run. The forgets this worker takes are in the ledger at once (ledger_of); others'
                # come within the idle wait, which the broker holds.
                idle_wait_ms=settings.effective_fetch_idle_wait_ms,
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # the pipeline goes on; windows are then cleared only by the stages' own checks
            log.exception("stopped following the forgotten ledger")

    async def maybe_init(turn: Turn) -> None:
        """Init mode (seed 000): a new project's README, manifests and configs."""
        # The file system is read on a worker thread: the agent's loop must not block on a slow disk.
        if providers.raw_mode or not await asyncio.to_thread(Path(turn.project).is_dir):
            return
        key = project_key(turn.project)
        if await providers.store.count([key]) > 0:
            return
        files = await asyncio.to_thread(read_project_files, Path(turn.project))
        if files:
            await topics.snapshots.send(key=turn.session_id.encode(), value=init_snapshot(turn, redact(files)))

    def init_snapshot(turn: Turn, files: str) -> Snapshot:
        return Snapshot(
            snapshot_id=derived_id(project_key(turn.project), "init"),
            session_id=turn.session_id,
            project=turn.project,
            project_key=project_key(turn.project),
            user_key=user_key(turn.user),  # never the worker's own identity
            mode="init",
            text=files,
            turn_index=0,
            ts=turn.ts,
        )

    async def handle(value: Any, event: EventT) -> None:
        turn = expect(value, Turn)
        key = turn.session_id.encode()
        if event.message.key != key:
            # Published without its session key: its partition is not its session's, so
            # it would be applied out of order (an answer without its question). Re-keyed.
            await topics.turns.send(key=key, value=turn)
            return
        state: SessionState | None = sessions.get(turn.session_id)
        if state is None:
            await maybe_init(turn)
            state = SessionState()
        forgotten_at = ledger.latest(project_key(turn.project), user_key(turn.user))
        if (state.messages or state.applied) and stale_window(state.last_ts, forgotten_at):
            # The window starts afresh; the turn count stays: snapshot ids derive from it.
            state = msgspec.structs.replace(state, messages=[], applied=[])
        applied = apply_turn(
            state,
            partition=event.message.partition,
            offset=event.message.offset,
            role=turn.role,
            content=turn.content,
            size=settings.snapshot_messages,
            message_max_chars=settings.message_max_chars,
            provenance=turn.provenance,
        )
        if not applied.redelivered:
            sessions[turn.session_id] = msgspec.structs.replace(
                applied.state,
                project=turn.project,
                user=turn.user,
                last_ts=turn.ts,
                last_seen=time.time(),
                partition=event.message.partition,
                pending_flushed=False,
            )
        messages, turns = applied.messages, applied.assistant_turns
        if messages is None:
            return
        with stage_span("memstream.snapshot", session=turn.session_id, turn=turns):
            await emit(turn.session_id, turn.project, turn.user, turn.ts, messages, turns, mark="")

    async def emit(
        session_id: str, project: str, user: str, ts: Any, messages: list[Message], turns: int, *, mark: str
    ) -> None:
        """The snapshots of the session's last exchange; ``mark`` tells a flush of unanswered turns apart."""
        text = redact(
            format_snapshot(
                messages, message_max_chars=settings.message_max_chars, max_chars=settings.snapshot_max_chars
            )
        )
        exchange = redact(last_exchange(messages, message_max_chars=settings.message_max_chars))
        sources = exchange_sources(messages)
        explicit = [
            redact(fact)
            for m in messages[exchange_start(messages) :]
            if m.role == "user"
            for fact in explicit_requests(m.content)
        ]
        for mode in snapshot_modes(turns, raw=providers.raw_mode, summary_every=settings.summary_every):
            if mark and mode == "summary":
                continue  # a flush stores the unanswered turns; summaries follow assistant turns
            snapshot = Snapshot(
                snapshot_id=derived_id(session_id, str(turns), mode, *([mark] if mark else [])),
                session_id=session_id,
                project=project,
                project_key=project_key(project),
                user_key=user_key(user),  # never the worker's own identity
                mode=mode,  # type: ignore[arg-type]
                text=text,
                turn_index=turns,
                exchange=exchange,
                # Explicit requests ride on the normal (or raw) snapshot only, never twice.
                explicit=explicit if mode in ("normal", "raw") else [],
                sources=sources,
                ts=ts,
            )
            await topics.snapshots.send(key=session_id.encode(), value=snapshot)

    async def flush(session_id: str, state: SessionState) -> None:
        """Store the user turns the session ended on, then remember that they were stored."""
        messages = current_window(state, settings.snapshot_messages)
        pending = len(messages) - exchange_start(messages)
        with stage_span("memstream.snapshot", session=session_id, turn=state.assistant_turns, pending=pending):
            await emit(
                session_id,
                state.project,
                state.user,
                state.last_ts,
                messages,
                state.assistant_turns,
                mark=f"pending:{len(messages)}:{messages[-1].content[:64]}",
            )
        current: SessionState | None = sessions.get(session_id)
        if current is not None and current.applied == state.applied:  # no turn arrived meanwhile
            sessions[session_id] = msgspec.structs.replace(current, pending_flushed=True)

    @app.agent(topics.turns, name=STAGE)
    async def snapshot(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    @app.timer(settings.phase1_scan_interval, name="snapshot-flush")
    async def flush_idle() -> None:
        """Sessions idle on unanswered user turns, on the partitions this worker owns."""
        owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == turns_topic}
        if not owned:
            return
        now = time.time()
        idle = settings.phase1_idle_seconds
        for session_id, state in list(sessions.items()):
            if state is None or state.partition not in owned or state.last_ts is None:
                continue
            messages = current_window(state, settings.snapshot_messages)
            if pending_is_due(messages, state.last_seen, state.pending_flushed, now, idle):
                await flush(session_id, state)

    return snapshot

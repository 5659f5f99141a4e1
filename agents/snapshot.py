"""Snapshot agent: the last 8 messages of a session after every assistant turn.

Consumes ``turns`` (key: session id). Emits ``snapshots`` (key: session id).
State: table ``snapshot-sessions`` — per session, its last applied turns (with their
offsets) and the count of assistant turns. Relies on the turns of one session arriving in
order, which their shared key guarantees; a turn that arrives without it is re-published
keyed. A turn redelivered after a crash re-emits the snapshot it made the first time
(rules.snapshot.apply_turn), so kill -9 neither duplicates nor mispairs an exchange.
Private spans are stripped and secrets redacted here, before anything leaves the stage.
The first turn of a session in a project with no memories yet also emits an init snapshot
of the project's files, when this worker can read them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import faust
from faust.types import EventT

from memstream.agents.base import DeadLetters, expect, guarded, state_table
from memstream.bootstrap import Providers
from memstream.identity import derived_id, project_key, user_key
from memstream.project_files import read_project_files
from memstream.rules.explicit import explicit_requests
from memstream.rules.secrets import redact
from memstream.rules.snapshot import apply_turn, format_snapshot, last_exchange, snapshot_modes
from memstream.schemas import SessionState, Snapshot, Turn
from memstream.topics.binding import Topics
from memstream.tracing import stage_span

STAGE = "snapshot"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    sessions = state_table(app, "snapshot-sessions", settings.partitions)

    async def maybe_init(turn: Turn) -> None:
        """Init mode (seed 000): a new project's README, manifests and configs."""
        if providers.raw_mode or not await asyncio.to_thread(Path(turn.project).is_dir):
            return
        key = project_key(turn.project)
        if await providers.store.count([key]) > 0:
            return
        files = read_project_files(Path(turn.project))
        if files:
            await topics.snapshots.send(key=turn.session_id.encode(), value=init_snapshot(turn, redact(files)))

    def init_snapshot(turn: Turn, files: str) -> Snapshot:
        return Snapshot(
            snapshot_id=derived_id(project_key(turn.project), "init"),
            session_id=turn.session_id,
            project=turn.project,
            project_key=project_key(turn.project),
            user_key=user_key(turn.user or settings.user),
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
        applied = apply_turn(
            state,
            partition=event.message.partition,
            offset=event.message.offset,
            role=turn.role,
            content=turn.content,
            size=settings.snapshot_messages,
            message_max_chars=settings.message_max_chars,
        )
        if not applied.redelivered:
            sessions[turn.session_id] = applied.state
        messages, turns = applied.messages, applied.assistant_turns
        if messages is None:
            return
        with stage_span("memstream.snapshot", session=turn.session_id, turn=turns):
            text = redact(
                format_snapshot(
                    messages, message_max_chars=settings.message_max_chars, max_chars=settings.snapshot_max_chars
                )
            )
            exchange_start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
            exchange = redact(last_exchange(messages, message_max_chars=settings.message_max_chars))
            explicit = [
                redact(fact)
                for m in messages[exchange_start:]
                if m.role == "user"
                for fact in explicit_requests(m.content)
            ]
            for mode in snapshot_modes(turns, raw=providers.raw_mode, summary_every=settings.summary_every):
                snapshot = Snapshot(
                    snapshot_id=derived_id(turn.session_id, str(turns), mode),
                    session_id=turn.session_id,
                    project=turn.project,
                    project_key=project_key(turn.project),
                    user_key=user_key(turn.user or settings.user),
                    mode=mode,  # type: ignore[arg-type]
                    text=text,
                    turn_index=turns,
                    exchange=exchange,
                    # Explicit requests ride on the normal (or raw) snapshot only, never twice.
                    explicit=explicit if mode in ("normal", "raw") else [],
                    ts=turn.ts,
                )
                await topics.snapshots.send(key=turn.session_id.encode(), value=snapshot)

    @app.agent(topics.turns, name=STAGE)
    async def snapshot(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return snapshot

"""Snapshot agent: the last 8 messages of a session after every assistant turn.

Consumes ``turns`` (key: session id). Emits ``snapshots`` (key: session id).
State: table ``snapshot-sessions`` — per session, its last public messages and the count
of assistant turns. Relies on the turns of one session arriving in order, which their
shared key guarantees. Private spans are stripped and secrets redacted here, before
anything leaves the stage. The first turn of a session in a project with no memories
yet also emits an init snapshot of the project's files, when this worker can read them.
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
from memstream.rules.snapshot import format_snapshot, last_exchange, snapshot_modes, window
from memstream.schemas import Message, SessionState, Snapshot, Turn
from memstream.topics.binding import Topics
from memstream.tracing import stage_span

STAGE = "snapshot"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    sessions = state_table(app, "snapshot-sessions", settings.partitions)

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
            user_key=user_key(turn.user or settings.user),
            mode="init",
            text=files,
            turn_index=0,
            ts=turn.ts,
        )

    async def handle(value: Any, event: EventT) -> None:
        turn = expect(value, Turn)
        state: SessionState | None = sessions.get(turn.session_id)
        if state is None:
            await maybe_init(turn)
            state = SessionState()
        messages = window(state.messages, Message(turn.role, turn.content), settings.snapshot_messages)
        turns = state.assistant_turns + (1 if turn.role == "assistant" else 0)
        sessions[turn.session_id] = SessionState(messages=messages, assistant_turns=turns)
        if turn.role != "assistant" or not messages:
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

"""Snapshot agent: the last 8 messages of a session after every assistant turn.

Consumes ``turns`` (key: session id). Emits ``snapshots`` (key: session id).
State: table ``snapshot-sessions`` — per session, its last public messages and the count
of assistant turns. Relies on the turns of one session arriving in order, which their
shared key guarantees. Private spans are stripped here, before anything leaves the stage.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.types import EventT

from agents.base import DeadLetters, expect, guarded, state_table
from memstream.bootstrap import Providers
from memstream.identity import derived_id, project_key, user_key
from memstream.rules.snapshot import format_snapshot, last_exchange, snapshot_modes, window
from memstream.tracing import stage_span
from schemas import Message, SessionState, Snapshot, Turn
from topics.binding import Topics

STAGE = "snapshot"


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    settings = providers.settings
    sessions = state_table(app, "snapshot-sessions", settings.partitions)

    async def handle(value: Any, event: EventT) -> None:
        turn = expect(value, Turn)
        state: SessionState = sessions.get(turn.session_id) or SessionState()
        messages = window(state.messages, Message(turn.role, turn.content), settings.snapshot_messages)
        turns = state.assistant_turns + (1 if turn.role == "assistant" else 0)
        sessions[turn.session_id] = SessionState(messages=messages, assistant_turns=turns)
        if turn.role != "assistant" or not messages:
            return
        with stage_span("memstream.snapshot", session=turn.session_id, turn=turns):
            text = format_snapshot(
                messages, message_max_chars=settings.message_max_chars, max_chars=settings.snapshot_max_chars
            )
            exchange = last_exchange(messages, message_max_chars=settings.message_max_chars)
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
                    ts=turn.ts,
                )
                await topics.snapshots.send(key=turn.session_id.encode(), value=snapshot)

    @app.agent(topics.turns, name=STAGE)
    async def snapshot(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, handle)

    return snapshot

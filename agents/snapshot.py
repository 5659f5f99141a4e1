"""Snapshot agent: the last 8 messages of a session after every assistant turn.

Consumes ``turns`` (key: session key). Emits ``snapshots`` (key: session key).
State: table ``snapshot-sessions`` — per session, its last applied turns (with their
partition and offset) and the count of assistant turns. A session is its id within its
project and its user's scope (memstream.identity.session_key): two tenants who use the same
session id never share a window, a count or a snapshot id. A state kept under the bare
session id (before keys named the tenant) is adopted by the first turn of the same id,
project and user, and removed from its old key. A turn redelivered after a crash
re-emits the snapshot it made the first time (rules.snapshot.apply_turn), so kill -9
neither duplicates nor mispairs an exchange. A timer stores the user turns a session ended on: once no turn has
arrived for ``MEMSTREAM_PHASE1_IDLE_SECONDS`` (processing time), or at once when a turn says its
session ended (``Turn.ends_session``), they go out as a snapshot of their own, so every turn
reaches memory; its id derives from the session and the turn count, so a redelivery or a replay
stores the same memory again, not a second one.
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

from memstream.agents.base import DeadLetters, delivered, expect, guarded, state_table
from memstream.identity import derived_id, project_key, turn_session_key, user_key
from memstream.intake.project_files import read_project_files
from memstream.kafka.ledger import ledger_of, stale_window
from memstream.kafka.security import client_options
from memstream.ports import Providers
from memstream.rules.explicit import explicit_requests
from memstream.rules.secrets import redact
from memstream.rules.snapshot import (
    apply_turn,
    current_exchange,
    current_window,
    ends_applied,
    exchange_id,
    exchange_sources,
    exchange_start,
    format_snapshot,
    last_exchange,
    legacy_state_of,
    lineage_of,
    pending_is_due,
    snapshot_id,
    snapshot_modes,
)
from memstream.schemas import Message, SessionState, Snapshot, Turn
from memstream.telemetry.tracing import stage_span
from memstream.topics.binding import Topics
from memstream.topics.headers import header

STAGE = "snapshot"
log = logging.getLogger(__name__)
#: The header of a turn this stage re-published under its session key: "partition:offset" of
#: the record it copies, on the turns topic.
ORIGIN_HEADER = "memstream-origin"


def origin(headers: Any) -> tuple[int, int] | None:
    """The (partition, offset) a re-published turn copies, or None (a turn as its host published it)."""
    try:
        raw = header(headers, ORIGIN_HEADER)
        if raw is None:
            return None
        partition, offset = raw.decode().split(":")
        return int(partition), int(offset)
    except (ValueError, UnicodeDecodeError):
        return None


def register(app: faust.App, topics: Topics, providers: Providers, sink: DeadLetters) -> faust.types.AgentT:
    """Declare the stage's table, its ledger-following task, its agent on ``turns`` and its flush timer."""
    stage = SnapshotStage(app, topics, providers)
    app.task(stage.follow_ledger)

    @app.agent(topics.turns, name=STAGE)
    async def snapshot(stream: faust.StreamT) -> None:
        await guarded(stream, STAGE, sink, stage.handle)

    app.timer(providers.settings.phase1_scan_interval, name="snapshot-flush")(stage.flush_idle)
    return snapshot


class SnapshotStage:
    """The snapshot stage of one worker: its table of sessions, the forgets it follows, and what it does
    with a turn (:meth:`handle`), a session's end (:meth:`flush_ended`) and an idle session (:meth:`flush_idle`)."""

    def __init__(self, app: faust.App, topics: Topics, providers: Providers) -> None:
        self.app = app
        self.topics = topics
        self.providers = providers
        self.settings = settings = providers.settings
        # Written by the flush timer too, outside any stream event: through the partitioner.
        self.sessions = state_table(app, "snapshot-sessions", settings.partitions, use_partitioner=True, versioned=True)
        self.turns_topic = topics.turns.get_topic_name()
        self.ledger = ledger_of(app)

    async def follow_ledger(self) -> None:
        """Follow the ``forgotten`` ledger for as long as the worker runs (a task)."""
        bootstrap = ",".join(url.authority for url in self.app.conf.broker)
        security = client_options(self.settings) if self.settings.kafka_bootstrap else {}
        try:
            await self.ledger.follow(
                bootstrap,
                self.topics.forgotten.get_topic_name(),
                security=security,
                fetch_max_wait_ms=self.settings.effective_fetch_max_wait_ms,
                # No doorbell: the worker's producer rings it at every record of a turn, which would
                # send this consumer of a topic that rarely has records fetching all through a busy
                # run. The forgets this worker takes are in the ledger at once (ledger_of); others'
                # come within the idle wait, which the broker holds.
                idle_wait_ms=self.settings.effective_fetch_idle_wait_ms,
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # the pipeline goes on; windows are then cleared only by the stages' own checks
            log.exception("stopped following the forgotten ledger")

    async def handle(self, value: Any, event: EventT) -> None:
        turn = expect(value, Turn)
        skey = turn_session_key(turn.session_id, turn.project, turn.user)
        key = skey.encode()
        if event.message.key != key:
            # Published without its session key: its partition is not its session's, so
            # it would be applied out of order (an answer without its question). Re-keyed,
            # naming the record it copies: a redelivery after a crash copies it again, and
            # the session applies a turn of one origin once.
            copied = f"{event.message.partition}:{event.message.offset}".encode()
            await self.topics.turns.send(key=key, value=turn, headers={ORIGIN_HEADER: copied})
            return
        partition, offset, exact = event.message.partition, event.message.offset, False
        if (origin_of := origin(event.message.headers)) is not None:
            (partition, offset), exact = origin_of, True
        state: SessionState | None = (
            self.sessions.get(skey) or self.sessions.adopt(skey) or self.adopt_legacy(turn, skey)
        )
        if state is None:
            await self.maybe_init(turn)
            state = SessionState(lineage=lineage_of(turn.ts, turn.role, turn.content))
        if turn.ends_session and ends_applied(state, turn.role, turn.provenance):
            await self.flush_ended(skey)  # the host's end, sent again with a turn applied before: only the end
            return
        forgotten_at = self.ledger.latest(project_key(turn.project), user_key(turn.user))
        if (state.messages or state.applied) and stale_window(state.last_ts, forgotten_at):
            # The window starts afresh; the turn count stays: snapshot ids derive from it.
            state = msgspec.structs.replace(state, messages=[], applied=[])
        applied = apply_turn(
            state,
            partition=partition,
            offset=offset,
            exact=exact,
            role=turn.role,
            content=turn.content,
            size=self.settings.snapshot_messages,
            message_max_chars=self.settings.message_max_chars,
            provenance=turn.provenance,
        )
        if not applied.redelivered:
            self.sessions[skey] = msgspec.structs.replace(
                applied.state,
                project=turn.project,
                user=turn.user,
                last_ts=turn.ts,
                last_seen=time.time(),
                partition=event.message.partition,
                pending_flushed=False,
                session_id=turn.session_id,
            )
        if turn.ends_session:
            await self.flush_ended(skey)
        messages, turns = applied.messages, applied.assistant_turns
        if messages is None:
            return
        with stage_span("memstream.snapshot", session=turn.session_id, turn=turns):
            await self.emit(
                skey,
                turn.session_id,
                turn.project,
                turn.user,
                turn.ts,
                messages,
                turns,
                (applied.exchange, applied.exchange_base),
                lineage=applied.state.lineage,
                mark="",
            )

    async def maybe_init(self, turn: Turn) -> None:
        """Init mode (the extraction spec): a new project's README, manifests and configs."""
        # The file system is read on a worker thread: the agent's loop must not block on a slow disk.
        if self.providers.raw_mode or not await asyncio.to_thread(Path(turn.project).is_dir):
            return
        key = project_key(turn.project)
        if await self.providers.store.count([key]) > 0:
            return
        files = await asyncio.to_thread(read_project_files, Path(turn.project))
        if files:
            key = turn_session_key(turn.session_id, turn.project, turn.user)
            await self.topics.snapshots.send(key=key.encode(), value=init_snapshot(turn, redact(files)))

    def adopt_legacy(self, turn: Turn, skey: str) -> SessionState | None:
        """The state this session kept under its bare id, moved to its session key; None if
        there is none, or it is another tenant's (its project or user differ)."""
        if skey == turn.session_id:
            return None
        legacy: SessionState | None = self.sessions.get(turn.session_id)
        if legacy is None or not legacy_state_of(legacy, turn.project, turn.user):
            return None
        del self.sessions[turn.session_id]
        return legacy

    async def emit(
        self,
        skey: str,
        session_id: str,
        project: str,
        user: str,
        ts: Any,
        messages: list[Message],
        turns: int,
        exchange_of: tuple[list[Message] | None, int],
        *,
        lineage: str,
        mark: str,
    ) -> list[Any]:
        """Send the snapshots of the session's last exchange (their delivery futures are returned);
        ``mark`` tells a flush of unanswered turns apart.

        ``exchange_of`` is the exchange from its question on and its base, when the state knows them;
        otherwise the exchange is the one the window shows. Snapshot and exchange ids derive from the
        session key, so two tenants' sessions of one id never make the same id (the extract stage skips
        an id it has seen), and from the state's ``lineage``, so a session whose state started afresh
        never remakes the ids of its exchanges stored before."""
        text = redact(
            format_snapshot(
                messages, message_max_chars=self.settings.message_max_chars, max_chars=self.settings.snapshot_max_chars
            )
        )
        exchange_messages, base = exchange_of
        whole = exchange_messages if exchange_messages else messages[exchange_start(messages) :]
        exchange = redact(last_exchange(whole, message_max_chars=self.settings.message_max_chars))
        sources = exchange_sources(whole)
        explicit = [
            redact(fact)
            for m in messages[exchange_start(messages) :]
            if m.role == "user"
            for fact in explicit_requests(m.content)
        ]
        sent = []
        for mode in snapshot_modes(turns, raw=self.providers.raw_mode, summary_every=self.settings.summary_every):
            if mark and mode == "summary":
                continue  # a flush stores the unanswered turns; summaries follow assistant turns
            snapshot = Snapshot(
                snapshot_id=snapshot_id(skey, lineage, turns, mode, mark),
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
                exchange_id=exchange_id(skey, base, lineage) if exchange_messages else "",
                ts=ts,
            )
            sent.append(await self.topics.snapshots.send(key=skey.encode(), value=snapshot))
        return sent

    async def flush(self, skey: str, state: SessionState) -> None:
        """Store the user turns the session ended on, then remember that they were stored."""
        messages = current_window(state, self.settings.snapshot_messages)
        pending = len(messages) - exchange_start(messages)
        # A state kept under the bare session id (not adopted yet) is its own key.
        session_id = state.session_id or skey
        with stage_span("memstream.snapshot", session=session_id, turn=state.assistant_turns, pending=pending):
            sent = await self.emit(
                skey,
                session_id,
                state.project,
                state.user,
                state.last_ts,
                messages,
                state.assistant_turns,
                current_exchange(state),
                lineage=state.lineage,
                mark=f"pending:{len(messages)}:{messages[-1].content[:64]}",
            )
            # No turn comes again to redo a flush: it is marked done once its snapshot is on the broker.
            await delivered(sent)
        current: SessionState | None = self.sessions.get(skey)
        if current is not None and current.applied == state.applied:  # no turn arrived meanwhile
            self.sessions[skey] = msgspec.structs.replace(current, pending_flushed=True)

    async def flush_ended(self, skey: str) -> None:
        """The session's host said it ended: user turns it ended on are stored now, not after the idle
        window (a redelivered end flushes again under the same id, unless the first flush was marked)."""
        state: SessionState | None = self.sessions.get(skey)
        if state is None or state.last_ts is None:
            return
        messages = current_window(state, self.settings.snapshot_messages)
        if pending_is_due(messages, state.last_seen, state.pending_flushed, time.time(), 0.0, ended=True):
            await self.flush(skey, state)

    async def flush_idle(self) -> None:
        """Sessions idle on unanswered user turns, on the partitions this worker owns."""
        self.sessions.adopt_all()
        owned = {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.turns_topic}
        if not owned:
            return
        now = time.time()
        idle = self.settings.phase1_idle_seconds
        for skey, state in list(self.sessions.items()):
            if state is None or state.partition not in owned or state.last_ts is None:
                continue
            if (state.messages or state.applied) and stale_window(
                state.last_ts, self.ledger.latest(project_key(state.project), user_key(state.user))
            ):
                # Forgotten since its last turn: the window's words leave the table now, not at
                # the session's next turn, and its changelog's newest record holds none of them
                # (a compacting broker then drops the older ones). The turn count stays.
                self.sessions[skey] = msgspec.structs.replace(state, messages=[], applied=[], pending_flushed=True)
                continue
            messages = current_window(state, self.settings.snapshot_messages)
            if pending_is_due(messages, state.last_seen, state.pending_flushed, now, idle):
                await self.flush(skey, state)


def init_snapshot(turn: Turn, files: str) -> Snapshot:
    """The init snapshot of a new project's ``files``, made at the first turn of a session in it."""
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

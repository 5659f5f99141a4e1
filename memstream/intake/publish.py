"""Validate turns and publish them to the turns topic, as an agent host would.

All input is validated before anything is sent: one bad line and nothing is published.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer

from memstream.identity import turn_session_key
from memstream.intake.turnlog import TurnLog, prepare
from memstream.kafka import doorbell
from memstream.limits import RECORD_MAX_BYTES, TURN_CONTENT_MAX_CHARS
from memstream.logs import quiet_payload_loggers
from memstream.schemas import ROLES, Provenance, Turn, encode, universal_turn
from memstream.telemetry.tracing import stage_span
from memstream.topics import TURNS, TopicSpec, topic_name

#: Ends a turn's content cut to memstream.limits.TURN_CONTENT_MAX_CHARS.
TRUNCATION_MARK = " …[truncated]"


class TurnError(ValueError):
    """A turn is invalid; the message names the problem (and the line, for files)."""


class _TurnInput(msgspec.Struct, forbid_unknown_fields=False):
    session_id: str
    project: str
    role: str
    content: str
    ts: datetime | None = None
    user: str = ""
    source: str = ""
    ends_session: bool = False


def make_turn(
    *,
    session_id: str,
    project: str,
    role: str,
    content: str,
    ts: datetime | None = None,
    user: str = "",
    source: str = "",
    llm_source: str = "",
    llm_model: str = "",
    provenance: Provenance | None = None,
    ends_session: bool = False,
) -> Turn:
    """A validated turn in the capture spec's universal format (hash, timestamps, metadata, provenance)."""
    if not session_id.strip():
        raise TurnError("session id is empty")
    if not project.strip():
        raise TurnError("project is empty")
    if role not in ROLES:
        raise TurnError(f"unknown role {role!r} (expected one of: {', '.join(ROLES)})")
    if not content.strip():
        raise TurnError("content is empty")
    if len(content) > TURN_CONTENT_MAX_CHARS:  # a tool output of megabytes: its head is what counts
        content = content[: TURN_CONTENT_MAX_CHARS - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    turn = Turn(
        session_id=session_id,
        project=project,
        role=role,  # type: ignore[arg-type]
        content=content,
        ts=ts or datetime.now(UTC),
        user=user,
        source=source,
        llm_source=llm_source,
        llm_model=llm_model,
        ends_session=ends_session,
    )
    return universal_turn(
        turn,
        extracted_at=datetime.now(UTC),
        provenance=provenance or Provenance(source_type=source or "publish", session_id=session_id),
    )


def parse_jsonl(lines: Iterable[str], *, name: str = "input") -> list[Turn]:
    turns: list[Turn] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = msgspec.json.decode(line.encode(), type=_TurnInput)
            turns.append(make_turn(**{f: getattr(raw, f) for f in raw.__struct_fields__}))
        except (msgspec.DecodeError, msgspec.ValidationError, TurnError) as exc:
            raise TurnError(f"{name} line {number}: {exc}") from None
    if not turns:
        raise TurnError(f"{name}: no turns found")
    return turns


def read_jsonl(path: Path) -> list[Turn]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise TurnError(f"cannot read {path}: {exc.strerror}") from None
    return parse_jsonl(text.splitlines(), name=str(path))


async def publish(
    bootstrap: str,
    prefix: str,
    turns: Sequence[Turn],
    *,
    security: Mapping[str, Any] | None = None,
    log: TurnLog | None = None,
) -> int:
    """Send turns keyed by session (memstream.identity.session_key), in order, and wait until
    the broker has them all; written to the durable turn ``log`` first, where there is one."""
    seqs = log.append(turns) if log is not None else []
    sent = await publish_events(
        bootstrap,
        prefix,
        TURNS,
        [(turn_session_key(turn.session_id, turn.project, turn.user), turn) for turn in turns],
        security=security,
    )
    if log is not None:
        log.published(seqs)
    return sent


async def open_producer(bootstrap: str, prefix: str) -> AIOKafkaProducer:
    """A started producer for batched sends (:func:`send_turns`); raises if the broker cannot be reached."""
    quiet_payload_loggers()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, client_id=f"{prefix}-capture", linger_ms=5, request_timeout_ms=15_000
    )
    try:
        await producer.start()
    except BaseException:
        await producer.stop()
        raise
    return producer


#: The first chunk :func:`send_turns` appends before it sends anything; each next one is twice as large.
FIRST_CHUNK = 128


async def send_turns(
    producer: AIOKafkaProducer,
    prefix: str,
    turns: Sequence[Turn],
    *,
    log: TurnLog | None = None,
    first_chunk: int = FIRST_CHUNK,
) -> int:
    """Send turns keyed by session without waiting for each, then wait until the broker has them all;
    written to the durable turn ``log`` first, where there is one.

    With a log, the batch goes in growing chunks (:func:`log_chunks`): each chunk is appended (one
    fsync'd commit, in a thread) before any of its turns is sent, and the next chunk is appended while
    this one is on its way, so the disk's work overlaps the broker's instead of adding to it. Every
    turn is still on disk before it is sent and before the caller hears "ok". (``first_chunk`` at
    least the batch's size: one commit, then the sends, as bench/perf/durable_cost.py compares.)

    aiokafka keeps one request in flight per broker, so turns of one session (one partition) stay in order.
    """
    prepared = [prepare(turn) for turn in turns]  # each key and bytes made once, for the log and the send
    topic = topic_name(prefix, TURNS)
    chunks = log_chunks(len(turns), first_chunk) if log is not None else [(0, len(turns))]
    seqs: list[int] = []
    appending: asyncio.Future[list[int]] | None = None
    if log is not None and chunks:
        first, end = chunks[0]
        appending = asyncio.ensure_future(asyncio.to_thread(log.append, turns[first:end], prepared[first:end]))
    try:
        with stage_span("memstream.intake.publish.batch", topic=topic, size=len(turns)):
            futures = []
            for i, (first, end) in enumerate(chunks):
                if log is not None and appending is not None:
                    seqs += await appending  # this chunk is on disk: only now may it be sent
                    appending = None
                    if i + 1 < len(chunks):
                        start, stop = chunks[i + 1]
                        appending = asyncio.ensure_future(
                            asyncio.to_thread(log.append, turns[start:stop], prepared[start:stop])
                        )
                futures += [await producer.send(topic, event, key=key.encode()) for key, event in prepared[first:end]]
            for future in futures:
                await future
    finally:
        if appending is not None:  # a send failed: let the append in flight finish (its turns stay unpublished)
            with contextlib.suppress(Exception):
                await appending
    if log is not None:
        log.published(seqs)
    return len(turns)


def log_chunks(count: int, first: int = FIRST_CHUNK) -> list[tuple[int, int]]:
    """``count`` turns as (start, end) chunks that double in size: the first is small, so sending starts
    at once, and a batch of n costs ~log2(n / first) commits, not one per turn."""
    chunks, start, size = [], 0, first
    while start < count:
        end = min(count, start + size)
        if count - end < size:  # a short tail joins this chunk rather than cost a commit of its own
            end = count
        chunks.append((start, end))
        start, size = end, size * 2
    return chunks


async def publish_events(
    bootstrap: str,
    prefix: str,
    spec: TopicSpec,
    events: Sequence[tuple[str, msgspec.Struct]],
    *,
    max_request_size: int = RECORD_MAX_BYTES,
    security: Mapping[str, Any] | None = None,
) -> int:
    """Send (key, event) pairs to one catalog topic, in order; each send starts a trace.

    ``max_request_size``: the largest request the producer sends (memstream.limits.RECORD_MAX_BYTES);
    a document's content needs more.
    """
    quiet_payload_loggers()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=f"{prefix}-publish",
        linger_ms=5,
        max_request_size=max_request_size,
        **(security or {}),
    )
    await producer.start()
    try:
        topic = topic_name(prefix, spec)
        for key, event in events:
            with stage_span("memstream.intake.publish", topic=topic, key=key):
                await producer.send_and_wait(topic, encode(event), key=key.encode())
        doorbell.ring(bootstrap)  # an idle worker on the embedded broker takes them at once
        return len(events)
    finally:
        await producer.stop()

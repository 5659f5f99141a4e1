"""Replay: reprocess history from the turns topic (on the embedded default: the durable turn log,
memstream.intake.turnlog, from the first turn it keeps) into a shadow collection.

The live pipeline is left alone. A shadow pipeline (its own topics, consumer group and
collection: ``<prefix>.replay-<name>.*`` and ``<collection>__<name>``) runs in this process
with whatever model, prompt or settings this process has; the turns from the chosen start
are copied into its turns topic, keyed and ordered as before. Memory ids derive from
content, so a replay is safe to repeat. At the end it says what changed against the live
memories, and ``switch`` makes the shadow collection the one ``memstream up`` serves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.bootstrap import active_collection, build_embedder, build_providers, build_store
from memstream.identity import project_key, user_key
from memstream.intake import turnlog
from memstream.intake.turnlog import TurnLog
from memstream.kafka import offsets
from memstream.kafka.security import client_options
from memstream.logs import quiet_flow_control, quiet_payload_loggers
from memstream.runtime import read_runtime, write_process_file
from memstream.schemas import ForgetScope, Memory, Turn, decode, encode
from memstream.settings import Settings
from memstream.store.base import collection_name
from memstream.telemetry import metrics
from memstream.topics import ALL_TOPICS, FORGOTTEN, TURNS, topic_name
from memstream.worker import runner

#: How long the shadow pipeline must stay idle, with nothing left to read, to count as drained.
IDLE_SECONDS = 2.0


def replay_file(shadow_dir: Path) -> Path:
    """Where a running replay records its process, in its shadow data dir."""
    return shadow_dir / "replay.json"


def replays_running(settings: Settings) -> list[str]:
    """The names of the replays running now on this data dir (their processes are alive)."""
    found = (read_runtime(replay_file(shadow)) for shadow in (settings.data_dir / "replays").glob("*"))
    return sorted(str(record.get("name", "")) for record in found if record is not None)


class ReplayError(RuntimeError):
    """The replay cannot run; the message says why."""


@dataclasses.dataclass(frozen=True)
class Start:
    """Where the replay starts: the beginning, a time, or an offset in every partition."""

    timestamp: datetime | None = None
    offset: int | None = None


@dataclasses.dataclass
class Summary:
    turns: int
    collection: str
    added: list[Memory]
    removed: list[Memory]
    changed: list[tuple[Memory, Memory]]
    unchanged: int
    seconds: float
    switched: bool = False

    def render(self) -> str:
        lines = [
            f"replayed {self.turns} turns into {self.collection} in {self.seconds:.1f}s",
            f"  added:     {len(self.added)}",
            f"  removed:   {len(self.removed)}",
            f"  changed:   {len(self.changed)}",
            f"  unchanged: {self.unchanged}",
        ]
        lines += [f"  + [{m.type}] {m.text[:100]}" for m in self.added[:5]]
        lines += [f"  - [{m.type}] {m.text[:100]}" for m in self.removed[:5]]
        lines += [f"  ~ [{new.type}] {new.text[:100]}" for _, new in self.changed[:5]]
        lines.append(
            f"switched: memstream up now serves {self.collection} (restart it to pick the switch up)"
            if self.switched
            else "live collection unchanged; run again with --switch to serve the shadow collection"
        )
        return "\n".join(lines)


def compare(
    live: list[Memory], shadow: list[Memory]
) -> tuple[list[Memory], list[Memory], list[tuple[Memory, Memory]], int]:
    """(added, removed, changed, unchanged) going from the live memories to the shadow ones."""
    before = {m.id: m for m in live}
    after = {m.id: m for m in shadow}
    added = [m for i, m in after.items() if i not in before]
    removed = [m for i, m in before.items() if i not in after]
    changed = [
        (before[i], m)
        for i, m in after.items()
        if i in before
        and (m.text, m.type, m.superseded_by) != (before[i].text, before[i].type, before[i].superseded_by)
    ]
    return added, removed, changed, len(after) - len(added) - len(changed)


_last_shown: dict[str, tuple[int, int]] = {}


def progress_bar(label: str, done: int, total: int, *, width: int = 30) -> None:
    """A one-line progress bar on stderr, redrawn only when it changes."""
    if _last_shown.get(label) == (done, total):
        return
    _last_shown[label] = (done, total)
    filled = width * done // total if total else width
    sys.stderr.write(f"\r{label:<16} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def replayable(turn: Turn, forgotten: Mapping[str, datetime]) -> Turn | None:
    """The turn as a replay may reprocess it, given the forgotten scopes (scope key: when).

    A turn of a forgotten project, said before the forget, is not replayed at all; one of a
    forgotten user is replayed without its user, so its project facts come back but nothing
    personal does (a personal fact without a user is dropped). Later turns are a new start.
    """
    project_forgotten = forgotten.get(project_key(turn.project))
    if project_forgotten is not None and turn.ts <= project_forgotten:
        return None
    user_forgotten = forgotten.get(user_key(turn.user)) if turn.user else None
    if user_forgotten is not None and turn.ts <= user_forgotten:
        return msgspec.structs.replace(turn, user="")
    return turn


async def read_forgotten(
    bootstrap: str, topic: str, *, security: Mapping[str, Any] | None = None
) -> dict[str, datetime]:
    """The ledger of forgotten scopes: scope key -> the latest forget of it."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **(security or {})
    )
    await consumer.start()
    ledger: dict[str, datetime] = {}
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return ledger
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        pending = {tp for tp in tps if ends[tp] > 0}
        await consumer.seek_to_beginning(*tps)
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    op = decode(record.value) if record.value else None
                    if isinstance(op, ForgetScope):
                        ledger[op.scope_key] = max(ledger.get(op.scope_key, op.forgotten_at), op.forgotten_at)
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return ledger
    finally:
        await consumer.stop()


async def copy_turns(
    bootstrap: str,
    source: str,
    target: str,
    start: Start,
    report: Callable[[int, int], None],
    forgotten: Mapping[str, datetime] | None = None,
    security: Mapping[str, Any] | None = None,
) -> int:
    """Copy the source topic's records from ``start`` to its current end into ``target``,
    leaving out (or taking the user off) the turns of forgotten scopes."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **(security or {})
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **(security or {}))
    await consumer.start()
    await producer.start()
    try:
        partitions = consumer.partitions_for_topic(source) or set()
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(source) or set()
        tps = [TopicPartition(source, p) for p in sorted(partitions)]
        if not tps:
            raise ReplayError(f"topic {source} does not exist or has no partitions")
        consumer.assign(tps)
        ends = await offsets.end_offsets(consumer, tps)  # ListOffsets is short of the end on Tansu
        begins = await consumer.beginning_offsets(tps)
        firsts = await _first_offsets(consumer, tps, begins, ends, start)
        for tp in tps:
            consumer.seek(tp, firsts[tp])
        total = sum(max(0, ends[tp] - firsts[tp]) for tp in tps)
        copied = 0
        report(copied, total)
        pending = {tp for tp in tps if firsts[tp] < ends[tp]}
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000)
            for tp, records in batch.items():
                for record in records:
                    if record.offset >= ends[tp]:
                        break
                    value = record.value
                    if forgotten:
                        turn = decode(value) if value else None
                        kept = replayable(turn, forgotten) if isinstance(turn, Turn) else turn
                        if kept is None:
                            continue
                        value = encode(kept) if kept is not turn else value
                    await producer.send(target, value, key=record.key)
                    copied += 1
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
            report(copied, total)
        await producer.flush()
        return copied
    finally:
        await consumer.stop()
        await producer.stop()


async def copy_logged_turns(
    settings: Settings,
    bootstrap: str,
    target: str,
    start: Start,
    report: Callable[[int, int], None],
    forgotten: Mapping[str, datetime] | None = None,
    security: Mapping[str, Any] | None = None,
) -> int:
    """Copy the durable turn log's turns (memstream.intake.turnlog), from its first or from
    ``start.timestamp``, into ``target``, in log order (each session's), leaving out (or taking the
    user off) the turns of forgotten scopes: on the embedded default the log holds every turn ever
    accepted (within MEMSTREAM_TURN_LOG_RETENTION_DAYS), the topic only those since `up` started."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **(security or {}))
    await producer.start()
    copied, after = 0, 0
    try:
        with TurnLog(turnlog.path_of(settings)) as log:
            total = await asyncio.to_thread(log.count)
            report(copied, total)
            while batch := await asyncio.to_thread(log.all, after):
                after = batch[-1].seq
                for item in batch:
                    turn = decode(item.event)
                    if not isinstance(turn, Turn):
                        continue
                    if start.timestamp is not None and turn.ts < start.timestamp:
                        continue
                    kept = replayable(turn, forgotten) if forgotten else turn
                    if kept is None:
                        continue
                    await producer.send(target, item.event if kept is turn else encode(kept), key=item.key.encode())
                    copied += 1
                report(copied, total)
        await producer.flush()
        return copied
    finally:
        await producer.stop()


def reads_log(settings: Settings, start: Start) -> bool:
    """Does a replay read the durable turn log (the embedded default, unless it starts at an offset)?"""
    return start.offset is None and turnlog.enabled(settings) and turnlog.path_of(settings).exists()


async def _first_offsets(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], begins: dict[Any, int], ends: dict[Any, int], start: Start
) -> dict[Any, int]:
    if start.offset is not None:
        return {tp: min(max(start.offset, begins[tp]), ends[tp]) for tp in tps}
    if start.timestamp is not None:
        found = await consumer.offsets_for_times({tp: int(start.timestamp.timestamp() * 1000) for tp in tps})
        return {tp: (found[tp].offset if found.get(tp) else ends[tp]) for tp in tps}
    return dict(begins)


async def drained(running: runner.Running, copied: int, report: Callable[[int, int], None], timeout: float) -> None:
    """Wait until every stage of the shadow pipeline has processed everything it was given:
    every copied turn taken, nothing left to read on any topic, no event read but not acked."""
    snapshot_done = metrics.EVENTS_PROCESSED.labels("snapshot")
    base = snapshot_done._value.get()  # the counter is process-wide; count this replay's share
    consumer = running.pipeline.app.consumer
    sources = {topic_name(running.settings.topic_prefix, spec) for spec in ALL_TOPICS}
    deadline = time.monotonic() + timeout
    idle_since: float | None = None
    while time.monotonic() < deadline:
        done = int(snapshot_done._value.get() - base)
        report(min(done, copied), copied)
        lag = 0
        for tp in consumer.assignment():
            if tp.topic not in sources:  # table changelogs are only read on recovery
                continue
            high = consumer.highwater(tp)
            # Faust keeps no public position; its ConsumerT type does not declare the private one.
            read = consumer._read_offset.get(tp)  # type: ignore[attr-defined]
            if high is not None:
                lag += max(0, high - (read + 1 if read is not None else 0))
        busy = sum(s.value for m in metrics.IN_FLIGHT.collect() for s in m.samples)
        # Read is not processed: a stage that batches (embed) or runs events side by side
        # (extract) has taken events it has not finished; Faust tracks them until acked.
        unacked = sum(1 for m in list(consumer.unacked) if not m.acked and m.topic in sources)
        if done >= copied and lag == 0 and busy == 0 and unacked == 0:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= IDLE_SECONDS:
                return
        else:
            idle_since = None
        await asyncio.sleep(0.2)
    raise ReplayError(f"the shadow pipeline did not drain within {timeout:.0f}s")


def live_memories(api_url: str, token: str = "") -> list[Memory]:
    """Every live memory, from the admin route of the running API (an admin token's)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"{api_url}/memories?limit=100000", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        data = json.loads(response.read())
    return [msgspec.convert(m, Memory) for m in data["memories"]]


async def replay(
    settings: Settings,
    *,
    name: str,
    bootstrap: str,
    api_url: str,
    start: Start = Start(),
    switch: bool = False,
    token: str = "",
    timeout: float = 3600.0,
    report: Callable[[str, int, int], None] = progress_bar,
) -> Summary:
    began = time.monotonic()
    quiet_payload_loggers()
    quiet_flow_control()
    embedder = build_embedder(settings)
    live_collection = active_collection(settings, embedder.model) or collection_name(embedder.model)
    collection = f"{collection_name(embedder.model)}__{name}"
    if collection == live_collection:
        raise ReplayError(f"{collection} is the live collection already; choose another --name")
    # Its own topics and its own data dir (audit history, Phase 2 workspace, table state),
    # so it never touches the live pipeline's; only its collection sits beside the live one.
    shadow = dataclasses.replace(
        settings,
        topic_prefix=f"{settings.topic_prefix}.replay-{name}",
        kafka_bootstrap=bootstrap,
        data_dir=settings.data_dir / "replays" / name,
    )
    security = client_options(settings)
    providers = build_providers(shadow, embedder=embedder, store=build_store(settings, embedder, collection=collection))
    running = await runner.start(shadow, providers, web=False, announce=False)
    # `up` must not start its embedded broker afresh under a replay (memstream.worker.recycle).
    write_process_file(replay_file(shadow.data_dir), {"name": name})
    try:
        forgotten = await read_forgotten(bootstrap, topic_name(settings.topic_prefix, FORGOTTEN), security=security)
        if reads_log(settings, start):
            copied = await copy_logged_turns(
                settings,
                bootstrap,
                topic_name(shadow.topic_prefix, TURNS),
                start,
                lambda done, total: report("copying turns", done, total),
                forgotten,
                security,
            )
        else:
            copied = await copy_turns(
                bootstrap,
                topic_name(settings.topic_prefix, TURNS),
                topic_name(shadow.topic_prefix, TURNS),
                start,
                lambda done, total: report("copying turns", done, total),
                forgotten,
                security,
            )
        await drained(running, copied, lambda done, total: report("reprocessing", done, total), timeout)
        shadow_memories = await providers.store.list(None, include_superseded=True, limit=1_000_000)
    finally:
        replay_file(shadow.data_dir).unlink(missing_ok=True)
        await running.stop()
    added, removed, changed, unchanged = compare(
        await asyncio.to_thread(live_memories, api_url, token), shadow_memories
    )
    if switch:
        _switch(settings, embedder.model, collection)
    return Summary(copied, collection, added, removed, changed, unchanged, time.monotonic() - began, switched=switch)


def _switch(settings: Settings, embedding_model: str, collection: str) -> None:
    path = settings.active_collections_file
    try:
        active = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        active = {}
    active[embedding_model] = collection
    path.write_text(json.dumps(active, indent=2))

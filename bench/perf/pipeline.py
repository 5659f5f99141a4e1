"""Pipeline benchmarks on the embedded default: throughput, order and latency.

Each run starts the real pipeline (Tansu, Qdrant edge, Faust agents) with a fake
Anthropic API on loopback that answers after a fixed latency, publishes sessions of
user/assistant turns, and follows memory-updated like a downstream service would.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from memstream.bootstrap import build_providers
from memstream.embed.base import DistanceProfile
from memstream.embed.bundled import BundledEmbedder
from memstream.identity import turn_key
from memstream.intake.publish import make_turn
from memstream.kafka import doorbell
from memstream.kafka.broker import free_port
from memstream.rules import decision
from memstream.schemas import MemoryUpdated, decode, encode
from memstream.settings import Settings
from memstream.telemetry import metrics
from memstream.topics import MEMORY_UPDATED, TURNS, topic_name
from memstream.worker import runner
from tests.fakes.anthropic_server import FakeAnthropic

#: One fact per assistant turn, tagged so its turn can be recognised downstream.
_TAG = "bench-turn"


class HashEmbedder:
    """An instant embedder: unit vectors from a hash of the text, for overhead runs."""

    model = "bench-hash-384"
    dim = 384
    profile = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=0.125)

    def _vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return (v / np.linalg.norm(v)).tolist()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    async def close(self) -> None:
        pass


class SlowAnthropic(FakeAnthropic):
    """The fake Anthropic API, answering every request after ``latency`` seconds (concurrently)."""

    def __init__(self, latency: float) -> None:
        super().__init__(_respond, api_key="sk-bench")
        self.latency = latency

    async def _scripted(self) -> Any:
        if self.latency:
            await self._sleep(self.latency)
        return None


@contextmanager
def fake_llm(latency: float) -> Iterator[str]:
    """A :class:`SlowAnthropic` in a process of its own; yields its base URL.

    In a thread of the benchmark's process, the fake would take the GIL from the pipeline
    it is measuring (py-spy: ~13% of the samples under load); a real LLM runs elsewhere.
    """
    parent, child = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=_serve_fake, args=(latency, child), daemon=True)
    process.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the fake LLM process did not start")
        yield parent.recv()
    finally:
        parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()


def _serve_fake(latency: float, conn: Any) -> None:
    with SlowAnthropic(latency) as fake:
        conn.send(fake.base_url)
        conn.recv()


async def start(
    data_dir: Path, llm_url: str, embedder: str, overrides: Mapping[str, Any] | None = None
) -> tuple[Settings, runner.Running]:
    """The pipeline under test: the fake LLM at ``llm_url``, no retries, no summary turns."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "topic_prefix": f"bench{uuid.uuid4().hex[:6]}",
        "http_port": free_port(),
        "anthropic_api_key": "sk-bench",
        "anthropic_base_url": llm_url,
        "llm_retries": 0,
        "summary_every": 10_000,
    }
    # ``anthropic_api_key=""`` among the overrides runs raw mode: no LLM, exchanges stored as they are.
    settings = Settings.from_env({}, **{**values, **(overrides or {})})
    chosen = HashEmbedder() if embedder == "fake" else BundledEmbedder(threads=settings.embed_threads)
    return settings, await runner.start(settings, build_providers(settings, embedder=chosen), web=False)


def _respond(request: dict[str, Any]) -> str:
    system = str(request.get("system", ""))
    if "supersede" in system.lower():
        return '{"superseded": []}'
    if system == decision.SYSTEM:
        return '{"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "a new fact"}'
    content = request["messages"][-1]["content"]
    lines = [line for line in content.splitlines() if line.startswith("[assistant]")]
    tag = lines[-1].split(_TAG, 1)[1].split()[0] if lines and _TAG in lines[-1] else "none"
    return json.dumps(
        {
            "memories": [
                {
                    "memory": f"Fact recorded for {_TAG} {tag} in this project",
                    "type": "learned-pattern",
                    "confidence": 0.9,
                }
            ]
        }
    )


@dataclass
class Result:
    sessions: int
    turns: int
    seconds: float
    turns_per_s: float
    p50_ms: float
    p99_ms: float
    llm_ms_mean: float
    embed_ms_mean: float
    order_kept: bool
    #: CPU time of the pipeline's process per turn (all its threads; not the broker's or the
    #: fake LLM's). Steadier than turns/s on a shared machine, so optimisations compare on it.
    cpu_ms_per_turn: float
    #: Events the stages consumed per turn: each one a Faust hop (``bench.perf.floor``).
    events_per_turn: float
    #: LLM calls per turn by the stage that made them, and all calls' tokens per turn (the fake
    #: LLM counts words as tokens, as the fake OpenAI server does for mem0).
    llm_calls_by_stage: dict[str, float] = field(default_factory=dict)
    input_tokens_per_turn: float = 0.0
    output_tokens_per_turn: float = 0.0
    #: Records written per turn: every topic's records but the turns themselves, events and
    #: table changelogs apart (each one a producer send, and each event a consumer's hop too).
    event_records_per_turn: float = 0.0
    changelog_records_per_turn: float = 0.0

    @property
    def llm_calls_per_turn(self) -> float:
        return sum(self.llm_calls_by_stage.values())


async def run(
    *,
    sessions: int,
    turns_per_session: int,
    llm_latency: float,
    embedder: str = "bundled",
    timeout: float = 600,
    overrides: Mapping[str, Any] | None = None,
    replies: Sequence[str] = (),
    projects: int = 0,
) -> Result:
    """Publish ``sessions`` × ``turns_per_session`` assistant turns; wait for every fact's memory.

    ``overrides`` are settings to run with (``fetch_max_wait_ms=5``, say), to compare them.
    ``replies``: assistant texts to cycle through, each after the turn's tag (raw-mode ingest
    of realistic exchanges); the default reply is the tag alone. ``projects``: how many projects
    the sessions share (a backlog of one project: 1); 0, the default, gives each session its own.
    """
    with tempfile.TemporaryDirectory() as tmp, fake_llm(llm_latency) as llm_url:
        settings, running = await start(Path(tmp), llm_url, embedder, overrides)
        seconds_before = _sum(metrics.LLM_SECONDS), _count(metrics.LLM_SECONDS)
        embed_before = _sum(metrics.EMBED_SECONDS), _count(metrics.EMBED_SECONDS)
        cpu_before = time.process_time()
        events_before = _total(metrics.EVENTS_PROCESSED)
        llm_before = _by_label(metrics.LLM_STAGE_CALLS, "stage"), _by_label(metrics.LLM_STAGE_TOKENS, "kind")
        try:
            sent, seen, order = await _drive(running, settings, sessions, turns_per_session, timeout, replies, projects)
            cpu = time.process_time() - cpu_before
            events = _total(metrics.EVENTS_PROCESSED) - events_before
            # The stages after memory-updated (contradiction, graph, history) finish the last
            # turns after the drive saw them: counts are read once the pipeline is quiet.
            await _quiet()
            stage_calls = _by_label(metrics.LLM_STAGE_CALLS, "stage")
            tokens = _by_label(metrics.LLM_STAGE_TOKENS, "kind")
            event_records, changelog_records = await records_written(running.bootstrap, settings.topic_prefix)
        finally:
            await running.stop()
    llm_calls = _count(metrics.LLM_SECONDS) - seconds_before[1]
    embeds = _count(metrics.EMBED_SECONDS) - embed_before[1]
    latencies = [seen[key] - sent[key] for key in seen]
    total = sessions * turns_per_session
    span = max(seen.values()) - min(sent.values())
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return Result(
        sessions=sessions,
        turns=total,
        seconds=span,
        turns_per_s=total / span,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=quantiles[98] * 1000,
        llm_ms_mean=(_sum(metrics.LLM_SECONDS) - seconds_before[0]) / max(1, llm_calls) * 1000,
        embed_ms_mean=(_sum(metrics.EMBED_SECONDS) - embed_before[0]) / max(1, embeds) * 1000,
        order_kept=order,
        cpu_ms_per_turn=cpu / total * 1000,
        events_per_turn=events / total,
        llm_calls_by_stage={
            stage: (n - llm_before[0].get(stage, 0.0)) / total
            for stage, n in stage_calls.items()
            if n > llm_before[0].get(stage, 0.0)
        },
        input_tokens_per_turn=(tokens.get("input", 0.0) - llm_before[1].get("input", 0.0)) / total,
        output_tokens_per_turn=(tokens.get("output", 0.0) - llm_before[1].get("output", 0.0)) / total,
        event_records_per_turn=event_records / total,
        changelog_records_per_turn=changelog_records / total,
    )


@dataclass(frozen=True)
class IdleCpu:
    """Share of one core a started, idle pipeline uses: its own process and the embedded broker."""

    worker_pct: float
    broker_pct: float

    @property
    def total_pct(self) -> float:
        return self.worker_pct + self.broker_pct


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(
    *, seconds: float = 20.0, settle: float = 8.0, overrides: Mapping[str, Any] | None = None
) -> IdleCpu:
    """What memstream costs beside a coding agent between turns: a pipeline started with
    ``overrides``, left ``settle`` seconds to finish starting, then measured ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp, fake_llm(0.0) as llm_url:
        _, running = await start(Path(tmp), llm_url, "fake", overrides)
        try:
            if running.broker is None or running.broker.pid is None:
                raise RuntimeError("idle_cpu measures the embedded broker's process: no broker was started")
            pid = running.broker.pid
            await asyncio.sleep(settle)
            began, worker, broker = time.monotonic(), time.process_time(), _cpu_seconds(pid)
            await asyncio.sleep(seconds)
            elapsed = time.monotonic() - began
            return IdleCpu(
                worker_pct=100 * (time.process_time() - worker) / elapsed,
                broker_pct=100 * (_cpu_seconds(pid) - broker) / elapsed,
            )
        finally:
            await running.stop()


async def _quiet(seconds: float = 1.0, timeout: float = 15.0) -> None:
    """Wait until no stage has processed an event for ``seconds`` (at most ``timeout``)."""
    deadline = time.monotonic() + timeout
    last, since = _total(metrics.EVENTS_PROCESSED), time.monotonic()
    while time.monotonic() - since < seconds and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        now = _total(metrics.EVENTS_PROCESSED)
        if now != last:
            last, since = now, time.monotonic()


async def records_written(bootstrap: str, prefix: str) -> tuple[int, int]:
    """Records in the run's topics (its prefix), turns excluded: (events, table changelogs)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        turns = topic_name(prefix, TURNS)
        names = [t for t in await consumer.topics() if t.startswith(prefix) and t != turns]
        partitions = [TopicPartition(t, p) for t in names for p in sorted(consumer.partitions_for_topic(t) or ())]
        ends = await consumer.end_offsets(partitions) if partitions else {}
    finally:
        await consumer.stop()
    changelogs = sum(n for tp, n in ends.items() if tp.topic.endswith("-changelog"))
    return sum(ends.values()) - changelogs, changelogs


def reply_text(session: int, turn: int, sessions: int, replies: Sequence[str]) -> str:
    """The assistant's reply in turn ``turn`` of session ``session``: its tag, then a reply text if any."""
    tagged = f"answer {_TAG} {session}.{turn} done"
    return f"{tagged} {replies[(turn * sessions + session) % len(replies)]}" if replies else tagged


async def _drive(
    running: runner.Running,
    settings: Settings,
    sessions: int,
    turns: int,
    timeout: float,
    replies: Sequence[str] = (),
    projects: int = 0,
) -> tuple[dict[str, float], dict[str, float], bool]:
    consumer = AIOKafkaConsumer(
        topic_name(settings.topic_prefix, MEMORY_UPDATED),
        bootstrap_servers=running.bootstrap,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap, linger_ms=5)
    await consumer.start()
    await producer.start()
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    last_turn: dict[str, int] = {}
    order_kept = True
    start = datetime.now(UTC)
    try:
        turns_topic = topic_name(settings.topic_prefix, TURNS)
        for t in range(turns):
            for s in range(sessions):
                session = f"s{s}"
                project = f"/bench/project-{s % projects if projects else s}"
                ts = start + timedelta(seconds=t)
                user = make_turn(session_id=session, project=project, role="user", content=f"question {t}", ts=ts)
                content = reply_text(s, t, sessions, replies)
                reply = make_turn(session_id=session, project=project, role="assistant", content=content, ts=ts)
                await producer.send(turns_topic, encode(user), key=turn_key(user))
                sent[f"{s}.{t}"] = time.monotonic()
                await producer.send(turns_topic, encode(reply), key=turn_key(reply))
        await producer.flush()
        doorbell.ring(running.bootstrap)  # as memstream's publishers do: an idle worker starts at once
        deadline = time.monotonic() + timeout
        while len(seen) < sessions * turns:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(seen)} of {sessions * turns} turns became memories within {timeout}s")
            batch = await consumer.getmany(timeout_ms=200)
            now = time.monotonic()
            for records in batch.values():
                for record in records:
                    event = decode(record.value)
                    # A near-identical fact refreshes the memory before it instead of creating one.
                    if (
                        not isinstance(event, MemoryUpdated)
                        or event.change not in ("created", "refreshed")
                        or _TAG not in event.memory.text
                    ):
                        continue
                    key = event.memory.text.split(_TAG, 1)[1].split()[0]
                    seen.setdefault(key, now)
                    session_no, turn_text = key.split(".")
                    turn_no = int(turn_text)
                    if turn_no < last_turn.get(session_no, -1):
                        order_kept = False
                    last_turn[session_no] = max(last_turn.get(session_no, -1), turn_no)
    finally:
        await consumer.stop()
        await producer.stop()
    return sent, seen, order_kept


def _sum(histogram: Any) -> float:
    return sum(s.value for m in histogram.collect() for s in m.samples if s.name.endswith("_sum"))


def _total(counter: Any) -> float:
    return sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total"))


def _by_label(counter: Any, label: str) -> dict[str, float]:
    """A counter's totals summed by one of its labels."""
    totals: dict[str, float] = {}
    for m in counter.collect():
        for sample in m.samples:
            if sample.name.endswith("_total"):
                key = sample.labels[label]
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def _count(histogram: Any) -> float:
    return sum(s.value for m in histogram.collect() for s in m.samples if s.name.endswith("_count"))


async def run_sequential(
    *,
    turns: int,
    embedder: str = "bundled",
    timeout: float = 120,
    overrides: Mapping[str, Any] | None = None,
    pause: float = 0.0,
    ring: bool = True,
) -> dict[str, float]:
    """One turn at a time, each published after the previous one's memory arrived and ``pause``
    seconds of quiet (a developer's pace: the worker's fetches wait longest then, see
    ``memstream.kafka.fetch_wait.FetchWait``); ``overrides``: settings to run with, as for :func:`run`.
    ``ring``: ring the doorbell after each turn, as memstream's publishers do (``memstream.kafka.doorbell``);
    False measures a publisher that does not, whose turns wait out the worker's idle pause.

    The pipeline's own share is each latency minus the mean LLM call and embedding batch
    times measured over the same run: the two outside services on the turn's path. Two
    warm-up turns go first, unmeasured: the first opens the LLM connection and loads the
    embedding model (~200 ms and more), which would otherwise be the p99 of a short run.
    """
    with tempfile.TemporaryDirectory() as tmp, fake_llm(0.0) as llm_url:
        settings, running = await start(Path(tmp), llm_url, embedder, overrides)
        await one_turn_at_a_time(running, settings, 2, "warm-up", timeout, ring=ring)
        llm_before = _sum(metrics.LLM_SECONDS), _count(metrics.LLM_SECONDS)
        embed_before = _sum(metrics.EMBED_SECONDS), _count(metrics.EMBED_SECONDS)
        try:
            latencies = await one_turn_at_a_time(running, settings, turns, "sequential", timeout, pause, ring)
        finally:
            await running.stop()
    llm_ms = (_sum(metrics.LLM_SECONDS) - llm_before[0]) / max(1, _count(metrics.LLM_SECONDS) - llm_before[1]) * 1000
    embed_ms = (
        (_sum(metrics.EMBED_SECONDS) - embed_before[0]) / max(1, _count(metrics.EMBED_SECONDS) - embed_before[1]) * 1000
    )
    ms = sorted(x * 1000 for x in latencies)
    own = sorted(max(0.0, x - llm_ms - embed_ms) for x in ms)
    return {
        "p50_ms": statistics.median(ms),
        "p99_ms": _p99(ms),
        "llm_ms": llm_ms,
        "embed_ms": embed_ms,
        "own_p50_ms": statistics.median(own),
        "own_p99_ms": _p99(own),
    }


def session_of(name: str, i: int) -> tuple[str, str]:
    """The session and project of the ``i``-th turn of a one-at-a-time run called ``name``."""
    return f"{name}-{i}", f"/bench/{name}-{i}"


async def one_turn_at_a_time(
    running: runner.Running,
    settings: Settings,
    turns: int,
    name: str,
    timeout: float = 120,
    pause: float = 0.0,
    ring: bool = True,
) -> list[float]:
    """Publish ``turns`` user/assistant exchanges, each in a session (and project) of its
    own and each after the previous one's memory arrived and ``pause`` seconds of quiet;
    returns their latencies (s). ``ring``: ring the worker's doorbell after each, as
    ``memstream.intake.publish`` does."""
    consumer = AIOKafkaConsumer(
        topic_name(settings.topic_prefix, MEMORY_UPDATED),
        bootstrap_servers=running.bootstrap,
        auto_offset_reset="earliest",
        # Tansu holds a fetch for its whole wait, even when data arrives: aiokafka's
        # default 500 ms would be measured as pipeline latency.
        fetch_max_wait_ms=settings.effective_fetch_max_wait_ms,
    )
    producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap)
    await consumer.start()
    await producer.start()
    latencies: list[float] = []
    try:
        turns_topic = topic_name(settings.topic_prefix, TURNS)
        for i in range(turns):
            await asyncio.sleep(pause)
            session, project = session_of(name, i)
            now = datetime.now(UTC)
            question = make_turn(session_id=session, project=project, role="user", content="q", ts=now)
            await producer.send_and_wait(turns_topic, encode(question), key=turn_key(question))
            reply = make_turn(
                session_id=session, project=project, role="assistant", content=f"a {_TAG} {name}.{i} done", ts=now
            )
            sent = time.monotonic()
            await producer.send_and_wait(turns_topic, encode(reply), key=turn_key(reply))
            if ring:
                doorbell.ring(running.bootstrap)
            # The run's name is in the needle: the consumer reads from the start, earlier runs included.
            while not await _arrived(consumer, f"{_TAG} {name}.{i} "):
                if time.monotonic() > sent + timeout:
                    raise TimeoutError(f"turn {i} did not become a memory within {timeout}s")
            latencies.append(time.monotonic() - sent)
    finally:
        await consumer.stop()
        await producer.stop()
    return latencies


async def _arrived(consumer: AIOKafkaConsumer, needle: str) -> bool:
    batch = await consumer.getmany(timeout_ms=100)
    for records in batch.values():
        for record in records:
            event = decode(record.value)
            if isinstance(event, MemoryUpdated) and needle in event.memory.text + " ":
                return True
    return False


def _p99(sorted_ms: list[float]) -> float:
    return statistics.quantiles(sorted_ms, n=100)[98] if len(sorted_ms) > 1 else sorted_ms[0]

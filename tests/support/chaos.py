"""The fault-injection harness: real `memstream up` workers on an external embedded broker.

The broker runs in this process's control (``EmbeddedBroker``), the worker is a real
``python -m memstream.cli up`` subprocess on it, so ``kill -9`` of the worker leaves the
broker, its topics and changelogs alive, as a crash in production would. Raw mode (no LLM):
every exchange becomes exactly one ``conversation`` memory whose text is known in advance,
so the stored memories are compared with the exact expected set.

``tests/faults`` runs small versions of the scenarios in the test suite; ``python -m bench.faults.chaos``
(``make chaos``) runs the heavy version from the same harness and prints its figures.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.identity import turn_key
from memstream.intake.publish import publish, publish_events
from memstream.kafka.broker import EmbeddedBroker, free_port
from memstream.schemas import Turn, encode
from memstream.topics import TURNS
from tests.support.group import GROUP_ENV

ROOT = Path(__file__).resolve().parents[2]
HOLD = Path(__file__).resolve().parent / "hold"  # the sitecustomize hold_run puts first on a worker's path


@dataclass
class Outcome:
    """What a run stored against what it should have stored."""

    expected: int
    stored: int
    lost: int
    duplicated: int
    corrupted: int
    kills: int = 0
    seconds: float = 0.0
    notes: dict[str, object] = field(default_factory=dict)

    def render(self) -> str:
        extra = "".join(f", {k} {v}" for k, v in self.notes.items() if k != "trace")
        return (
            f"expected {self.expected}, stored {self.stored}: lost {self.lost}, duplicated {self.duplicated}, "
            f"corrupted {self.corrupted} ({self.kills} kills, {self.seconds:.0f}s{extra})"
            + str(self.notes.get("trace", ""))
        )


#: Words the exchanges are drawn from: random draws keep every exchange far from every other
#: for the embedder, so semantic dedup (distance 0.05 for the bundled model) merges none.
_WORDS = """apple river kernel socket tensor garden violin compiler harbor pixel lattice meadow quartz rocket
saddle thunder velvet walnut yogurt zebra anchor biscuit canyon dolphin engine falcon glacier hammer igloo jasmine
kettle lantern mosaic nectar orchid pepper quiver raven sapphire tulip umbrella vortex whistle xenon yacht zipper
acorn bamboo cactus daisy ember fjord gravel hazel ivory jungle koala lemon mango nickel olive parrot quokka radish
salmon tiger urchin vanilla willow yarrow zinc amber beacon cobalt dune eclipse fossil granite harvest island jigsaw
kayak lagoon magnet nebula oyster pebble quasar reef summit tundra utensil valley wombat yodel zenith"""
WORDS = _WORDS.split()


def exchange_text(question: str, answer: str) -> str:
    """The memory raw mode stores for one exchange (the store keeps single spaces)."""
    return normalized(f"[user] {question}\n[assistant] {answer}")


def normalized(text: str) -> str:
    return " ".join(text.split())


def workload(
    sessions: int, exchanges: int, root: str, *, seed: int = 0, projects: int | None = None, user: str = "chaos-user"
) -> tuple[list[Turn], list[str]]:
    """Turns interleaved across sessions, and the memory texts they must become.

    Session ``s`` works in project ``s % projects`` (default: one project per session); every
    turn names ``user``, as every turn through the CLI, the API and the hooks does (raw mode
    drops a personal exchange of a turn that names no user). The words are drawn at random,
    so semantic dedup, which compares memories within a project, merges none."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    turns: list[Turn] = []
    expected: list[str] = []
    projects = projects or sessions
    for e in range(exchanges):
        for s in range(sessions):
            question = f"{' '.join(rng.sample(WORDS, 12))} {s}-{e}?"
            answer = f"{' '.join(rng.sample(WORDS, 12))}."
            for role, content in (("user", question), ("assistant", answer)):
                turn = Turn(
                    session_id=f"s{s}",
                    project=f"{root}/p{s % projects}",
                    role=role,  # type: ignore[arg-type]
                    content=content,
                    ts=now,
                    user=user,
                )
                turns.append(turn)
            expected.append(exchange_text(question, answer))
    return turns, expected


def compare(expected: list[str], stored: list[str]) -> tuple[int, int, int]:
    """(lost, duplicated, corrupted): expected texts missing, extra copies, texts never expected."""
    want = set(expected)
    counts = collections.Counter(normalized(text) for text in stored)
    lost = len(want - set(counts))
    duplicated = sum(n - 1 for text, n in counts.items() if n > 1 and text in want)
    corrupted = sum(n for text, n in counts.items() if text not in want)
    return lost, duplicated, corrupted


class Worker:
    """One `memstream up` subprocess; started again on the same data dir after a kill.

    Each start listens on a port of its own: the port a kill frees can be taken by another
    process (another test's worker) before the restart binds it, and a worker that cannot
    bind its port exits. One that exits so is started again on a new port (:meth:`wait_up`)."""

    #: Starts again after an "address already in use", per wait.
    PORT_RETRIES = 3

    def __init__(self, env: dict[str, str], data_dir: Path, log: Path):
        self.env = env
        self.data_dir = data_dir
        self.log = log
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log_at = 0  # the log's size when this process started

    def start(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "MEMSTREAM_DATA_DIR": str(self.data_dir), "MEMSTREAM_HTTP_PORT": str(self.port)}
        self._log_at = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memstream.cli", "up"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=self.data_dir.parent,
            )

    def _port_was_taken(self) -> bool:
        """Did this process exit because another held its port?"""
        try:
            with open(self.log, "rb") as log:
                log.seek(self._log_at)
                return b"address already in use" in log.read().lower()  # memstream's check or uvicorn's
        except FileNotFoundError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    async def dump(self) -> str:
        """What the running worker is doing: its SIGUSR1 report (memstream.telemetry.dump) less
        the threads' stacks, which stay in its log. For a run that did not settle."""
        if self.process is None or self.process.poll() is not None:
            return ""
        size = self.log.stat().st_size if self.log.exists() else 0
        self.process.send_signal(signal.SIGUSR1)
        await asyncio.sleep(2.0)
        text = (await asyncio.to_thread(self.log.read_bytes))[size:].decode(errors="replace")
        report = text.split("--- threads")[0].splitlines()
        return f"\n  worker at the end of the run (SIGUSR1; {self.log}):\n" + "\n".join(
            f"    {line}" for line in report
        )

    def get(self, path: str, timeout: float = 10) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    async def memory_texts(self) -> list[str] | None:
        self.alive()  # another process may answer on its port: only a live worker's answer counts
        data = await asyncio.to_thread(self.get, "/memories?limit=100000", 30)
        if data is None:
            return None
        return [str(m["text"]) for m in data["memories"]]

    async def wait_up(self, timeout: float = 120) -> None:
        """Until this worker is ready: its own process wrote itself ready in its data dir and
        ``/health`` answers. Another process may answer on its port (:class:`Worker`): that
        answer does not count, and a worker that exited for want of its port starts again."""
        deadline = time.monotonic() + timeout
        retries = self.PORT_RETRIES
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None and retries and await asyncio.to_thread(self._port_was_taken):
                retries -= 1
                self.start()
                continue
            self.alive()
            if self.ready() and await asyncio.to_thread(self.get, "/health", 2) is not None:
                self.alive()  # it did not exit meanwhile
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"worker not up within {timeout}s; see {self.log}")

    def alive(self) -> None:
        """Raise if the worker's process has exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"worker exited with {self.process.returncode}; see {self.log}")

    def ready(self) -> bool:
        """Has this very process written itself ready in its data dir (``memstream up``'s runtime file)?"""
        try:
            runtime = json.loads((self.data_dir / "runtime.json").read_text())
        except (OSError, ValueError):
            return False
        return bool(runtime.get("ready")) and self.process is not None and runtime.get("pid") == self.process.pid


def worker_env(bootstrap: str, prefix: str, **extra: str) -> dict[str, str]:
    """A clean environment: raw mode unless ``extra`` configures an LLM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_", "XAI_"))}
    env.pop("GEMINI_API_KEY", None)
    env.pop("GOOGLE_API_KEY", None)
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "MEMSTREAM_KAFKA_BOOTSTRAP": bootstrap,
        "MEMSTREAM_TOPIC_PREFIX": prefix,
        "MEMSTREAM_PARTITIONS": "2",
        # Info: a run that fails tells how the worker joined its group and recovered its tables.
        "MEMSTREAM_LOG_LEVEL": os.environ.get("CHAOS_WORKER_LOG_LEVEL", "info"),
        # The harness reads /memories as the one local user: open on loopback, no token to pass.
        "MEMSTREAM_API_OPEN": "true",
        "MEMSTREAM_HTTP_HOST": "127.0.0.1",
        **GROUP_ENV,
        **extra,
    }


@contextmanager
def external_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


async def drained(bootstrap: str, prefix: str) -> bool:
    """Has the worker's group committed every record of the stages a turn goes through?

    A lost event is committed past too, so this says the pipeline is done, not that it is whole."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from memstream.kafka import offsets
    from memstream.topics import EMBEDDED, FACTS, MEMORY_OPS, SNAPSHOTS, TURNS, topic_name

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=prefix, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = []
        for spec in (TURNS, SNAPSHOTS, FACTS, EMBEDDED, MEMORY_OPS):
            topic = topic_name(prefix, spec)
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                await consumer._client.force_metadata_update()
                partitions = consumer.partitions_for_topic(topic) or set()
            tps += [TopicPartition(topic, p) for p in sorted(partitions)]
        ends = await offsets.end_offsets(consumer, tps)
        begins = await consumer.beginning_offsets(tps)
        for tp in tps:
            if ends[tp] > begins[tp] and (await consumer.committed(tp) or 0) < ends[tp]:
                return False
        return True
    finally:
        await consumer.stop()


async def settle(
    worker: Worker, expected: list[str], timeout: float, *, broker: str | None = None, prefix: str | None = None
) -> list[str]:
    """The stored texts once every expected one is there and nothing more arrived for 3 s, or
    (given the broker and topic prefix) once the worker's group committed every record of the
    turn path and nothing more arrived for 3 s: what is lost then stays lost; or at the
    deadline: what is there then."""
    deadline = time.monotonic() + timeout
    want = set(expected)
    last: list[str] = []
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        texts = await worker.memory_texts()
        if texts is not None:
            if len(texts) != len(last):
                stable_since = time.monotonic()
            last = texts
            if time.monotonic() - stable_since >= 3.0:
                if want <= {normalized(t) for t in texts}:
                    return texts
                if broker is not None and prefix is not None and await drained(broker, prefix):
                    return texts
        await asyncio.sleep(0.5)
    return last


async def kill_run(
    workdir: Path,
    *,
    sessions: int,
    exchanges: int,
    kills: int,
    seed: int = 0,
    timeout: float = 300,
    feed_seconds: float | None = None,
    projects: int | None = None,
    rate: float | None = None,
    kill_every: float | None = None,
    bare_keys: bool = False,
) -> Outcome:
    """Publish ``sessions * exchanges`` exchanges while the worker is killed (SIGKILL) ``kills``
    times and restarted on its data dir each time, with the broker kept up.

    The pace is ``rate`` turns/s (default: all turns over ``feed_seconds``, itself 8 s per kill
    by default). With ``kill_every``, the kills come at random instants, uniformly drawn over
    0-2 x ``kill_every`` s after the previous restart began, so that they land across the whole
    turn path: while the restarted worker recovers its tables and joins its group, while its
    first batches are in flight, and in steady flow. Without it, each kill comes 1-4 s after
    the worker answered again. Publishing never pauses for a kill. ``bare_keys``: the turns are
    keyed by their session id alone, as a host writing to Kafka with its own producer may key them
    (the snapshot stage re-publishes each under its session key)."""
    began = time.monotonic()
    rng = random.Random(seed)
    turns, expected = workload(sessions, exchanges, str(workdir / "projects"), seed=seed, projects=projects)
    pace = 0.2
    if rate is not None:
        chunk = max(1, round(rate * pace))
    else:
        feed_for = feed_seconds if feed_seconds is not None else 8.0 * max(1, kills)
        chunk = max(1, int(len(turns) * pace / feed_for))
    with external_broker() as broker:
        prefix = f"chaos{uuid.uuid4().hex[:8]}"
        worker = Worker(worker_env(broker.bootstrap, prefix), workdir / "data", workdir / "worker.log")
        worker.start()
        done = 0
        try:
            await worker.wait_up()

            async def feed() -> None:
                started = time.monotonic()
                for n, i in enumerate(range(0, len(turns), chunk)):
                    if bare_keys:
                        keyed = [(t.session_id, t) for t in turns[i : i + chunk]]
                        await publish_events(broker.bootstrap, prefix, TURNS, keyed)
                    else:
                        await publish(broker.bootstrap, prefix, turns[i : i + chunk])
                    # Steady on the wall clock: a slow publish does not slow the pace.
                    await asyncio.sleep(max(0.0, started + (n + 1) * pace - time.monotonic()))

            feeding = asyncio.create_task(feed())
            while done < kills:
                if kill_every is not None:
                    await asyncio.sleep(rng.uniform(0.0, 2 * kill_every))
                else:
                    await asyncio.sleep(rng.uniform(1.0, 4.0))
                worker.kill()
                done += 1
                worker.start()
                if kill_every is None:
                    await worker.wait_up()
            await worker.wait_up()
            await feeding
            stored = await settle(worker, expected, timeout, broker=broker.bootstrap, prefix=prefix)
            missing = sorted(set(expected) - {normalized(t) for t in stored})
            trace = await trace_lost(broker.bootstrap, prefix, missing) + await worker.dump() if missing else ""
        finally:
            worker.stop()
    lost, duplicated, corrupted = compare(expected, stored)
    wrong = sorted({normalized(t) for t in stored} - set(expected))
    trace += "".join(f"\n  stored, never published: {text}" for text in wrong[:5])
    notes: dict[str, object] = {"trace": trace} if trace else {}
    return Outcome(len(expected), len(stored), lost, duplicated, corrupted, done, time.monotonic() - began, notes)


async def hold_run(
    workdir: Path, *, topic: str, sessions: int = 3, exchanges: int = 2, timeout: float = 180
) -> Outcome:
    """Kill a worker while the records it sent to ``topic`` are accepted but not yet on the broker.

    The worker runs with ``tests/support/hold`` (its ``sitecustomize``): the producer keeps every batch
    of ``topic`` while everything else -- the other outputs, the tables' changelogs -- goes out.
    Once a batch has been held 2 s the worker is killed and started again without the hold, on
    the same data dir and broker. A stage that recorded an event as done in its table before its
    output reached the broker skips the event when it comes again, and the exchange is lost."""
    began = time.monotonic()
    turns, expected = workload(sessions, exchanges, str(workdir / "projects"), seed=7)
    mark = workdir / "held"
    with external_broker() as broker:
        prefix = f"hold{uuid.uuid4().hex[:8]}"
        env = worker_env(broker.bootstrap, prefix)
        held = {
            **env,
            "PYTHONPATH": os.pathsep.join([str(HOLD), env["PYTHONPATH"]]),
            "CHAOS_HOLD_TOPIC": topic,
            "CHAOS_HOLD_MARK": str(mark),
        }
        worker = Worker(held, workdir / "data", workdir / "worker.log")
        worker.start()
        try:
            await worker.wait_up()
            await publish(broker.bootstrap, prefix, turns)
            deadline = time.monotonic() + timeout
            while not mark.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no record of {topic!r} was held within {timeout}s{await worker.dump()}")
                await asyncio.sleep(0.1)
            worker.kill()
            worker.env = env
            worker.start()
            await worker.wait_up()
            stored = await settle(worker, expected, timeout, broker=broker.bootstrap, prefix=prefix)
            missing = sorted(set(expected) - {normalized(t) for t in stored})
            trace = await trace_lost(broker.bootstrap, prefix, missing) + await worker.dump() if missing else ""
        finally:
            worker.stop()
    lost, duplicated, corrupted = compare(expected, stored)
    notes: dict[str, object] = {"held": mark.read_text()}
    if trace:
        notes["trace"] = trace
    return Outcome(len(expected), len(stored), lost, duplicated, corrupted, 1, time.monotonic() - began, notes)


async def trace_lost(bootstrap: str, prefix: str, missing: list[str]) -> str:
    """Where each lost exchange stopped: the last topic of the turn path whose records hold its
    question, the record's partition and offset there, and the group's committed offset on that
    partition (an offset past it: the next stage's commit passed it unprocessed); and where its
    answer was read on the turns topic, and whether the snapshot stage's table (its changelog)
    ever held the answer in the session's window (applied, yet no snapshot made) or not (never
    applied), or a dead letter names it."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from memstream.kafka import offsets
    from memstream.topics import DEAD_LETTERS, EMBEDDED, FACTS, MEMORY_OPS, MEMORY_UPDATED, SNAPSHOTS, TURNS, topic_name

    path = [
        (spec.name, topic_name(prefix, spec))
        for spec in (TURNS, SNAPSHOTS, FACTS, EMBEDDED, MEMORY_OPS, MEMORY_UPDATED)
    ]
    extra = [("window", f"{prefix}-snapshot-sessions-changelog"), ("dead-letters", topic_name(prefix, DEAD_LETTERS))]
    halves = {text: text.split(" [assistant] ") for text in missing}
    needles = {text: (q.removeprefix("[user] ").encode(), a.encode()) for text, (q, a) in halves.items()}
    found: dict[str, dict[str, tuple[int, int, int | None]]] = {text: {} for text in missing}
    answers: dict[str, tuple[int, int]] = {}
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=prefix, enable_auto_commit=False)
    await consumer.start()
    await consumer.topics()  # the metadata of every topic, the tables' changelogs too
    # Read before the first assign: it narrows the client's metadata to the assigned topic, and
    # every topic after the first was skipped (a lost exchange was "never in a window").
    partitions = {topic: sorted(consumer.partitions_for_topic(topic) or []) for _, topic in path + extra}
    try:
        for label, topic in path + extra:
            tps = [TopicPartition(topic, p) for p in partitions[topic]]
            if not tps:
                continue
            ends = await offsets.end_offsets(consumer, tps)
            committed = {tp: await consumer.committed(tp) for tp in tps}
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            remaining = {tp for tp in tps if ends[tp] > 0}
            # To each partition's end: on a loaded machine a fetch may come back empty for seconds.
            until = time.monotonic() + 60
            while remaining and time.monotonic() < until:
                batch = await consumer.getmany(*remaining, timeout_ms=2000)
                for tp, records in batch.items():
                    for record in records:
                        for text, (question, answer) in needles.items():
                            if not record.value:
                                continue
                            if question in record.value or (label == "window" and answer in record.value):
                                found[text][label] = (tp.partition, record.offset, committed[tp])
                            if label == "turns" and answer in record.value and question not in record.value:
                                answers[text] = (tp.partition, record.offset)
                        if record.offset + 1 >= ends[tp]:
                            remaining.discard(tp)
    finally:
        await consumer.stop()
    lines = []
    for text in missing:
        reached = [label for label, _ in path if label in found[text]]
        last = reached[-1] if reached else "nowhere"
        where = found[text].get(last)
        at = f" p{where[0]}@{where[1]}, group committed {where[2]}" if where else ""
        read = answers.get(text)
        notes = [f"answer p{read[0]}@{read[1]}" if read else "no answer on turns"]
        notes.append("in a window" if "window" in found[text] else "never in a window")
        if "dead-letters" in found[text]:
            notes.append("dead-lettered")
        lines.append(f"  lost after {last}{at} ({', '.join(notes)}): {halves[text][0][-40:]}")
    return "\n" + "\n".join(lines)


def poison_records(count: int, seed: int = 0) -> list[bytes]:
    """``count`` undecodable or ill-shaped records: random bytes, invalid UTF-8, truncated
    JSON, wrong types, unknown tags, deep nesting; one in 500 of 900 KB and one in 1,000 of 2 MiB."""
    rng = random.Random(seed)
    good = encode(Turn(session_id="x", project="/x", role="user", content="fine", ts=datetime.now(UTC)))
    makers = [
        lambda: rng.randbytes(rng.randint(1, 2000)),
        lambda: b"\xff\xfe" * rng.randint(1, 500),
        lambda: good[: rng.randint(1, len(good) - 1)],
        lambda: good.replace(b'"user"', b"42"),
        lambda: good.replace(b'"schema":"turn.v', b'"schema":"turn.v999'),
        lambda: b"[" * 3000 + b"]" * 3000,
    ]
    records = []
    for i in range(count):
        if i % 1000 == 999:
            records.append(rng.randbytes(16) * (2 * 1024 * 1024 // 16))
        elif i % 500 == 499:
            records.append(rng.randbytes(16) * (900 * 1024 // 16))
        else:
            records.append(rng.choice(makers)())
    return records


async def dead_letters(bootstrap: str, prefix: str) -> int:
    """How many records the dead-letter topic holds (read to its true end)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from memstream.kafka import offsets
    from memstream.topics import DEAD_LETTERS, topic_name

    topic = topic_name(prefix, DEAD_LETTERS)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not tps:
            await consumer._client.force_metadata_update()
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        ends = await offsets.end_offsets(consumer, tps)
        begins = await consumer.beginning_offsets(tps)
        return sum(ends[tp] - begins[tp] for tp in tps)
    finally:
        await consumer.stop()


async def poison_run(workdir: Path, *, poison: int, sessions: int, exchanges: int, timeout: float = 600) -> Outcome:
    """``poison`` bad records interleaved with valid exchanges on the turns topic of a worker."""
    from aiokafka import AIOKafkaProducer

    from memstream.topics import TURNS, topic_name

    began = time.monotonic()
    turns, expected = workload(sessions, exchanges, str(workdir / "projects"), seed=3)
    bad = poison_records(poison)
    with external_broker() as broker:
        prefix = f"poison{uuid.uuid4().hex[:8]}"
        worker = Worker(worker_env(broker.bootstrap, prefix), workdir / "data", workdir / "worker.log")
        worker.start()
        try:
            await worker.wait_up()
            producer = AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap, max_request_size=4 * 1024 * 1024, linger_ms=5
            )
            await producer.start()
            try:
                topic = topic_name(prefix, TURNS)
                every = max(1, len(bad) // max(1, len(turns)))
                pending = list(turns)
                for i, payload in enumerate(bad):
                    await producer.send(topic, payload, key=f"bad{i % 7}".encode())
                    if i % every == 0 and pending:
                        t = pending.pop(0)
                        await producer.send(topic, encode(t), key=turn_key(t))
                for t in pending:
                    await producer.send(topic, encode(t), key=turn_key(t))
                await producer.flush()
            finally:
                await producer.stop()
            stored = await settle(worker, expected, timeout)
            letters = await dead_letters(broker.bootstrap, prefix)
        finally:
            worker.stop()
    lost, duplicated, corrupted = compare(expected, stored)
    sizes = sorted({len(b) for b in bad if len(b) > 100_000})
    return Outcome(
        len(expected),
        len(stored),
        lost,
        duplicated,
        corrupted,
        seconds=time.monotonic() - began,
        notes={"poison": len(bad), "dead-lettered": letters, "largest": max(len(b) for b in bad), "big sizes": sizes},
    )


async def outage_run(workdir: Path, *, outage: float, sessions: int, timeout: float = 900, **settings: str) -> Outcome:
    """An LLM (fake Anthropic, HTTP 529) down for ``outage`` seconds while ``sessions`` exchanges
    arrive; then it recovers. Every exchange must be extracted and none dead-lettered."""
    from tests.e2e.test_replay_e2e import one_note_per_turn
    from tests.fakes.anthropic_server import FakeAnthropic

    began = time.monotonic()
    turns = []
    now = datetime.now(UTC)
    for s in range(sessions):
        project = str(workdir / "projects" / f"p{s}")
        answer = f"{' '.join(random.Random(s).sample(WORDS, 10))} {s}."
        turns += [
            Turn(session_id=f"o{s}", project=project, role="user", content=f"Q{s}?", ts=now),
            Turn(session_id=f"o{s}", project=project, role="assistant", content=answer, ts=now),
        ]
    expected = [f"Note: {t.content}" for t in turns if t.role == "assistant"]
    with FakeAnthropic(one_note_per_turn, api_key="sk-test") as claude, external_broker() as broker:
        prefix = f"outage{uuid.uuid4().hex[:8]}"
        env = worker_env(
            broker.bootstrap,
            prefix,
            ANTHROPIC_API_KEY="sk-test",
            MEMSTREAM_ANTHROPIC_BASE_URL=claude.base_url,
            MEMSTREAM_LLM_RETRIES="0",
            **settings,
        )
        worker = Worker(env, workdir / "data", workdir / "worker.log")
        worker.start()
        try:
            await worker.wait_up()
            claude.fail_next(1_000_000, status=529)  # more than any outage here asks
            down = time.monotonic()
            await publish(broker.bootstrap, prefix, turns)
            await asyncio.sleep(max(0.0, outage - (time.monotonic() - down)))
            claude.clear_script()
            deadline = time.monotonic() + timeout
            stored: list[str] = []
            while time.monotonic() < deadline:
                stored = [t for t in (await worker.memory_texts() or []) if t.startswith("Note: ")]
                if {normalized(e) for e in expected} <= {normalized(t) for t in stored}:
                    break
                await asyncio.sleep(1)
            letters = await dead_letters(broker.bootstrap, prefix)
        finally:
            worker.stop()
    lost, duplicated, corrupted = compare(expected, stored)
    return Outcome(
        len(expected),
        len(stored),
        lost,
        duplicated,
        corrupted,
        seconds=time.monotonic() - began,
        notes={"outage s": outage, "dead-lettered": letters},
    )

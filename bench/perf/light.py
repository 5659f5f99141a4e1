"""Light beside the agent (issue 29): idle CPU, memory footprint and its slope, each beside the old tree.

    .venv/bin/python -m bench.perf.light [--quick]          # every measurement, old and new interleaved

On a machine shared with other work a figure from another run is no comparison, so each one is
measured twice in this run, alternately: by this tree and by the tree issue 29 was opened on
(``BEFORE``, unpacked by ``bench.perf.baseline``). The functions below run in either tree: in the old
one this file is loaded by path (``bench.perf.baseline.run(tree, "light", ...)``), and ``bench.perf.pipeline``
is then the old tree's own, so the same driver measures both pipelines.

- :func:`idle`: the CPU share of the worker and the embedded broker over a spell without turns.
- :func:`quiet`: publish → memory for turns that each come after a quiet spell.
- :func:`soak`: turns at a developer's pace (one every 10 s) on a shortened clock, with the RSS of
  the worker and the broker sampled as they go, and its slope per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

#: The tree issue 29 was opened on (main after issue 23's packages, 2026-11-25).
BEFORE = "6654f39"
#: A developer's pace: one turn every this many seconds (issue 29).
DEVELOPER_TURN_S = 10.0
#: The soak that starts the broker afresh above a bound (MEMSTREAM_BROKER_MAX_MB): turns, seconds
#: between them, the bound in MB. Its clock is ×20, not ×50: a fresh start waits for a quiet moment
#: (5 s, 0.25 s here), which turns 0.2 s apart on a loaded machine never leave. 360 turns of ~139 KB
#: cross a 30 MB bound (the broker starts at ~18) several times.
BOUNDED_SOAK = (360, 0.5, 30)


def rss_mb(pid: int) -> float:
    """Resident memory of a process (Linux /proc), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _pipeline() -> ModuleType:
    """``bench.perf.pipeline``, or ``bench.pipeline`` in an old tree (its bench/ is flat): bench.perf.baseline
    runs this file there too."""
    try:
        return importlib.import_module("bench.perf.pipeline")
    except ModuleNotFoundError:
        return importlib.import_module("bench.pipeline")


async def idle(seconds: float, settle: float) -> dict[str, float]:
    """``bench.perf.pipeline.idle_cpu``: percent of a core, worker and broker, over ``seconds`` without turns."""
    pipeline = _pipeline()

    measured = await pipeline.idle_cpu(seconds=seconds, settle=settle)
    return {"worker_pct": measured.worker_pct, "broker_pct": measured.broker_pct}


async def quiet(turns: int, pause: float, ring: bool = True) -> dict[str, float]:
    """Publish → memory-updated, one turn at a time, each after ``pause`` seconds of quiet."""
    pipeline = _pipeline()

    options: dict[str, Any] = {} if ring else {"ring": False}
    return await pipeline.run_sequential(turns=turns, embedder="bundled", pause=pause, **options)


async def soak(
    turns: int, every: float, samples: int, idle_s: float, sessions: int = 20, broker_max_mb: int = 0
) -> dict[str, Any]:
    """``turns`` turns, one every ``every`` seconds (a shortened clock), over ``sessions`` sessions of
    ``sessions`` projects, with the fake LLM and the fake embedder. RSS (MB) of the worker's process
    and the broker at start, after ``idle_s`` seconds idle, then ``samples`` times along the way and
    once every turn became a memory. The slopes are least squares over the second half of the samples
    (the first half includes warming up: imports, caches, the first table rows).

    ``broker_max_mb``: the broker is started afresh above this, as `memstream up` does
    (memstream.worker.recycle), its quiet moment and check interval on the soak's shortened clock."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    pipeline = _pipeline()
    from memstream.intake.publish import make_turn
    from memstream.schemas import encode
    from memstream.topics import MEMORY_UPDATED, TURNS, topic_name

    speedup = DEVELOPER_TURN_S / every
    recycler: Any = None
    if broker_max_mb:
        from memstream.worker import recycle

        recycle.QUIET_SECONDS /= speedup
        recycler = recycle.Recycler(broker_max_mb, check_seconds=recycle.CHECK_SECONDS / speedup)
    with tempfile.TemporaryDirectory() as tmp, pipeline.fake_llm(0.0) as llm_url:
        settings, running = await pipeline.start(Path(tmp), llm_url, "fake")
        try:
            if running.broker is None or running.broker.pid is None:
                raise RuntimeError("the soak measures the embedded broker: no broker was started")
            broker = running.broker.pid
            me = os.getpid()
            start = {"worker_mb": rss_mb(me), "broker_mb": rss_mb(broker)}
            await asyncio.sleep(idle_s)
            idled = {"worker_mb": rss_mb(me), "broker_mb": rss_mb(broker)}

            async def clients() -> tuple[Any, Any]:
                producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap, linger_ms=5)
                consumer = AIOKafkaConsumer(
                    topic_name(settings.topic_prefix, MEMORY_UPDATED),
                    bootstrap_servers=running.bootstrap,
                    auto_offset_reset="earliest",
                    fetch_max_wait_ms=settings.effective_fetch_max_wait_ms,
                )
                await producer.start()
                await consumer.start()
                return producer, consumer

            producer, consumer = await clients()
            created, fresh_starts, broker_peak, spent = 0, 0, 0.0, 0.0
            points: list[tuple[int, float, float]] = []
            #: (turns so far, the broker's CPU seconds so far): Tansu lists a partition's every batch
            #: on each fetch that finds data, so its cost per turn may grow with what it holds.
            broker_cpu: list[tuple[int, float]] = [(0, pipeline._cpu_seconds(broker))]
            topic = topic_name(settings.topic_prefix, TURNS)
            began = time.monotonic()
            try:
                for i in range(turns):
                    session = f"soak-{i % sessions}"
                    project = f"/soak/project-{i % sessions}"
                    now = datetime.now(UTC)
                    for role, text in (("user", f"question {i}"), ("assistant", f"answer bench-turn {i}.0 done")):
                        turn = make_turn(session_id=session, project=project, role=role, content=text, ts=now)
                        await producer.send(topic, encode(turn), key=session.encode())
                    await producer.flush()
                    _ring(running.bootstrap)
                    created += await _memories(consumer)
                    broker_peak = max(broker_peak, rss_mb(broker))
                    if (i + 1) % max(1, turns // samples) == 0:
                        points.append((i + 1, rss_mb(me), rss_mb(broker)))
                        broker_cpu.append((i + 1, spent + pipeline._cpu_seconds(broker)))
                    next_turn = began + (i + 1) * every
                    # `up` asks every second of a turn every ten: ten times between turns, here.
                    due = False
                    while not due and (left := next_turn - time.monotonic()) > 0:
                        await asyncio.sleep(min(left, every / 10) if recycler is not None else left)
                        due = recycler is not None and await recycler.due(running)
                    if due:
                        # Every memory of the turns so far is counted first: the topic starts afresh too.
                        drained = time.monotonic() + 60
                        while created < i + 1 and time.monotonic() < drained:
                            created += await _memories(consumer, wait_ms=200)
                        spent += pipeline._cpu_seconds(broker)  # the broker's CPU goes on counting across
                        await consumer.stop()
                        await producer.stop()
                        running = await recycler.recycle(running)
                        fresh_starts += 1
                        assert running.broker is not None and running.broker.pid is not None
                        broker = running.broker.pid
                        producer, consumer = await clients()
                deadline = time.monotonic() + 120
                while created < turns and time.monotonic() < deadline:
                    created += await _memories(consumer, wait_ms=200)
            finally:
                await consumer.stop()
                await producer.stop()
            end = {"worker_mb": rss_mb(me), "broker_mb": rss_mb(broker), "memories": created}
            end |= {"fresh_starts": fresh_starts, "broker_peak_mb": broker_peak}
        finally:
            await running.stop()
    half = points[len(points) // 2 :]
    middle = len(broker_cpu) // 2
    return {
        # The broker's CPU per turn over the first and the second half of the soak (ms).
        "broker_cpu_ms_per_turn": [
            _per_turn(broker_cpu[0], broker_cpu[middle]),
            _per_turn(broker_cpu[middle], broker_cpu[-1]),
        ],
        "turns": turns,
        "every_s": every,
        "start": start,
        "idle": idled,
        "end": end,
        "points": points,
        "worker_kb_per_turn": _slope([(n, w) for n, w, _ in half]) * 1024,
        "broker_kb_per_turn": _slope([(n, b) for n, _, b in half]) * 1024,
    }


async def _memories(consumer: Any, wait_ms: int = 0) -> int:
    """memory-updated events for created or refreshed memories taken from ``consumer``, waiting
    up to ``wait_ms`` for the first (0: only what was fetched already)."""
    from memstream.schemas import MemoryUpdated, decode

    found = 0
    for records in (await consumer.getmany(timeout_ms=wait_ms)).values():
        for record in records:
            event = decode(record.value)
            found += isinstance(event, MemoryUpdated) and event.change in ("created", "refreshed")
    return found


def _ring(bootstrap: str) -> None:
    """Ring the worker's doorbell, as memstream's publishers do; the old tree has none."""
    try:
        from memstream.kafka import doorbell
    except ImportError:
        return
    doorbell.ring(bootstrap)


def _per_turn(first: tuple[int, float], last: tuple[int, float]) -> float:
    """Milliseconds of CPU per turn between two (turns, CPU seconds) samples."""
    turns = last[0] - first[0]
    return (last[1] - first[1]) * 1000 / turns if turns else 0.0


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of y over x; 0 for fewer than two points."""
    if len(points) < 2:
        return 0.0
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0


async def measure(quick: bool, old: Path | None) -> dict[str, Any]:
    """Every measurement of this module, this tree's and (with ``old``) the old tree's, interleaved."""
    from bench.perf import baseline

    def before(call: str, **kwargs: Any) -> Any:
        if old is None:
            return None
        return baseline.run(old, "light", path=str(Path(__file__).resolve()), call=call, **kwargs)

    seconds, settle = (10.0, 8.0) if quick else (60.0, 8.0)
    pause, quiet_turns = (3.0, 3) if quick else (10.0, 10)
    soak_turns, soak_every = (60, 0.05) if quick else (720, 0.2)
    results: dict[str, Any] = {"seconds": seconds, "pause": pause, "soak_speedup": DEVELOPER_TURN_S / soak_every}
    results["idle"] = [await idle(seconds, settle)]
    results["idle_before"] = [before("idle", seconds=seconds, settle=settle)]
    results["quiet"] = await quiet(quiet_turns, pause)
    results["quiet_before"] = before("quiet", turns=quiet_turns, pause=pause)
    results["quiet_unrung"] = await quiet(quiet_turns, pause, ring=False)
    if not quick:  # a second pair: idle CPU moves with the machine's load
        results["idle_before"].append(before("idle", seconds=seconds, settle=settle))
        results["idle"].append(await idle(seconds, settle))
    results["soak"] = await soak(soak_turns, soak_every, samples=12, idle_s=settle)
    bounded_turns, bounded_every, results["bounded_mb"] = BOUNDED_SOAK
    results["soak_bounded"] = await soak(
        bounded_turns // (6 if quick else 1), bounded_every, samples=12, idle_s=settle, broker_max_mb=BOUNDED_SOAK[2]
    )
    results["soak_before"] = before("soak", turns=soak_turns, every=soak_every, samples=12, idle_s=settle)
    return results


def rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(benchmark, figure, limit, note) rows for the harness's table."""
    load = f"load {os.getloadavg()[0]:.1f}"

    def idle_figure(runs: list[dict[str, float] | None]) -> str:
        measured = [r for r in runs if r is not None]
        if not measured:
            return "not measured"
        totals = sorted(r["worker_pct"] + r["broker_pct"] for r in measured)
        mid = min(measured, key=lambda r: abs(r["worker_pct"] + r["broker_pct"] - statistics.median(totals)))
        spread = f" ({totals[0]:.2f}–{totals[-1]:.2f})" if len(totals) > 1 else ""
        return (
            f"{mid['worker_pct'] + mid['broker_pct']:.2f}% of a core{spread} "
            f"(worker {mid['worker_pct']:.2f} + broker {mid['broker_pct']:.2f})"
        )

    out = [
        (
            "h. idle: worker + broker CPU",
            idle_figure(results["idle"]),
            "≤ 1% of a core",
            f"over {results['seconds']:.0f} s without turns; before ({BEFORE}): {idle_figure(results['idle_before'])}",
        )
    ]
    q, qb, qu = results["quiet"], results["quiet_before"], results["quiet_unrung"]
    before_q = f"p50 {qb['p50_ms']:.0f} ms, p99 {qb['p99_ms']:.0f} ms" if qb else "not measured"
    out.append(
        (
            f"c. … after {results['pause']:.0f} s of quiet",
            f"p50 {q['p50_ms']:.0f} ms, p99 {q['p99_ms']:.0f} ms",
            "p99 ≤ 1 s",
            f"before: {before_q}; a publisher that does not ring the doorbell: p50 {qu['p50_ms']:.0f} ms, "
            f"p99 {qu['p99_ms']:.0f} ms (it waits out the idle pause)",
        )
    )
    s, sb = results["soak"], results["soak_before"]
    per_hour = 3600 / DEVELOPER_TURN_S / 1024  # MB per hour at a developer's pace, per KB per turn
    for who in ("worker", "broker"):
        slope = s[f"{who}_kb_per_turn"]
        before_s = f"{sb[f'{who}_kb_per_turn']:.1f} KB/turn" if sb else "not measured"
        out.append(
            (
                f"i. RSS of the {who}",
                f"start {s['start'][f'{who}_mb']:.0f} MB, idle {s['idle'][f'{who}_mb']:.0f}, "
                f"after {s['turns']} turns {s['end'][f'{who}_mb']:.0f}",
                "",
                f"100k turns at this slope: {s['start'][f'{who}_mb'] + slope * 100_000 / 1024:,.0f} MB (extrapolated)",
            )
        )
        out.append(
            (
                f"i. soak slope, {who}",
                f"{slope:.1f} KB/turn = {slope * per_hour:.1f} MB/hour at a turn every {DEVELOPER_TURN_S:.0f} s",
                "flat, or bounded",
                f"{s['turns']} turns on a clock ×{results['soak_speedup']:.0f} faster; before: {before_s}; {load}",
            )
        )
    b = results["soak_bounded"]
    out.append(
        (
            "i. broker RSS, bounded soak",
            f"peak {b['end']['broker_peak_mb']:.0f} MB, {b['end']['fresh_starts']} fresh starts, "
            f"{b['end']['memories']} of {b['turns']} turns became memories",
            f"≤ the bound ({results['bounded_mb']} MB) + growth to a quiet moment",
            f"the same soak with MEMSTREAM_BROKER_MAX_MB={results['bounded_mb']} (memstream.worker.recycle); "
            f"without it the broker ends at {s['end']['broker_mb']:.0f} MB",
        )
    )
    first, second = s["broker_cpu_ms_per_turn"]
    out.append(
        (
            "i. broker CPU per turn, soak",
            f"{first:.1f} ms in the first half, {second:.1f} ms in the second",
            "",
            "Tansu 0.6 lists a partition's every batch on each fetch that finds data: it grows with what it holds",
        )
    )
    return out


def main() -> None:
    from bench.perf import baseline

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short spells and few turns: checks the bench")
    parser.add_argument("--no-before", action="store_true", help="this tree only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"bench.perf.light, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()}", flush=True)
    if args.no_before:
        results = asyncio.run(measure(args.quick, None))
    else:
        with baseline.checkout(BEFORE) as old:
            results = asyncio.run(measure(args.quick, old))
    for name, figure, limit, note in rows(results):
        print(f"{name:<34} {figure:<70} {limit:<16} {note}")
    print(f"load at the end {os.getloadavg()}; soak points (turns, worker MB, broker MB): {results['soak']['points']}")
    if results["soak_before"]:
        print(f"before's soak points: {results['soak_before']['points']}")


if __name__ == "__main__":
    main()

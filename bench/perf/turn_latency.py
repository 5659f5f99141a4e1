"""Start-up time of the pipeline and the time from publishing a turn to its memory-updated
event, on the embedded default (Tansu, Qdrant edge, bundled embedder), in raw mode.

    .venv/bin/python -m bench.perf.turn_latency [--turns 20]

The side-by-side comparison, with mem0, is ``bench.harness``.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from memstream.intake.publish import make_turn, publish
from memstream.kafka.broker import free_port
from memstream.schemas import MemoryUpdated, decode
from memstream.settings import Settings
from memstream.topics import MEMORY_UPDATED, topic_name
from memstream.worker import runner


async def measure(turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(
            {}, data_dir=Path(tmp), topic_prefix=f"bench{uuid.uuid4().hex[:6]}", http_port=free_port()
        )
        began = time.monotonic()
        running = await runner.start(settings)
        startup = time.monotonic() - began
        consumer = AIOKafkaConsumer(
            topic_name(settings.topic_prefix, MEMORY_UPDATED),
            bootstrap_servers=running.bootstrap,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        latencies: list[float] = []
        try:
            for i in range(turns):
                user = make_turn(
                    session_id=f"b{i}", project="/bench", role="user", content=f"question {i}: how is module {i} built?"
                )
                reply = make_turn(
                    session_id=f"b{i}",
                    project="/bench",
                    role="assistant",
                    content=f"Module {i} is built with make target build-{i} and tested with pytest -k m{i}.",
                    ts=datetime.now(UTC),
                )
                await publish(running.bootstrap, settings.topic_prefix, [user])
                sent = time.monotonic()
                await publish(running.bootstrap, settings.topic_prefix, [reply])
                deadline = time.monotonic() + 60
                while True:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"turn {i}: no memory-updated event within 60 s")
                    batch = await consumer.getmany(timeout_ms=100)
                    events = [decode(m.value) for ms in batch.values() for m in ms]
                    if any(isinstance(e, MemoryUpdated) and f"Module {i} is built" in e.memory.text for e in events):
                        latencies.append(time.monotonic() - sent)
                        break
        finally:
            await consumer.stop()
            await running.stop()
    quantiles = statistics.quantiles(latencies, n=100)
    print(
        f"machine: {platform.machine()} {platform.system()} python {platform.python_version()}, "
        f"{__import__('os').cpu_count()} cores"
    )
    timings = ", ".join(f"{k} {v:.2f}" for k, v in running.timings.items())
    print(f"startup to ready          {startup:6.2f} s   ({timings})")
    print(
        f"publish -> memory-updated p50 {statistics.median(latencies) * 1000:7.0f} ms  "
        f"p99 {quantiles[98] * 1000:7.0f} ms  (n={len(latencies)}, raw mode, bundled embedder)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    asyncio.run(measure(parser.parse_args().turns))


if __name__ == "__main__":
    main()

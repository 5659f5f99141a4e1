"""The floor under every stage: what one Faust hop costs on the embedded broker, doing nothing.

    .venv/bin/python -m bench.perf.floor [--messages 5000] [--hops 3]

A chain of pass-through agents (consume a record, send it on) on Tansu, with memstream's
consumer settings, fed ``messages`` records at once. It prints the CPU time of this process
per record per hop: Faust's stream, sensors and acks, aiokafka's fetch and produce, and the
asyncio scheduling between them, with no work of our own. A turn crosses the pipeline's
stages as several such hops (``bench.perf.pipeline.Result.events_per_turn``), so a turn cannot
cost less than their product; the harness prints the throughput that floor allows.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from memstream.kafka.broker import EmbeddedBroker
from memstream.kafka.transport import MemstreamApp
from memstream.settings import Settings
from memstream.worker.app import CONSUMER_OPTIONS
from memstream.worker.runner import READY_TIMEOUT_SECONDS, _Worker


@dataclass
class Floor:
    messages: int
    hops: int
    seconds: float
    #: CPU time of this process (all threads) per record per hop.
    cpu_us_per_hop: float
    #: Wall time per record per hop, the whole chain running at once.
    wall_us_per_hop: float


async def measure(messages: int = 5000, hops: int = 3, partitions: int = 4, timeout: float = 600) -> Floor:
    """Push ``messages`` records through ``hops`` pass-through agents; time the whole chain."""
    settings = Settings.from_env({})
    broker = EmbeddedBroker().start()
    prefix = f"floor{uuid.uuid4().hex[:6]}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            app = MemstreamApp(
                prefix,
                broker=f"kafka://{broker.bootstrap}",
                store="memory://",
                datadir=tmp,
                topic_partitions=partitions,
                **CONSUMER_OPTIONS,
                web_enabled=False,
                autodiscover=False,
            )
            app.fetch_max_wait_ms = settings.effective_fetch_max_wait_ms
            app.prefetch_backoff_ms = settings.prefetch_backoff_ms
            chain = [
                app.topic(f"{prefix}-{i}", key_serializer="raw", value_serializer="raw", partitions=partitions)
                for i in range(hops + 1)
            ]
            arrived = 0
            done = asyncio.Event()

            def forward(to: Any) -> Any:
                async def hop(stream: Any) -> None:
                    async for event in stream.events():
                        await to.send(key=event.key, value=event.value)

                return hop

            async def sink(stream: Any) -> None:
                nonlocal arrived
                async for _ in stream:
                    arrived += 1
                    if arrived == messages:
                        done.set()

            for i in range(hops):
                app.agent(chain[i], name=f"hop{i}")(forward(chain[i + 1]))
            app.agent(chain[-1], name="sink")(sink)
            worker = _Worker(
                app, daemon=False, loglevel="warning", quiet=True, redirect_stdouts=False, override_logging=False
            )
            await worker.start()
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
            try:
                await asyncio.wait_for(worker.ready.wait(), READY_TIMEOUT_SECONDS)
                await producer.start()
                payload = b"x" * 200  # about a turn event's size
                wall, cpu = time.monotonic(), time.process_time()
                for n in range(messages):
                    await producer.send(chain[0].get_topic_name(), payload, key=str(n % 100).encode())
                await producer.flush()
                await asyncio.wait_for(done.wait(), timeout)
                wall, cpu = time.monotonic() - wall, time.process_time() - cpu
            finally:
                await producer.stop()
                await worker.stop()
    finally:
        broker.stop()
    # The sink is a hop too: it consumes what the last agent sent.
    crossings = messages * (hops + 1)
    return Floor(messages, hops, wall, cpu / crossings * 1e6, wall / crossings * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description="what one Faust hop costs on the embedded broker")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--hops", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    floor = asyncio.run(measure(args.messages, args.hops))
    print(
        f"{floor.messages} records through {floor.hops} pass-through agents and a sink in {floor.seconds:.1f} s: "
        f"{floor.cpu_us_per_hop:.0f} µs CPU and {floor.wall_us_per_hop:.0f} µs wall per record per hop"
    )


if __name__ == "__main__":
    main()

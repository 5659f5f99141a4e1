"""A prototype for issue 29's first lever: what a hop costs in the Kafka client alone, aiokafka vs librdkafka.

    .venv/bin/python -m bench.perf.client_hop [--messages 5000] [--hops 3]

Faust's floor (``bench.perf.floor``) is one hop of a pass-through agent: Faust's stream and acks, and
aiokafka's fetch and produce. Faust's own confluent driver did not get through its start on Tansu
here (the worker never finished joining its group), so this measures the clients without Faust: a
chain of ``hops`` pass-through stages (consume a record, send it on to the next topic), each
consumer assigned its topic's partitions (no group), fed ``messages`` records at once, on the
embedded broker, and the CPU time of this process (every thread, librdkafka's included) per record
per hop. The difference between the two clients is what a C client could take off each of a
turn's hops; the rest of Faust's floor stays.

librdkafka is the copy bundled in the confluent-kafka wheel (2.2 or newer speaks to Tansu;
Debian bookworm's 2.0.2 does not, see DESIGN.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time
import uuid
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.kafka.broker import EmbeddedBroker

#: How long a fetch waits on Tansu while records come (memstream's embedded default).
FETCH_WAIT_MS = 20
PAYLOAD = b"x" * 200  # about a turn event's size


@dataclass
class Hop:
    client: str
    messages: int
    hops: int
    seconds: float
    #: CPU time of this process (all threads) per record per hop.
    cpu_us_per_hop: float


async def _aiokafka_chain(bootstrap: str, names: list[str], partitions: int, messages: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    consumers = []
    try:
        for name in names:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=FETCH_WAIT_MS,
            )
            await consumer.start()
            consumer.assign([TopicPartition(name, p) for p in range(partitions)])
            consumers.append(consumer)
        for n in range(messages):
            await producer.send(names[0], PAYLOAD, key=str(n % 100).encode())
        await producer.flush()
        arrived = 0

        async def stage(i: int) -> None:
            nonlocal arrived
            while arrived < messages:
                batch = await consumers[i].getmany(timeout_ms=100)
                for records in batch.values():
                    for record in records:
                        if i + 1 < len(names):
                            await producer.send(names[i + 1], record.value, key=record.key)
                        else:
                            arrived += 1

        await asyncio.gather(*(stage(i) for i in range(len(names))))
    finally:
        for consumer in consumers:
            await consumer.stop()
        await producer.stop()


def _confluent_chain(bootstrap: str, names: list[str], partitions: int, messages: int, timeout: float) -> None:
    import confluent_kafka

    common = {"bootstrap.servers": bootstrap}
    producer = confluent_kafka.Producer({**common, "linger.ms": 5})
    consumers = []
    for name in names:
        consumer = confluent_kafka.Consumer(
            {
                **common,
                "group.id": f"hop-{uuid.uuid4().hex[:6]}",  # required by the client; never joined (assign)
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": FETCH_WAIT_MS,
            }
        )
        consumer.assign(
            [confluent_kafka.TopicPartition(name, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
        )
        consumers.append(consumer)
    try:
        for n in range(messages):
            producer.produce(names[0], PAYLOAD, key=str(n % 100).encode())
            producer.poll(0)
        producer.flush()
        arrived = 0
        lock = threading.Lock()
        deadline = time.monotonic() + timeout

        def stage(i: int) -> None:
            nonlocal arrived
            while arrived < messages and time.monotonic() < deadline:
                for record in consumers[i].consume(num_messages=500, timeout=0.1):
                    if record.error():
                        continue
                    if i + 1 < len(names):
                        producer.produce(names[i + 1], record.value(), key=record.key())
                    else:
                        with lock:
                            arrived += 1
                producer.poll(0)

        threads = [threading.Thread(target=stage, args=(i,)) for i in range(len(names))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if arrived < messages:
            raise TimeoutError(f"{arrived} of {messages} records crossed the chain within {timeout}s")
    finally:
        for consumer in consumers:
            consumer.close()
        producer.flush()


async def measure(client: str, messages: int = 5000, hops: int = 3, partitions: int = 4, timeout: float = 300) -> Hop:
    """``messages`` records through ``hops`` pass-through stages and a sink, with ``client``."""
    with EmbeddedBroker() as broker:
        prefix = f"hop{uuid.uuid4().hex[:6]}"
        names = [f"{prefix}-{i}" for i in range(hops + 1)]
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in names]
            )
        finally:
            await admin.close()
        wall, cpu = time.monotonic(), time.process_time()
        if client == "aiokafka":
            await asyncio.wait_for(_aiokafka_chain(broker.bootstrap, names, partitions, messages), timeout)
        elif client == "confluent":
            await asyncio.to_thread(_confluent_chain, broker.bootstrap, names, partitions, messages, timeout)
        else:
            raise ValueError(f"unknown client {client!r}: aiokafka or confluent")
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    crossings = messages * (hops + 1)  # the sink consumes too
    return Hop(client, messages, hops, wall, cpu / crossings * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description="what a hop costs in the Kafka client alone")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of both clients")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    results: dict[str, list[Hop]] = {"aiokafka": [], "confluent": []}
    for _ in range(args.rounds):
        for client in results:
            results[client].append(asyncio.run(measure(client, args.messages, args.hops)))
    for client, runs in results.items():
        cpu = sorted(r.cpu_us_per_hop for r in runs)
        each = ", ".join(f"{c:.1f}" for c in cpu)
        wall = sorted(r.seconds for r in runs)[len(runs) // 2]
        print(
            f"{client:<10} {cpu[len(cpu) // 2]:6.1f} µs CPU per record per hop (runs {each}); "
            f"wall {wall:.1f} s for {args.messages} records × {args.hops + 1}"
        )


if __name__ == "__main__":
    main()

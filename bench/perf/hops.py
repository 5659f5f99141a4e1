"""Where a turn's latency goes, hop by hop, from the Kafka timestamps of its events.

    .venv/bin/python -m bench.perf.hops [--turns 15] [--embedder fake|bundled] [--set fetch_max_wait_ms=5]

Publishes one turn at a time (each after the previous one's memory arrived), then reads
every topic on the turn's path and prints, per hop, the median and max time between the
event a stage consumed and the first event it produced (both timestamped by their
producers), so the time a stage takes includes waiting for its fetch. Settings given with
``--set`` are applied to the pipeline, to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from bench.perf.pipeline import fake_llm, one_turn_at_a_time, session_of, start
from memstream.identity import project_key, turn_session_key
from memstream.settings import Settings, _parse
from memstream.topics import EMBEDDED, FACTS, MEMORY_OPS, MEMORY_UPDATED, SNAPSHOTS, TURNS, topic_name

NAME = "hops"
#: The turn's path: each topic is consumed by the stage that produces the next.
PATH = (TURNS, SNAPSHOTS, FACTS, EMBEDDED, MEMORY_OPS, MEMORY_UPDATED)


async def _timestamps(bootstrap: str, topic: str, fetch_wait_ms: int, *, last: bool = False) -> dict[bytes, int]:
    """The first (or last) record timestamp, in ms, of every key on ``topic``."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=fetch_wait_ms
    )
    await consumer.start()
    first: dict[bytes, int] = {}
    try:
        quiet_until = time.monotonic() + 2.0
        while time.monotonic() < quiet_until:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    if record.key is not None and (last or record.key not in first):
                        first[record.key] = record.timestamp
                    quiet_until = time.monotonic() + 1.0
    finally:
        await consumer.stop()
    return first


async def measure(turns: int, embedder: str, overrides: dict[str, Any]) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp, fake_llm(0.0) as llm_url:
        settings, running = await start(Path(tmp), llm_url, embedder, overrides)
        wait = settings.effective_fetch_max_wait_ms
        try:
            await one_turn_at_a_time(running, settings, turns, NAME)
            # A session's last turn (the assistant's) is the one its snapshot answers.
            stamps = {
                spec.name: await _timestamps(
                    running.bootstrap, topic_name(settings.topic_prefix, spec), wait, last=spec is TURNS
                )
                for spec in PATH
            }
        finally:
            await running.stop()
    hops: dict[str, list[float]] = {}
    for i in range(turns):
        for before, after in itertools.pairwise(PATH):
            consumed = stamps[before.name].get(_key(before, i))
            produced = stamps[after.name].get(_key(after, i))
            if consumed is not None and produced is not None:
                hops.setdefault(f"{before.name} → {after.name}", []).append(produced - consumed)
    return hops


def _key(spec: Any, i: int) -> bytes:
    """Turns and snapshots are keyed by the tenant's session (its project, user and id; these turns carry
    no user); facts onward by the project's scope."""
    session, project = session_of(NAME, i)
    return (turn_session_key(session, project, "") if spec in (TURNS, SNAPSHOTS) else project_key(project)).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--embedder", choices=("fake", "bundled"), default="fake")
    parser.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE", help="e.g. fetch_max_wait_ms=5")
    args = parser.parse_args()
    defaults = Settings()
    overrides = {}
    for item in args.set:
        name, _, raw = item.partition("=")
        overrides[name] = _parse(name, raw, getattr(defaults, name))
    hops = asyncio.run(measure(args.turns, args.embedder, overrides))
    print(f"per hop, {args.turns} turns, {args.embedder} embedder, {overrides or 'defaults'}: median / max")
    for hop, ms in hops.items():
        print(f"  {hop:<32} {statistics.median(ms):6.0f} ms / {max(ms):5.0f} ms")
    total = sum(statistics.median(ms) for ms in hops.values())
    print(f"  {'sum of medians':<32} {total:6.0f} ms")


if __name__ == "__main__":
    main()

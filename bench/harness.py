"""The benchmark harness: one command, one table, with the machine it ran on.

    .venv/bin/python -m bench.harness            # the full run (several minutes on 2 cores)
    .venv/bin/python -m bench.harness --quick    # tiny inputs, to check the harness works

a. overhead throughput: instant fake LLM, real and fake embedder
b. LLM-bound throughput: fake LLM answering after 1 s, 1 / 10 / 100 concurrent sessions
c. latency publish → memory-updated, one turn at a time, with LLM and embedder time apart
d. store scaling: upsert and filtered search at 10k and 100k memories (Qdrant edge)
e. side by side: mem0 with the same fake LLM, embedder and a local Qdrant
f. the floor: what one Faust hop costs doing nothing, times the hops a turn takes
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
from datetime import UTC, datetime
from typing import Any

from bench import floor as bench_floor
from bench import pipeline


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


async def main(quick: bool, skip_mem0: bool, skip_store: bool) -> None:
    rows: list[tuple[str, str, str]] = []
    scale = (20, 2) if quick else (100, 5)

    overhead: dict[str, pipeline.Result] = {}
    for name in ("fake", "bundled"):
        r = overhead[name] = await pipeline.run(sessions=scale[0], turns_per_session=scale[1], llm_latency=0.0, embedder=name)
        rows.append((f"a. overhead, {name} embedder", f"{r.turns_per_s:,.1f} turns/s, {r.cpu_ms_per_turn:.1f} ms CPU/turn", f"target ≥ 1,000 (fake); order kept: {r.order_kept}"))

    floor = await bench_floor.measure(messages=1000 if quick else 5000)
    fake = overhead["fake"]
    floor_ms = floor.cpu_us_per_hop * fake.events_per_turn / 1000
    rows.append(("f. one Faust hop, doing nothing", f"{floor.cpu_us_per_hop:.0f} µs CPU", "pass-through agents on the embedded broker (bench.floor)"))
    rows.append(
        (
            "f. floor of a turn",
            f"{fake.events_per_turn:.1f} hops = {floor_ms:.1f} ms CPU",
            f"at most {1000 / floor_ms:,.0f} turns/s on one core, before any stage does its work",
        )
    )

    sizes = [(1, 3), (10, 2)] if quick else [(1, 5), (10, 3), (100, 5)]
    for sessions, turns in sizes:
        r = await pipeline.run(sessions=sessions, turns_per_session=turns, llm_latency=1.0, embedder="fake")
        rows.append((f"b. LLM 1 s, {sessions} sessions", f"{r.turns_per_s:,.1f} turns/s", f"target ≥ 50 at 100; order kept: {r.order_kept}"))

    lat = await pipeline.run_sequential(turns=5 if quick else 30, embedder="bundled")
    rows.append(("c. publish → memory-updated", f"p50 {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms", "end to end, one turn at a time"))
    rows.append(("c. of which LLM / embedder", f"{lat['llm_ms']:.0f} ms / {lat['embed_ms']:.0f} ms", "means per turn (fake LLM over HTTP; bundled e5)"))
    rows.append(("c. pipeline's own", f"p50 {lat['own_p50_ms']:.0f} ms, p99 {lat['own_p99_ms']:.0f} ms", "target p50 < 20 ms, p99 < 100 ms"))

    if not skip_store:
        from bench import store_scaling

        for row in await store_scaling.measure(sizes=(1_000,) if quick else (10_000, 100_000), searches=50 if quick else 200):
            rows.append((f"d. store at {row['size']:,}", f"upsert {row['upsert_per_s']:,.0f}/s, search p95 {row['search_p95_ms']:.1f} ms", "target search p95 < 10 ms at 100k"))

    if not skip_mem0:
        try:
            from bench import mem0_side_by_side
        except ImportError as exc:  # the bench extra is not installed
            rows.append(("e. mem0 side by side", "skipped", f"install the bench extra: {exc}"))
        else:
            rows.extend(await _side_by_side(mem0_side_by_side, quick, lat))

    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    print(f"memstream benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  {note}")


async def _side_by_side(mem0: Any, quick: bool, ours_sequential: dict[str, float]) -> list[tuple[str, str, str]]:
    """mem0 and memstream on the same turns, the same fake LLM latency and the bundled embedder.

    mem0 gets as many adds in flight as memstream has sessions, so the ratio is the design's,
    not a concurrency handicap. Latency is compared one turn at a time: each system alone.
    """
    rows = []
    runs = [(0.0, (2, 2) if quick else (10, 3))] + ([] if quick else [(1.0, (20, 3))])
    for llm_latency, (sessions, turns) in runs:
        ours = await pipeline.run(sessions=sessions, turns_per_session=turns, llm_latency=llm_latency, embedder="bundled")
        theirs = await mem0.run_mem0(mem0.synthetic_turns(sessions, turns), llm_latency=llm_latency, concurrency=sessions)
        label = f"LLM {llm_latency:g} s, {sessions} sessions"
        rows.append((f"e. mem0, {label}", f"{theirs['turns_per_s']:,.1f} turns/s", f"memstream: {ours.turns_per_s:,.1f} turns/s"))
        rows.append((f"e. memstream / mem0, {label}", f"throughput ×{ours.turns_per_s / theirs['turns_per_s']:.1f}", "target ≥ ×20"))
    alone = await mem0.run_mem0(mem0.synthetic_turns(1, 3 if quick else 10), llm_latency=0.0, concurrency=1)
    rows.append(
        (
            "e. one turn alone, p50",
            f"memstream {ours_sequential['p50_ms']:.0f} ms, mem0 {alone['p50_ms']:.0f} ms",
            f"latency ×{ours_sequential['p50_ms'] / alone['p50_ms']:.2f} (memstream / mem0; lower is faster)",
        )
    )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="memstream benchmarks")
    parser.add_argument("--quick", action="store_true", help="tiny inputs: checks the harness, measures little")
    parser.add_argument("--skip-mem0", action="store_true")
    parser.add_argument("--skip-store", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(args.quick, args.skip_mem0, args.skip_store))

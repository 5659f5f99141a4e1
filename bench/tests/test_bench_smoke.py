"""The benchmark harness runs on a tiny input (it measures nothing worth keeping here)."""

from __future__ import annotations

import pytest

from bench.compare import llm_calls
from bench.perf import client_hop, light, pipeline
from bench.perf import floor as bench_floor
from bench.perf import hops as bench_hops

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_throughput_run_keeps_order_and_counts_every_turn() -> None:
    result = await pipeline.run(sessions=3, turns_per_session=2, llm_latency=0.0, embedder="fake", timeout=120)
    assert result.turns == 6 and result.order_kept
    assert result.turns_per_s > 0 and result.p99_ms >= result.p50_ms > 0
    assert result.llm_ms_mean > 0 and result.embed_ms_mean > 0
    assert result.cpu_ms_per_turn > 0
    # Both turn events reach the snapshot stage; the fact then crosses extract, embed, decide, store.
    assert result.events_per_turn >= 6


async def test_sequential_latency_run_separates_llm_and_embedder() -> None:
    result = await pipeline.run_sequential(turns=2, embedder="fake", timeout=120)
    assert result["p99_ms"] >= result["p50_ms"] > 0
    assert result["llm_ms"] > 0 and result["embed_ms"] > 0
    assert 0 <= result["own_p50_ms"] <= result["p50_ms"]


async def test_sequential_run_after_quiet_spells_still_times_each_turn() -> None:
    result = await pipeline.run_sequential(turns=2, embedder="fake", timeout=120, pause=0.5)
    assert result["p99_ms"] >= result["p50_ms"] > 0


async def test_idle_cpu_counts_the_worker_and_the_embedded_broker() -> None:
    idle = await pipeline.idle_cpu(seconds=2.0, settle=2.0)
    # The worker's share is its process time; the broker's, its clock ticks (10 ms): an idle broker
    # may not use one in 2 s now that an idle worker fetches every 2 s.
    assert idle.worker_pct > 0 and idle.broker_pct >= 0
    assert idle.total_pct == idle.worker_pct + idle.broker_pct


async def test_hop_by_hop_run_times_every_stage_on_the_path() -> None:
    hops = await bench_hops.measure(2, "fake", {"embed_batch_window": 0.01})
    assert list(hops) == [f"{a.name} → {b.name}" for a, b in zip(bench_hops.PATH, bench_hops.PATH[1:], strict=False)]
    assert all(len(ms) == 2 and all(m >= 0 for m in ms) for ms in hops.values())


async def test_floor_run_times_records_through_pass_through_agents() -> None:
    floor = await bench_floor.measure(messages=40, hops=2)
    assert (floor.messages, floor.hops) == (40, 2)
    assert floor.cpu_us_per_hop > 0 and floor.wall_us_per_hop > 0


async def test_one_project_backlog_keeps_every_session_in_order() -> None:
    result = await pipeline.run(sessions=3, turns_per_session=2, llm_latency=0.0, embedder="fake", projects=1)
    assert result.turns == 6 and result.order_kept


async def test_llm_calls_are_counted_at_the_model_by_the_stage_that_asked() -> None:
    calls = await llm_calls.memstream_run(1)
    # Every exchange is extracted once; the Redis fact is decided against the JWT one.
    assert calls["extract"] == 1.0
    assert calls["decide"] > 0
    assert calls["input"] > calls["output"] > 0


async def test_soak_samples_both_processes_and_every_turn_becomes_a_memory() -> None:
    soak = await light.soak(turns=6, every=0.05, samples=3, idle_s=0.5, sessions=3)
    assert soak["end"]["memories"] == 6
    assert [n for n, _, _ in soak["points"]] == [2, 4, 6]
    assert all(soak[when][f"{who}_mb"] > 0 for when in ("start", "idle", "end") for who in ("worker", "broker"))
    assert "worker_kb_per_turn" in soak and "broker_kb_per_turn" in soak


@pytest.mark.parametrize("client", ["aiokafka", "confluent"])
async def test_client_hop_chain_carries_every_record(client: str) -> None:
    if client == "confluent":
        pytest.importorskip("confluent_kafka", reason="confluent-kafka comes with the bench extra")
    hop = await client_hop.measure(client, messages=50, hops=1, timeout=120)
    assert (hop.client, hop.messages, hop.hops) == (client, 50, 1)
    assert hop.cpu_us_per_hop > 0

"""The benchmark harness runs on a tiny input (it measures nothing worth keeping here)."""

from __future__ import annotations

import pytest

from bench import pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_throughput_run_keeps_order_and_counts_every_turn() -> None:
    result = await pipeline.run(sessions=3, turns_per_session=2, llm_latency=0.0, embedder="fake", timeout=120)
    assert result.turns == 6 and result.order_kept
    assert result.turns_per_s > 0 and result.p99_ms >= result.p50_ms > 0
    assert result.llm_ms_mean > 0 and result.embed_ms_mean > 0


async def test_sequential_latency_run_separates_llm_and_embedder() -> None:
    result = await pipeline.run_sequential(turns=2, embedder="fake", timeout=120)
    assert result["p99_ms"] >= result["p50_ms"] > 0
    assert result["llm_ms"] > 0 and result["embed_ms"] > 0
    assert 0 <= result["own_p50_ms"] <= result["p50_ms"]

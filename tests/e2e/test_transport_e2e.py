"""The worker's Kafka consumer gets the fetch settings Faust and aiokafka offer no knob for."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_fetch_wait_and_prefetch_backoff_reach_the_fetcher(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data", fetch_max_wait_ms=13, prefetch_backoff_ms=7)
    try:
        consumer = running.pipeline.app.consumer._thread._ensure_consumer()  # type: ignore[attr-defined]
        assert consumer._fetcher._fetch_max_wait_ms == 13
        assert consumer._fetcher._prefetch_backoff == pytest.approx(0.007)
    finally:
        await running.stop()

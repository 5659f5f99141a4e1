"""The worker's Kafka consumer gets the fetch settings Faust and aiokafka offer no knob for."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstream.intake.publish import make_turn, publish_events
from memstream.topics import TURNS
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_fetch_wait_and_prefetch_backoff_reach_the_fetcher(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data", fetch_max_wait_ms=13, prefetch_backoff_ms=7)
    try:
        consumer = running.pipeline.app.consumer._thread._ensure_consumer()  # type: ignore[attr-defined]
        assert consumer._fetcher._prefetch_backoff == pytest.approx(0.007)
        # The idle wait's default on the embedded broker is 200 ms; records bring back the 13.
        assert consumer._fetcher._fetch_max_wait_ms in (13, 26, 52, 104, 200)
    finally:
        await running.stop()


async def test_an_idle_worker_waits_longest_and_a_turn_brings_the_short_wait_back(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data", fetch_max_wait_ms=13, fetch_idle_wait_ms=100)
    try:
        fetcher = running.pipeline.app.consumer._thread._ensure_consumer()._fetcher  # type: ignore[attr-defined]
        sent: list[tuple[int, bool]] = []  # (the wait a fetch was sent with, whether it brought records)
        adaptive = fetcher._proc_fetch_request

        async def recording(assignment: Any, node_id: int, request: Any) -> bool:
            records = bool(await adaptive(assignment, node_id, request))
            sent.append((request._max_wait_ms, records))
            return records

        fetcher._proc_fetch_request = recording

        async def idle() -> bool:
            return len(sent) > 2 and sent[-1] == (100, False)

        await eventually(idle, what="the idle wait")
        idle_until = len(sent)
        now = datetime.now(UTC)
        turns = [
            make_turn(session_id="s", project="/p", role=r, content=f"{r} says hi", ts=now)
            for r in ("user", "assistant")
        ]
        await publish_events(running.bootstrap, running.settings.topic_prefix, TURNS, [("s", t) for t in turns])

        async def brought() -> int | None:
            after = [i for i, (_, records) in enumerate(sent) if i >= idle_until and records]
            return after[0] if after and len(sent) > after[0] + 1 else None

        first = await eventually(brought, what="a fetch with the turns, and the one after it")
        assert sent[first + 1][0] == 13
    finally:
        await running.stop()

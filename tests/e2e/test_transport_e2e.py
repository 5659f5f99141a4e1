"""The worker's Kafka consumer gets the fetch settings Faust and aiokafka offer no knob for."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstream.intake.publish import make_turn, publish_events
from memstream.kafka.broker import EmbeddedBroker
from memstream.topics import TURNS
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def test_fetch_wait_and_prefetch_backoff_reach_the_fetcher(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data", fetch_max_wait_ms=13, prefetch_backoff_ms=7)
    try:
        consumer = running.pipeline.app.consumer._thread._ensure_consumer()  # type: ignore[attr-defined]
        assert consumer._fetcher._prefetch_backoff == pytest.approx(0.007)
        # Records bring back the 13; idle, waits up to 200 ms are held, longer ones are 13 and a pause.
        assert consumer._fetcher._fetch_max_wait_ms in (13, 26, 52, 104)
    finally:
        await running.stop()


async def test_an_idle_worker_pauses_between_fetches_and_a_publish_ends_the_pause(tmp_path: Path) -> None:
    # A minute's idle wait: a turn taken before its pause ran out was taken because the doorbell rang.
    running = await start_pipeline(tmp_path / "data", fetch_max_wait_ms=13, fetch_idle_wait_ms=60_000)
    try:
        thread = running.pipeline.app.consumer._thread  # type: ignore[attr-defined]
        fetcher = thread._ensure_consumer()._fetcher
        doorbell = running.pipeline.app.doorbell  # type: ignore[attr-defined]
        assert doorbell is not None and thread.fetch_wait.wakeable
        sent: list[tuple[int, bool]] = []  # (the wait a fetch was sent with, whether it brought records)
        pauses: list[tuple[float, bool]] = []  # (how long a pause could last, whether a ring ended it)
        adaptive, ring_or_timeout = fetcher._proc_fetch_request, doorbell.wait

        async def recording(assignment: Any, node_id: int, request: Any) -> bool:
            records = bool(await adaptive(assignment, node_id, request))
            sent.append((request._max_wait_ms, records))
            return records

        async def pausing(seen: int, timeout: float) -> bool:
            rang = await ring_or_timeout(seen, timeout)
            pauses.append((timeout, rang))
            return rang

        fetcher._proc_fetch_request = recording
        doorbell.wait = pausing

        async def pausing_long() -> bool:
            return thread.fetch_wait.pause_ms >= 3000

        await eventually(pausing_long, what="a pause of seconds between idle fetches")
        assert max(wait for wait, _ in sent) <= 200  # the broker never holds a long wait: that is the pause
        paused_until = len(pauses)
        now = datetime.now(UTC)
        turns = [
            make_turn(session_id="s", project="/p", role=r, content=f"{r} says hi", ts=now)
            for r in ("user", "assistant")
        ]
        # publish_events rings the doorbell at the broker's address, as every memstream publisher does.
        await publish_events(running.bootstrap, running.settings.topic_prefix, TURNS, [("s", t) for t in turns])

        # The ledger's consumer waits on the same doorbell: each long pause under way then ends by the ring.
        async def woken() -> list[tuple[float, bool]]:
            return [pause for pause in pauses[paused_until:] if pause[0] >= 3.0]

        ended = await eventually(woken, what="the long pause under way to end")
        assert all(rang for _, rang in ended)

        async def brought() -> bool:
            return any(records for _, records in sent[-3:])

        await eventually(brought, what="a fetch with the turns")
    finally:
        await running.stop()


async def test_on_kafka_the_broker_holds_the_idle_wait_and_a_turn_brings_the_short_wait_back(tmp_path: Path) -> None:
    # Without a doorbell (as on Kafka, which answers a waiting fetch when data arrives) the whole
    # idle wait is asked of the broker.
    with EmbeddedBroker() as kafka:
        running = await start_pipeline(
            tmp_path / "data", kafka_bootstrap=kafka.bootstrap, fetch_max_wait_ms=13, fetch_idle_wait_ms=100
        )
        await _held_idle_wait(running)


async def _held_idle_wait(running: runner.Running) -> None:
    try:
        assert running.pipeline.app.doorbell is None  # type: ignore[attr-defined]
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

"""An LLM outage longer than the old retry window (3 attempts at 1, 2, 4 s) dead-letters
nothing: every snapshot is parked, retried with capped backoff, and extracted once the
provider recovers. The budget and backoff are made small through settings."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import DeadLetter
from memstream.telemetry import metrics
from memstream.topics import DEAD_LETTERS, topic_name
from tests.e2e.conftest import eventually, start_pipeline, values
from tests.e2e.test_replay_e2e import one_note_per_turn
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

#: Longer than the old window: a snapshot was dead-lettered about 7 s after its first failure.
OUTAGE_SECONDS = 10.0
SESSIONS = 6


async def test_an_outage_longer_than_the_old_retry_window_loses_nothing(tmp_path: Path) -> None:
    with FakeAnthropic(one_note_per_turn, api_key="sk-test") as claude:
        running = await start_pipeline(
            tmp_path / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=claude.base_url,
            llm_retries=0,
            park_delay=0.2,
            park_delay_max=1.0,
            retry_budget=120.0,
        )
        try:
            claude.fail_next(1_000_000, status=529)  # overloaded, until it recovers
            began = time.monotonic()
            for s in range(SESSIONS):
                turns = [
                    make_turn(session_id=f"o{s}", project=str(tmp_path / f"p{s}"), role="user", content=f"Q{s}?"),
                    make_turn(
                        session_id=f"o{s}", project=str(tmp_path / f"p{s}"), role="assistant", content=f"Answer {s}."
                    ),
                ]
                await publish(running.bootstrap, running.settings.topic_prefix, turns)
            await eventually(
                lambda: _true(metrics.PARKED_OLDEST_SECONDS.labels("extract")._value.get() > 1.0),
                what="parked snapshots",
            )
            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - began)))
            claude.clear_script()  # recovered

            async def extracted() -> bool:
                for s in range(SESSIONS):
                    stored = await running.providers.store.list([project_key(str(tmp_path / f"p{s}"))])
                    if not any(f"Note: Answer {s}." in m.text for m in stored):
                        return False
                return True

            await eventually(extracted, what="every snapshot extracted after the outage")
            letters = await _dead_letters(running)
            assert [d for d in letters if d.stage == "extract"] == []
        finally:
            await running.stop()


async def _true(value: bool) -> bool:
    return value


async def _dead_letters(running: object) -> list[DeadLetter]:
    from aiokafka import AIOKafkaConsumer

    settings = running.settings  # type: ignore[attr-defined]
    consumer = AIOKafkaConsumer(
        topic_name(settings.topic_prefix, DEAD_LETTERS),
        bootstrap_servers=running.bootstrap,  # type: ignore[attr-defined]
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=2000)
        return [v for v in values([r for rs in batch.values() for r in rs]) if isinstance(v, DeadLetter)]
    finally:
        await consumer.stop()

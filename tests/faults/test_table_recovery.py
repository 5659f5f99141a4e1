"""A plain restart recovers every table write: Faust reads each changelog up to
``consumer.highwaters``, which on Tansu must be the true end (memstream.kafka.offsets), not
ListOffsets' last batch base + 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from memstream.identity import turn_key
from memstream.schemas import encode
from memstream.topics import TURNS, topic_name
from memstream.worker import runner
from tests.conftest import make_settings
from tests.e2e.conftest import eventually
from tests.support.chaos import external_broker, workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

SESSIONS = 40


def last_contents(running: runner.Running) -> dict[str, str]:
    table: Any = running.pipeline.app.tables["snapshot-sessions"]
    return {state.session_id or key: state.applied[-1].content for key, state in table.items() if state.applied}


async def test_a_restart_recovers_the_last_write_of_every_session(tmp_path: Path) -> None:
    with external_broker() as broker:
        settings = make_settings(tmp_path / "data", kafka_bootstrap=broker.bootstrap)
        turns, _ = workload(SESSIONS, 2, str(tmp_path / "projects"), seed=5)
        turns = turns[: SESSIONS * 3]  # every session ends on its second question
        want = {t.session_id: t.content for t in turns}
        running = await runner.start(settings, loglevel="warning")
        try:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=100)
            await producer.start()
            try:
                for t in turns:
                    await producer.send(topic_name(settings.topic_prefix, TURNS), encode(t), key=turn_key(t))
                await producer.flush()
            finally:
                await producer.stop()
            await eventually(lambda: _same(last_contents(running), want), what="every turn applied")
        finally:
            await running.stop()
        restarted = await runner.start(settings, loglevel="warning")
        try:
            assert last_contents(restarted) == want
        finally:
            await restarted.stop()


async def _same(got: dict[str, str], want: dict[str, str]) -> bool:
    return got == want

"""A replay of a turns topic written in multi-record batches reproduces every turn: Tansu's
ListOffsets end is short of the true end, and the drain waits for every stage."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from memstream.identity import turn_session_key
from memstream.schemas import encode
from memstream.topics import TURNS, topic_name
from memstream.worker.replay import Start, replay
from tests.e2e.conftest import eventually, start_pipeline
from tests.support.chaos import normalized, workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

SESSIONS, EXCHANGES = 12, 3


async def test_a_replay_of_batched_turns_reproduces_every_turn(tmp_path: Path) -> None:
    live = await start_pipeline(tmp_path / "data")  # raw mode: one memory per exchange
    try:
        turns, expected = workload(SESSIONS, EXCHANGES, str(tmp_path / "projects"), seed=7)
        producer = AIOKafkaProducer(bootstrap_servers=live.bootstrap, linger_ms=200)
        await producer.start()
        try:  # sent without waiting: the producer packs them into a few large batches
            sent = [
                # Keyed as memstream's publishers key turns: by the tenant's session (a turn keyed by its
                # bare id is re-published keyed by the snapshot stage, and a replay would read it twice).
                await producer.send(
                    topic_name(live.settings.topic_prefix, TURNS),
                    encode(t),
                    key=turn_session_key(t.session_id, t.project, t.user).encode(),
                )
                for t in turns
            ]
            await producer.flush()
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

        async def stored() -> bool:
            texts = {normalized(m.text) for m in await live.providers.store.list(None, limit=10_000)}
            return set(expected) <= texts

        await eventually(stored, timeout=180, what="the live memories")
        summary = await replay(
            live.settings,
            name="batched",
            bootstrap=live.bootstrap,
            api_url=live.settings.api_url,
            # The turns went straight onto the topic, as a host's own producer sends them: they are not
            # in the durable turn log, so the replay reads the topic (from offset 0) as on a Kafka cluster.
            start=Start(offset=0),
            timeout=300,
            report=lambda label, done, total: None,
        )
        assert summary.turns == len(turns)
        assert (len(summary.added), len(summary.removed), len(summary.changed)) == (0, 0, 0), summary.render()
        assert summary.unchanged == len(expected)
    finally:
        await live.stop()

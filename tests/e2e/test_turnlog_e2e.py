"""The durable turn log against the real embedded broker: recovery publishes what is unfinished, in
order; replay reads every turn the log keeps, though a fresh broker's turns topic holds none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from memstream.identity import user_key
from memstream.intake.turnlog import TurnLog, path_of
from memstream.kafka.broker import EmbeddedBroker
from memstream.schemas import Turn
from memstream.settings import Settings
from memstream.topics import TURNS, topic_name
from memstream.worker.durable import recover
from memstream.worker.replay import Start, copy_logged_turns, reads_log
from tests.e2e.conftest import read_whole, values

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


@pytest_asyncio.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    with EmbeddedBroker() as started:
        yield started


async def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


def turn(session: str, role: str, content: str, user: str = "dev@example.com") -> Turn:
    return Turn(session_id=session, project="/p", role=role, content=content, ts=datetime.now(UTC), user=user)  # type: ignore[arg-type]


def session_order(records: list) -> dict[str, list[str]]:
    by_session: dict[str, list[str]] = {}
    for item in values(records):
        by_session.setdefault(item.session_id, []).append(item.content)
    return by_session


async def test_recovery_publishes_the_unfinished_turns_in_each_sessions_order(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, topic_prefix="durable")
    with TurnLog(path_of(settings)) as log:
        log.append([turn("a", "user", "q1"), turn("a", "assistant", "a1")])
        log.published([1, 2])
        log.mark_done(2, open_before=0)  # stored before the crash
        log.append([turn("a", "user", "q2"), turn("b", "user", "q3"), turn("a", "assistant", "a2")])
        log.append([turn("b", "assistant", "a3")])
    topic = topic_name("durable", TURNS)
    await create(broker.bootstrap, topic)
    assert await recover(settings, broker.bootstrap) == 4
    assert session_order((await read_whole(broker.bootstrap, [topic]))[topic]) == {
        "a": ["q2", "a2"],
        "b": ["q3", "a3"],
    }


async def test_replay_reads_the_log_from_the_first_turn_without_forgotten_users(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, topic_prefix="durable")
    with TurnLog(path_of(settings)) as log:
        log.append([turn("a", "user", "q1"), turn("a", "assistant", "a1")])
        log.append([turn("b", "user", "mine", user="gone@example.com"), turn("a", "user", "q2")])
        log.published([1, 2, 3, 4])
        log.mark_done(4, open_before=0)
    assert reads_log(settings, Start()) and not reads_log(settings, Start(offset=0))
    target = "durable.replay-x.turns"
    await create(broker.bootstrap, target)
    forgotten = {user_key("gone@example.com"): datetime.now(UTC)}
    copied = await copy_logged_turns(settings, broker.bootstrap, target, Start(), lambda d, t: None, forgotten)
    assert copied == 4
    replayed = values((await read_whole(broker.bootstrap, [target]))[target])
    assert session_order((await read_whole(broker.bootstrap, [target]))[target]) == {
        "a": ["q1", "a1", "q2"],
        "b": ["mine"],
    }
    assert [t.user for t in replayed if t.session_id == "b"] == [""]  # a forgotten user's turn loses its user

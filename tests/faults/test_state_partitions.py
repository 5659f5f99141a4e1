"""A session's state lives in the changelog partition of its turns' partition.

Faust gives a worker partition N of every topic of one partition count together: turns p1
with the snapshot table's changelog p1. A restarted worker shares its group with the one it
replaces until that one's session expires, so for some seconds it holds half the partitions.
The snapshot table was written by the producer's partitioner over its JSON-encoded key
(``"proj/user/s1"``, quotes included), which puts about half the sessions in another partition
than their turns: the restarted worker read their turns with none of their state, counted
their turns from 1 again, and made snapshot ids the extract stage had already done. Those
exchanges were lost (87 of 1,000 in one heavy kill run, all on one turns partition).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream.identity import turn_session_key
from memstream.intake.publish import publish
from memstream.schemas import Turn
from memstream.topics.catalog import TURNS, topic_name
from tests.e2e.conftest import read_topic, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

PARTITIONS = 4


def decode_key(key: bytes) -> str:
    """A table's changelog key: its str key as JSON (Faust's key serializer for ``key_type=str``)."""
    return str(json.loads(key))


SESSIONS = 24


async def test_each_session_state_is_in_the_partition_of_its_turns(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data", partitions=PARTITIONS)
    try:
        prefix = running.settings.topic_prefix
        now = datetime.now(UTC)
        turns = [
            Turn(session_id=f"s{i}", project="/work/p", role=role, content=f"{role} {i}", ts=now, user="ana@x.org")
            for i in range(SESSIONS)
            for role in ("user", "assistant")
        ]
        await publish(running.bootstrap, prefix, turns)
        turn_records = await read_topic(
            running.bootstrap, topic_name(prefix, TURNS), until=lambda got: len(got) >= len(turns)
        )
        turns_partition = {record.key.decode(): record.partition for record in turn_records}
        changelog = f"{prefix}-snapshot-sessions-changelog"

        def every_session_written(got: list) -> bool:
            return len({decode_key(r.key) for r in got if r.value is not None}) >= SESSIONS

        records = await read_topic(running.bootstrap, changelog, until=every_session_written)
    finally:
        await running.stop()
    misplaced = {
        decode_key(r.key): (r.partition, turns_partition[decode_key(r.key)])
        for r in records
        if r.partition != turns_partition[decode_key(r.key)]
    }
    assert not misplaced, f"{len(misplaced)} of {SESSIONS} sessions' state not beside their turns: {misplaced}"
    # The partition is the default partitioner's over the key's bytes, as every producer of turns picks it.
    key = turn_session_key("s0", "/work/p", "ana@x.org")
    assert turns_partition[key] == DefaultPartitioner()(key.encode(), list(range(PARTITIONS)), [])

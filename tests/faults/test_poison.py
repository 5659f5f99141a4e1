"""Poison records of every size class and shape: none stalls a partition, each bad one is
dead-lettered (cut to fit, with a pointer to the original), every good one is stored."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaProducer

from memstream.limits import DEAD_LETTER_PAYLOAD_MAX_BYTES
from memstream.schemas import DeadLetter, Turn, encode
from memstream.topics import DEAD_LETTERS, TURNS, topic_name
from tests.e2e.conftest import eventually, read_topic, start_pipeline, values

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

KB = 1024


def turn(session: str, role: str, content: str) -> Turn:
    # A project per session: dedup compares memories within a project only.
    return Turn(session_id=session, project=f"/tmp/poison/{session}", role=role, content=content, ts=datetime.now(UTC))  # type: ignore[arg-type]


def poison(rng: random.Random) -> list[bytes]:
    """Undecodable records from 0 bytes to 2 MiB, and well-formed ones of the wrong shape."""
    good = encode(turn("s-poison", "user", "fine"))
    shapes = [
        b"",
        os.urandom(1),
        os.urandom(100),
        b"\xff\xfe" * 500,  # invalid UTF-8
        good[: len(good) // 2],  # truncated JSON
        good.replace(b'"user"', b"42"),  # wrong type
        good.replace(b'"schema":"turn.v', b'"schema":"turn.v999'),  # unknown tag
        b"[" * 5000 + b"]" * 5000,  # deep nesting
        encode(turn("s-poison", "user", "x")).replace(b'"content":"x"', b'"content":' + b"1" * 300),
    ]
    sizes = [64 * KB, 800 * KB, 990 * KB, 2 * 1024 * KB]
    return shapes + [bytes(rng.getrandbits(8) for _ in range(16)) * (size // 16) for size in sizes]


async def test_poison_records_are_dead_lettered_and_nothing_stalls(tmp_path: Path) -> None:
    running = await start_pipeline(tmp_path / "data")
    try:
        prefix = running.settings.topic_prefix
        turns_topic = topic_name(prefix, TURNS)
        bad = poison(random.Random(2))
        producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap, max_request_size=4 * 1024 * KB)
        await producer.start()
        try:
            sent = {}  # (partition, offset) -> payload
            for i, payload in enumerate(bad):
                meta = await producer.send_and_wait(turns_topic, payload, key=f"s{i % 2}".encode())
                sent[meta.partition, meta.offset] = payload
            # Large but valid: turns of 400 KB and 900 KB (three in one session: its window
            # would be > 1 MB at full length), then ordinary exchanges that must be stored.
            large = [turn("s-large", role, f"{role} {'y' * 400 * KB}") for role in ("user", "assistant", "user")]
            large.append(turn("s-large", "assistant", "fine"))
            large += [turn("s-huge", "user", "the whole log?"), turn("s-huge", "assistant", "z" * 900 * KB)]
            normal = []
            for s in range(4):
                normal += [
                    turn(f"s-ok-{s}", "user", f"question {s} about granite"),
                    turn(f"s-ok-{s}", "assistant", f"answer {s}: quartz"),
                ]
            for t in large + normal:
                await producer.send_and_wait(turns_topic, encode(t), key=t.session_id.encode())
        finally:
            await producer.stop()

        async def stored() -> bool:
            texts = [m.text for m in await running.providers.store.list(None, limit=1000)]
            huge = any("z" * 100 in t for t in texts) and any("y" * 100 in t for t in texts)
            return huge and all(any(f"answer {s}: quartz" in t for t in texts) for s in range(4))

        await eventually(stored, what="the good turns after the poison")
        letters = values(
            await read_topic(
                running.bootstrap, topic_name(prefix, DEAD_LETTERS), until=lambda records: len(records) >= len(bad)
            )
        )
        assert all(isinstance(letter, DeadLetter) for letter in letters)
        assert len(letters) == len(bad)
        by_pointer = {(letter.partition, letter.offset): letter for letter in letters}
        assert set(by_pointer) == set(sent)
        for pointer, payload in sent.items():
            letter = by_pointer[pointer]
            assert letter.topic == turns_topic and letter.payload_bytes == len(payload)
            assert letter.payload == payload[:DEAD_LETTER_PAYLOAD_MAX_BYTES]
            assert letter.truncated == (len(payload) > DEAD_LETTER_PAYLOAD_MAX_BYTES)
            assert letter.reason
        memories = await running.providers.store.list(None, limit=1000)
        # Stored cut to the message limit (the exchanges of s-large may merge as near duplicates).
        assert all(len(msgspec.json.encode(m)) < 100 * KB for m in memories)

        # The commit passes the poison: a record no stage ever sees is done once dead-lettered,
        # or the partition never settles and a restart dead-letters it again.
        async def committed_to_the_end() -> bool:
            consumer: Any = running.pipeline.app._consumer
            turns = [tp for tp in consumer.assignment() if tp.topic == turns_topic]
            return all((consumer._committed_offset.get(tp) or 0) >= (consumer.highwater(tp) or 0) for tp in turns)

        await eventually(committed_to_the_end, what="the turns partitions committed past the poison")
    finally:
        await running.stop()

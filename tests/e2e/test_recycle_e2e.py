"""The embedded broker started afresh once it holds too much (issue 29): `memstream up` waits for a
quiet moment, starts the broker again on its port and carries over what it still holds that is
wanted (memstream.worker.recycle). Nothing a session said is lost or stored twice: a question asked
before is answered after, in one exchange; turns that came in as the worker stopped are read in the
fresh broker; a dead letter is still there to re-drive."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from memstream.identity import project_key, turn_session_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Memory
from memstream.schemas.events import Role
from memstream.topics import TURNS, topic_name
from memstream.worker import recycle, runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def memories(running: runner.Running, project: str, *holding: str) -> list[Memory] | None:
    found = await running.providers.store.list([project_key(project)])
    texts = " ".join(m.text for m in found)
    return found if all(h in texts for h in holding) else None


async def test_the_broker_is_started_afresh_and_nothing_is_lost_or_doubled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recycle, "QUIET_SECONDS", 1.0)
    project = str(tmp_path / "p")

    def turns(session: str, *pairs: tuple[Role, str]) -> list:
        return [make_turn(session_id=session, project=project, role=r, content=c) for r, c in pairs]

    running = await start_pipeline(tmp_path / "data", broker_max_mb=1)
    try:
        prefix = running.settings.topic_prefix
        recycler = recycle.Recycler(running.settings.broker_max_mb, check_seconds=0.0)
        await publish(
            running.bootstrap,
            prefix,
            turns("goes-on", ("user", "Which port does the API use?"), ("assistant", "Port 8431, set in api.toml.")),
        )
        await publish(running.bootstrap, prefix, turns("goes-on", ("user", "And which database does it use?")))
        producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap)
        await producer.start()
        try:  # a record no stage can read: a dead letter to carry over
            await producer.send_and_wait(topic_name(prefix, TURNS), b"\x00 not a turn", key=b"poison")
        finally:
            await producer.stop()
        await eventually(lambda: memories(running, project, "8431"), timeout=60, what="the first exchange")
        sessions: Any = running.pipeline.app.tables["snapshot-sessions"]
        skey = turn_session_key("goes-on", project, "")

        async def asked() -> bool:
            state = sessions.get(skey)
            return state is not None and state.applied[-1].content == "And which database does it use?"

        await eventually(asked, what="the question applied")
        # The question waits for its answer: still the broker is started afresh at a quiet moment.
        await eventually(lambda: recycler.due(running), timeout=60, what="a quiet moment")
        old_pid, bootstrap = running.broker.pid if running.broker else None, running.bootstrap

        # Turns that come in as the worker stops: read in the fresh broker if no stage finished them.
        await publish(
            running.bootstrap,
            prefix,
            turns("late", ("user", "Is the nightly green?"), ("assistant", "Yes, since 2am.")),
        )
        runtime_file, gone = running.settings.runtime_file, []

        async def watch_runtime_file() -> None:  # `up` runs on: a publish meanwhile waits, never "not running"
            while True:
                if not runtime_file.exists():
                    gone.append(time.monotonic())
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch_runtime_file())
        api = running.api
        began = time.monotonic()
        try:
            fresh = running = await recycler.recycle(running)
        finally:
            watcher.cancel()
        assert gone == [], "the runtime file was gone during the fresh start"
        assert fresh.api is api and api is not None and api.serving  # the same socket serves the fresh worker
        assert fresh.bootstrap == bootstrap and fresh.broker is not None and fresh.broker.pid != old_pid
        assert time.monotonic() - began < 60
        announced = json.loads(fresh.settings.runtime_file.read_text())  # read_runtime_file ignores its own process
        assert announced["ready"] is True and announced["bootstrap"] == bootstrap
        carried = await recycle.pending_dead_letters(fresh.bootstrap, prefix)
        assert [c.letter.payload for c in carried] == [b"\x00 not a turn"]

        await publish(fresh.bootstrap, prefix, turns("goes-on", ("assistant", "Postgres 16 on the db host.")))
        stored = await eventually(
            lambda: memories(fresh, project, "Postgres 16", "since 2am"),
            timeout=60,
            what="the answer and the late turns",
        )
        texts = sorted(m.text for m in stored)
        # The answer joined its question, asked before the fresh start; the first exchange kept its memory.
        assert any("which database" in t and "Postgres 16" in t for t in texts), texts
        assert sum("8431" in t for t in texts) == 1, texts
        assert sum("nightly green" in t for t in texts) == 1, texts
    finally:
        await running.stop()

"""A session that goes on across a restart of `memstream up` keeps every exchange.

The embedded broker keeps its topics in memory: a restart starts every table empty, and a session
still running counts its turns from 0 again. Its next exchange used to take the id of its first
one, already stored, and raw mode refreshed that memory in place: the first exchange was gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Memory
from memstream.schemas.events import Role
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


async def exchanges(running: runner.Running, project: str, wanted: int = 0, holding: str = "") -> list[Memory] | None:
    memories = await running.providers.store.list([project_key(project)])
    return memories if len(memories) >= wanted and any(holding in m.text for m in memories) else None


async def test_a_session_going_on_after_a_restart_keeps_its_first_exchanges(tmp_path: Path) -> None:
    project, data = str(tmp_path / "p"), tmp_path / "data"

    def turns(*pairs: tuple[Role, str]) -> list:
        return [make_turn(session_id="goes-on", project=project, role=r, content=c) for r, c in pairs]

    before = turns(
        ("user", "Which port does the API use?"),
        ("assistant", "Port 8431, set in api.toml."),
        ("user", "Where do the logs go?"),
        ("assistant", "To /var/log/app, rotated daily."),
    )
    running = await start_pipeline(data)
    try:
        await publish(running.bootstrap, running.settings.topic_prefix, before)
        await eventually(lambda: exchanges(running, project, 2), timeout=60, what="the two exchanges")
    finally:
        await running.stop()

    restarted = await start_pipeline(data)  # a new embedded broker: every table starts empty
    try:
        after = turns(("user", "Which database?"), ("assistant", "Postgres 16 on the db host."))
        await publish(restarted.bootstrap, restarted.settings.topic_prefix, after)
        memories = await eventually(
            lambda: exchanges(restarted, project, holding="Postgres 16"), timeout=60, what="the new exchange"
        )
        texts = sorted(m.text for m in memories)
        assert len(texts) == 3, texts
        assert any("8431" in t for t in texts) and any("/var/log/app" in t for t in texts), texts
        assert any("Postgres 16" in t for t in texts), texts
    finally:
        await restarted.stop()

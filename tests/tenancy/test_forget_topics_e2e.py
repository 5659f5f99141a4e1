"""After a forget, every topic is read back and what still holds the forgotten words is exactly
what docs/security.md says ("What remains where after a forget").

A raw-mode pipeline stores two exchanges of a project; the project is forgotten; then every
topic of the install -- the pipeline's and the tables' changelogs -- is read from its beginning
to its end. A topic "holds" the words when any record does; a compacted changelog's *current*
records (the newest per key, what remains once the broker compacts it) must hold none of them.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer

from memstream.identity import project_key, turn_session_key
from memstream.intake.forget import forget_event
from memstream.intake.publish import make_turn, publish, publish_events
from memstream.topics import FORGOTTEN
from memstream.worker import runner
from tests.e2e.conftest import eventually, read_whole, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
MARK = b"QUOKKAVAULT"
USER = "alice@example.com"
SESSION = "forget-me"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    # The tables' timers (which clear forgotten windows) look every 0.2 s.
    running = await start_pipeline(tmp_module_dir / "data", phase1_scan_interval=0.2)
    try:
        yield running
    finally:
        await running.stop()


async def read_everything(bootstrap: str, prefix: str) -> dict[str, list[tuple[bytes | None, bytes | None]]]:
    """Every record (key, value) of every topic of this install, each topic read to its end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        names = sorted(t for t in await consumer.topics() if t.startswith(prefix))
    finally:
        await consumer.stop()
    whole = await read_whole(bootstrap, names)
    return {topic: [(r.key, r.value) for r in records] for topic, records in whole.items()}


def documented() -> tuple[set[str], set[str]]:
    """The topics docs/security.md lists as still holding a forgotten scope's words, and the
    tables whose changelogs keep them only until compaction."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## What remains where after a forget", 1)[1].split("\n## ", 1)[0]
    topics: set[str] = set()
    changelogs: set[str] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        if cells[1].lower().startswith("yes"):
            (changelogs if name.endswith("-changelog") else topics).add(name)
    return topics, changelogs


async def test_what_remains_after_a_forget_is_what_the_docs_say(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "vault")
    exchanges = [
        (f"Where is the {MARK.decode()} key kept?", "In the ops vault, rotated monthly."),
        ("And who may read it?", f"Only the on-call, through the {MARK.decode()} broker."),
    ]
    turns = [
        make_turn(session_id=SESSION, project=project, role=role, content=content, user=USER)
        for question, answer in exchanges
        for role, content in (("user", question), ("assistant", answer))
    ]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)
    store = live.providers.store
    key = project_key(project)

    async def stored() -> bool:
        return sum(MARK.decode() in m.text for m in await store.list([key])) == 2

    await eventually(stored, what="both exchanges stored")
    event = forget_event(project=project, requested_by="test")
    await publish_events(live.bootstrap, live.settings.topic_prefix, FORGOTTEN, [(event.scope_key, event)])
    app = live.pipeline.app
    skey = turn_session_key(SESSION, project, USER)

    async def purged() -> bool:
        window = app.tables["snapshot-sessions"].get(skey)  # type: ignore[attr-defined]
        rollout = app.tables["rollout-state"].get(skey)  # type: ignore[attr-defined]
        return (
            await store.count([key]) == 0
            and window is not None
            and not window.applied
            and (rollout is None or not rollout.exchanges)
        )

    await eventually(purged, what="the memories and the tables' windows to go")
    records = await read_everything(live.bootstrap, live.settings.topic_prefix)
    prefix = live.settings.topic_prefix
    holding = {
        re.sub(rf"^{re.escape(prefix)}[.-]", "", topic)
        for topic, rows in records.items()
        if any(value and MARK in value for _, value in rows)
    }
    current_holding = set()
    for topic, rows in records.items():
        if topic.endswith("-changelog"):
            newest = {k: v for k, v in rows}
            if any(v and MARK in v for v in newest.values()):
                current_holding.add(topic)
    topics, changelogs = documented()
    assert current_holding == set(), "a table still holds the words in its current records"
    assert {t for t in holding if not t.endswith("-changelog")} == topics
    assert {t for t in holding if t.endswith("-changelog")} == changelogs

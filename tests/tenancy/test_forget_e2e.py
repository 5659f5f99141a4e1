"""Forgetting one user of fifty through the real pipeline (embedded broker, edge store, graph on):
after it nothing of that user comes back from search, the block, history, the graph boost, a
late (parked or replayed) fact or a replay; the other 49 are untouched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.agents.store import FORGET_CAUSE
from memstream.identity import memory_id, normalize_content, project_key, turn_session_key, user_key
from memstream.intake.forget import forget_event
from memstream.intake.publish import publish_events
from memstream.kafka.ledger import ledger_of
from memstream.recall import search as recall
from memstream.schemas import Entity, Fact, MemoryUpdated, Turn
from memstream.topics import FACTS, FORGOTTEN, MEMORY_UPDATED, TURNS, topic_name
from memstream.worker import runner
from memstream.worker.replay import read_forgotten, replayable
from tests.e2e.conftest import eventually, read_topic, start_pipeline, values

pytestmark = pytest.mark.asyncio(loop_scope="module")

USERS = [f"user{i:02d}@example.com" for i in range(50)]
VICTIM = USERS[7]
PROJECT = "/repos/shared"
SAID = datetime(2026, 11, 1, tzinfo=UTC)


def preference(user: str, i: int, *, ts: datetime = SAID, text: str = "") -> Fact:
    key = user_key(user)
    return Fact(
        fact_id=f"{key}-{i}-{ts.isoformat()}",
        text=text or f"Prefers the editor theme number {i} with zebra{i} stripes",
        type="preference",
        scope="user",
        scope_key=key,
        project=PROJECT,
        origin="test",
        entities=[Entity(source=f"zebra{i}", relationship="styles", target=f"theme{i}")],
        ts=ts,
    )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def running(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    running = await start_pipeline(tmp_module_dir / "forget", graph_enabled=True, partitions=2)
    try:
        yield running
    finally:
        await running.stop()


async def publish(running: runner.Running, facts: list[Fact]) -> None:
    await publish_events(running.bootstrap, running.settings.topic_prefix, FACTS, [(f.scope_key, f) for f in facts])


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def forgotten(running: runner.Running) -> runner.Running:
    providers = running.providers
    graph = providers.graph
    assert graph is not None
    await publish(running, [preference(user, i) for i, user in enumerate(USERS)])

    async def everyone_stored() -> bool:
        if await providers.store.count([user_key(u) for u in USERS]) < len(USERS):
            return False
        histories = [await providers.history.for_scope(user_key(u), limit=1) for u in USERS]
        entities = [await graph.entities(user_key(u), limit=1) for u in USERS]
        return all(histories) and all(entities)

    await eventually(everyone_stored, what="50 users' memories, history and graph")
    event = forget_event(user=VICTIM, requested_by="test admin")
    await publish_events(running.bootstrap, running.settings.topic_prefix, FORGOTTEN, [(event.scope_key, event)])
    victim = user_key(VICTIM)

    async def purged() -> bool:
        return (
            await providers.store.count([victim]) == 0
            and not await providers.history.for_scope(victim)
            and not await graph.entities(victim)
            and not await graph.relations(victim)
        )

    await eventually(purged, what="the victim's memories, history and graph to go")
    return running


async def test_nothing_of_the_forgotten_user_is_read_back(forgotten: runner.Running) -> None:
    providers = forgotten.providers
    victim = user_key(VICTIM)
    query = "editor theme number 7 with zebra7 stripes"
    assert await recall.search(providers, query, project_key(PROJECT), victim, limit=50) == []
    assert await recall.search(providers, query, "", victim, limit=50) == []
    block = await recall.block_memories(providers, project_key(PROJECT), victim, query)
    assert "zebra7" not in block.text and not block.memories
    assert providers.graph is not None
    boosted, _ = await providers.graph.boost_ids("zebra7 theme7", [victim])
    assert boosted == set()
    assert await providers.store.list([victim], include_superseded=True) == []
    victim_memory = memory_id(victim, normalize_content(preference(VICTIM, 7).text).content_hash)
    assert await providers.store.get(victim_memory) is None
    assert await providers.history.for_memory(victim_memory) == []
    every = await providers.store.list(None, include_superseded=True, limit=10_000)
    assert all("zebra7 " not in m.text for m in every)


async def test_downstream_services_learn_of_each_deletion_without_its_content(forgotten: runner.Running) -> None:
    victim = user_key(VICTIM)
    topic = topic_name(forgotten.settings.topic_prefix, MEMORY_UPDATED)

    def announced(records: list[Any]) -> bool:
        return any(isinstance(u, MemoryUpdated) and u.change == "deleted" for u in values(records))

    updates = [
        u for u in values(await read_topic(forgotten.bootstrap, topic, until=announced)) if u.change == "deleted"
    ]
    assert [(u.memory.scope_key, u.cause) for u in updates] == [(victim, FORGET_CAUSE)]
    assert updates[0].memory.text == "" and updates[0].memory.content_hash == "" and not updates[0].memory.source_chunk


async def test_the_other_49_are_untouched(forgotten: runner.Running) -> None:
    providers = forgotten.providers
    assert providers.graph is not None
    for i, user in enumerate(USERS):
        if user == VICTIM:
            continue
        key = user_key(user)
        memories = await providers.store.list([key], include_superseded=True)
        assert [m.text for m in memories] == [preference(user, i).text], user
        own = memory_id(key, normalize_content(preference(user, i).text).content_hash)
        assert [m.id for m in memories] == [own] and await providers.history.for_memory(own), user
        assert await providers.history.for_scope(key), user
        assert await providers.graph.entities(key), user
        hits = await recall.search(providers, f"editor theme number {i} zebra{i}", "", key, limit=5)
        assert hits and hits[0].memory.scope_key == key


async def test_a_late_fact_said_before_the_forget_stays_forgotten_a_new_one_is_kept(
    forgotten: runner.Running,
) -> None:
    """A parked snapshot's retry or a redelivery arrives after the forget with the old date."""
    providers = forgotten.providers
    victim = user_key(VICTIM)
    late = preference(VICTIM, 7, text="Prefers the late zebra7 theme said before the forget")
    fresh = preference(VICTIM, 7, ts=datetime.now(UTC) + timedelta(seconds=1), text="Prefers a brand new start")
    await publish(forgotten, [late, fresh])  # one key: applied in this order

    async def fresh_stored() -> list[str]:
        return [m.text for m in await providers.store.list([victim], include_superseded=True)]

    assert await eventually(fresh_stored, what="the fact said after the forget") == ["Prefers a brand new start"]

    async def fresh_history() -> list[Any]:
        return await providers.history.for_scope(victim)

    history = await eventually(fresh_history, what="the new fact's audit record")
    assert all("late zebra7" not in r.fact_text for r in history)


async def test_a_replay_leaves_the_forgotten_user_out(forgotten: runner.Running) -> None:
    ledger = await read_forgotten(forgotten.bootstrap, topic_name(forgotten.settings.topic_prefix, FORGOTTEN))
    assert set(ledger) == {user_key(VICTIM)}
    said = Turn(session_id="s", project=PROJECT, role="user", content="I prefer zebra7", ts=SAID, user=VICTIM)
    replayed = replayable(said, ledger)
    assert replayed is not None and replayed.user == "", "replayed without its user: nothing personal comes back"
    other = Turn(session_id="s", project=PROJECT, role="user", content="hi", ts=SAID, user=USERS[8])
    assert replayable(other, ledger) == other
    later = Turn(session_id="s", project=PROJECT, role="user", content="hi", ts=datetime.now(UTC), user=VICTIM)
    assert replayable(later, ledger) == later
    project_ledger = {project_key(PROJECT): datetime.now(UTC)}
    assert replayable(other, project_ledger) is None


async def test_a_session_that_goes_on_after_its_project_is_forgotten_starts_its_window_afresh(
    forgotten: runner.Running,
) -> None:
    """The snapshot agent's window is keyed by session: it learns of the forget from the ledger."""
    providers = forgotten.providers
    project = "/repos/window"
    said = datetime.now(UTC) - timedelta(minutes=5)

    def turn(role: str, content: str, ts: datetime) -> Turn:
        return Turn(session_id="win", project=project, role=role, content=content, ts=ts, user=USERS[8])  # type: ignore[arg-type]

    async def send(*turns: Turn) -> None:
        await publish_events(
            forgotten.bootstrap, forgotten.settings.topic_prefix, TURNS, [(t.session_id, t) for t in turns]
        )

    await send(turn("user", "the zebra vault code is forgotten-words", said), turn("assistant", "Noted.", said))

    async def stored() -> int:
        return await providers.store.count([project_key(project)])

    await eventually(stored, what="the window session's raw memory")
    event = forget_event(project=project)
    await publish_events(forgotten.bootstrap, forgotten.settings.topic_prefix, FORGOTTEN, [(event.scope_key, event)])

    async def purged() -> bool:
        return await stored() == 0

    await eventually(purged, what="the project's memories to go")
    ledger = forgotten.pipeline.app.forgotten_ledger  # type: ignore[attr-defined]

    async def known() -> bool:
        return ledger.latest(project_key(project)) is not None

    await eventually(known, what="the worker's ledger to know of the forget")
    later = datetime.now(UTC) + timedelta(seconds=1)
    await send(turn("user", "what next?", later), turn("assistant", "Ship it.", later))
    sessions = forgotten.pipeline.app.tables["snapshot-sessions"]

    async def window() -> list[str] | None:
        state = sessions.get(turn_session_key("win", project, USERS[8]))  # type: ignore[attr-defined]
        contents = [t.content for t in state.applied] if state else []
        return contents if "Ship it." in contents else None

    assert await eventually(window, what="the new turns in the window") == ["what next?", "Ship it."]
    assert all("forgotten-words" not in m.text for m in await providers.store.list([project_key(project)]))


async def test_the_admin_api_of_memstream_up_starts_a_forget(forgotten: runner.Running) -> None:
    """POST /admin/forget on the running pipeline's own API (open on loopback here: an admin)."""
    providers = forgotten.providers
    target = user_key(USERS[9])
    assert await providers.store.count([target]) == 1
    async with httpx.AsyncClient(base_url=forgotten.settings.api_url) as client:
        response = await client.post("/admin/forget", json={"user": USERS[9]})
    assert response.status_code == 202 and response.json()["scope_key"] == target
    # Known to this worker's snapshot windows before the API answered, not a fetch later.
    assert ledger_of(forgotten.pipeline.app).latest(target) is not None

    async def gone() -> bool:
        return await providers.store.count([target]) == 0 and not await providers.history.for_scope(target)

    await eventually(gone, what="the API-started forget to purge the user")
    assert await providers.store.count([user_key(USERS[10])]) == 1

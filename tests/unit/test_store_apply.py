"""The store agent's apply(): redeliveries change nothing, a newer statement revives."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from memstream.agents.store import apply
from memstream.schemas import CreateMemory, Memory, Provenance, RefreshMemory, SupersedeMemory
from memstream.store.edge import EdgeStore
from tests.unit.factories import T0, memory

pytestmark = pytest.mark.asyncio

VECTOR = [1.0, 0.0, 0.0]
#: Point ids are UUIDs.
JWT, REDIS, OTHER = (str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in ("jwt", "redis", "other"))


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[EdgeStore]:
    opened = EdgeStore(tmp_path, "test", 3)
    await opened.open()
    yield opened
    await opened.close()


def create(id: str, at: object = T0) -> CreateMemory:
    return CreateMemory(
        op_id=f"c-{id}-{at}", scope_key="p_test", memory=memory(id, created_at=at, updated_at=at), vector=VECTOR
    )


async def superseded_jwt(store: EdgeStore) -> None:
    await apply(store, create(JWT))
    await apply(store, create(REDIS, T0 + timedelta(minutes=1)))
    change = await apply(store, SupersedeMemory(op_id="s", scope_key="p_test", memory_id=JWT, superseded_by=REDIS))
    assert change is not None and change[0] == "superseded"


async def test_a_redelivered_create_keeps_history_and_supersession(store: EdgeStore) -> None:
    await superseded_jwt(store)
    change, again = await apply(store, create(JWT))  # type: ignore[misc]
    assert change == "refreshed" and again.superseded_by == REDIS
    stored = await store.get(JWT)
    assert stored is not None and stored.superseded_by == REDIS and stored.superseded_at is not None


async def test_a_newer_statement_of_a_superseded_memory_brings_it_back(store: EdgeStore) -> None:
    await superseded_jwt(store)
    stored = await store.get(JWT)
    assert stored is not None and stored.superseded_at is not None
    later = stored.superseded_at + timedelta(seconds=1)
    change, revived = await apply(store, create(JWT, later))  # type: ignore[misc]
    assert change == "created" and revived.superseded_by is None
    stored = await store.get(JWT)
    assert stored is not None and stored.active and stored.created_at == later


async def test_a_create_of_a_live_memory_is_a_refresh(store: EdgeStore) -> None:
    assert (await apply(store, create(OTHER)))[0] == "created"  # type: ignore[index]
    assert (await apply(store, create(OTHER, T0 + timedelta(hours=1))))[0] == "refreshed"  # type: ignore[index]


# --- provenance always matches the text (issue 14: 133 of 2,621 memories carried one session's text
# under another session's id) ---


def from_session(id: str, text: str, session: str, at: object = T0) -> Memory:
    return memory(
        id,
        "conversation",
        text,
        session_id=session,
        sources=[Provenance(source_type="claude", session_id=session, file=f"/s/{session}.jsonl", line=3)],
        created_at=at,
        updated_at=at,
        content_hash=f"h-{text}",
    )


async def test_a_refresh_with_new_text_carries_the_new_texts_session(store: EdgeStore) -> None:
    await apply(
        store, CreateMemory(op_id="c", scope_key="p_test", memory=from_session(JWT, "old words", "A"), vector=VECTOR)
    )
    later = from_session(REDIS, "new words", "B", T0 + timedelta(minutes=5))
    change = await apply(
        store, RefreshMemory(op_id="r", scope_key="p_test", memory_id=JWT, memory=later, vector=VECTOR)
    )
    assert change is not None
    stored = await store.get(JWT)
    assert stored is not None and stored.text == "new words"
    assert stored.session_id == "B"
    assert [s.session_id for s in stored.sources] == ["B"]


async def test_an_exact_duplicate_from_another_session_lists_every_source(store: EdgeStore) -> None:
    await apply(
        store, CreateMemory(op_id="c", scope_key="p_test", memory=from_session(JWT, "same words", "A"), vector=VECTOR)
    )
    again = from_session(JWT, "same words", "B", T0 + timedelta(minutes=5))
    await apply(store, RefreshMemory(op_id="r", scope_key="p_test", memory_id=JWT, memory=again, vector=VECTOR))
    await apply(store, RefreshMemory(op_id="r2", scope_key="p_test", memory_id=JWT, memory=again, vector=VECTOR))
    stored = await store.get(JWT)
    assert stored is not None and stored.session_id == "A"  # the text was first seen there
    assert [(s.session_id, s.file, s.line) for s in stored.sources] == [("A", "/s/A.jsonl", 3), ("B", "/s/B.jsonl", 3)]

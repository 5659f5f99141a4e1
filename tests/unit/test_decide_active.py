"""The decide stage compares a fact only with active memories (issue 25.5), and a raw exchange keeps
one memory as it goes on (issue 25.3).

A memory forgotten through ``POST /memories/{id}/forget`` is superseded in the store, but the decide
stage's table of recent memories never hears of it: a fact stated again was deduplicated onto the
hidden memory, and never became searchable again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from memstream.agents.decide import REASON_EXCHANGE_EXTENDED, Decider
from memstream.embed.base import DistanceProfile
from memstream.identity import exchange_memory_id, memory_id, normalize_content
from memstream.ports import Providers
from memstream.rules.modes import REASON_EXACT_DUPLICATE
from memstream.schemas import (
    CreateMemory,
    EmbeddedFact,
    Fact,
    HybridHit,
    Memory,
    RecentMemory,
    RefreshMemory,
    ScoredMemory,
)
from memstream.schemas.memory import FORGOTTEN_MARK
from memstream.settings import Settings

T0 = datetime(2026, 11, 1, tzinfo=UTC)
SCOPE = "p_shop"
VECTOR = [1.0, 0.0, 0.0]


class Store:
    """Memories by id; searches see the active ones only, as both real backends do."""

    def __init__(self, *memories: Memory) -> None:
        self.memories = {m.id: m for m in memories}

    async def get(self, memory_id: str) -> Memory | None:
        return self.memories.get(memory_id)

    async def search(self, *args: Any, **kwargs: Any) -> list[ScoredMemory]:
        return [ScoredMemory(memory=m, distance=0.0) for m in self.memories.values() if m.active]

    async def hybrid_search(self, *args: Any, **kwargs: Any) -> list[HybridHit]:
        return [
            HybridHit(memory=m, score=1.0, vector_score=1.0, bm25_score=None)
            for m in self.memories.values()
            if m.active
        ]


class Embedder:
    model = "test"
    dim = 3
    profile = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=0.1)


def decider(store: Store) -> Decider:
    providers = Providers(
        settings=Settings.from_env({}),
        embedder=Embedder(),  # type: ignore[arg-type]
        store=store,  # type: ignore[arg-type]
        llm=None,  # raw mode: no model decides
        history=None,  # type: ignore[arg-type]
    )
    return Decider(providers)


def fact(text: str, *, type: str = "architecture", exchange_id: str = "", ts: datetime = T0) -> EmbeddedFact:
    return EmbeddedFact(
        fact=Fact(
            fact_id=f"f-{text[:12]}-{ts.isoformat()}",
            text=text,
            type=type,  # type: ignore[arg-type]
            scope="project",
            scope_key=SCOPE,
            session_id="s1",
            exchange_id=exchange_id,
            ts=ts,
        ),
        vector=VECTOR,
        embedding_model="test",
    )


def stored(text: str, id: str = "", **fields: Any) -> Memory:
    content = normalize_content(text)
    values: dict[str, Any] = {
        "id": id or memory_id(SCOPE, content.content_hash),
        "text": content.storage,
        "type": "architecture",
        "scope": "project",
        "scope_key": SCOPE,
        "created_at": T0,
        "updated_at": T0,
        "content_hash": content.content_hash,
        "embedding_model": "test",
    }
    values.update(fields)
    return Memory(**values)


def forgotten(memory: Memory, at: datetime) -> Memory:
    return msgspec.structs.replace(memory, superseded_by=f"{FORGOTTEN_MARK}op-1", superseded_at=at)


def recent_of(memory: Memory) -> RecentMemory:
    return RecentMemory.of(id=memory.id, type=memory.type, text=memory.text, vector=VECTOR, decided_at=0.0)


# --- issue 25.3: one exchange, one memory ---


async def test_a_later_snapshot_of_an_exchange_refreshes_its_memory_in_place() -> None:
    exchange = exchange_memory_id(SCOPE, "x-1")
    first = stored("[user] Why is the export slow? [assistant] Looking.", id=exchange, type="conversation")
    longer = "[user] Why is the export slow?\n[assistant] Looking.\n[assistant] It scans without an index."
    outcome = await decider(Store(first)).decide(fact(longer, type="conversation", exchange_id="x-1"), [])
    [op] = outcome.ops
    assert isinstance(op, RefreshMemory) and op.memory_id == exchange and op.memory.id == exchange
    assert "without an index" in op.memory.text
    assert [(r.outcome, r.reason) for r in outcome.records] == [("deduped", REASON_EXCHANGE_EXTENDED)]


async def test_the_exchange_decided_on_but_not_stored_yet_is_refreshed_too() -> None:
    exchange = exchange_memory_id(SCOPE, "x-1")
    just = recent_of(stored("[user] Q [assistant] A1", id=exchange, type="conversation"))
    outcome = await decider(Store()).decide(
        fact("[user] Q\n[assistant] A1\n[assistant] A2", type="conversation", exchange_id="x-1"), [just]
    )
    [op] = outcome.ops
    assert isinstance(op, RefreshMemory) and op.memory_id == exchange


async def test_a_replayed_snapshot_of_an_exchange_is_an_exact_duplicate() -> None:
    text = "[user] Q [assistant] A1"
    exchange = exchange_memory_id(SCOPE, "x-1")
    outcome = await decider(Store(stored(text, id=exchange, type="conversation"))).decide(
        fact(text, type="conversation", exchange_id="x-1"), []
    )
    assert [r.reason for r in outcome.records] == [REASON_EXACT_DUPLICATE]


async def test_an_exchange_stored_under_its_content_id_before_is_not_stored_twice() -> None:
    text = "[user] Q [assistant] A1"
    legacy = stored(text, type="conversation")
    outcome = await decider(Store(legacy)).decide(fact(text, type="conversation", exchange_id="x-1"), [])
    [op] = outcome.ops
    assert isinstance(op, RefreshMemory) and op.memory_id == legacy.id


# --- issue 25.5: a forgotten memory absorbs nothing ---


async def test_a_fact_stated_again_after_a_forget_is_created_and_says_it_was_revived() -> None:
    text = "The API is served by uvicorn behind nginx"
    memory = stored(text)
    store = Store(forgotten(memory, T0 + timedelta(hours=1)))
    # The decide table still holds it: it was decided on minutes ago.
    outcome = await decider(store).decide(fact(text, ts=T0 + timedelta(hours=2)), [recent_of(memory)])
    [op] = outcome.ops
    assert isinstance(op, CreateMemory) and op.memory.id == memory.id
    [record] = outcome.records
    assert record.outcome == "created" and record.reason.startswith("revived: stated again after it was forgotten")


async def test_a_near_duplicate_of_a_forgotten_memory_is_not_deduplicated_onto_it() -> None:
    memory = stored("The API is served by uvicorn behind nginx")
    store = Store(forgotten(memory, T0 + timedelta(hours=1)))
    outcome = await decider(store).decide(
        fact("The API is served by uvicorn behind an nginx proxy", ts=T0 + timedelta(hours=2)), [recent_of(memory)]
    )
    [op] = outcome.ops
    assert isinstance(op, CreateMemory) and op.memory.id != memory.id
    assert [r.outcome for r in outcome.records] == ["created"]
    assert memory.id not in outcome.records[0].reason


async def test_a_replay_of_the_fact_from_before_the_forget_revives_nothing() -> None:
    text = "The API is served by uvicorn behind nginx"
    memory = stored(text)
    store = Store(forgotten(memory, T0 + timedelta(hours=1)))
    outcome = await decider(store).decide(fact(text, ts=T0), [])
    assert not outcome.records[0].reason.startswith("revived")


async def test_an_active_memory_decided_on_lately_still_absorbs_its_duplicate() -> None:
    memory = stored("The API is served by uvicorn behind nginx")
    outcome = await decider(Store()).decide(fact("The API is served by uvicorn behind nginx."), [recent_of(memory)])
    [op] = outcome.ops
    assert isinstance(op, RefreshMemory) and op.memory_id == memory.id

"""The HistoryStore contract, run against EdgeHistoryStore and ServerHistoryStore alike."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from memstream.identity import derived_id
from memstream.schemas.history import HistoryRecord
from memstream.store.history import EdgeHistoryStore, HistoryStore, ServerHistoryStore
from tests.contract.conftest import closing_all

T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
MEMORY = derived_id("memory", "kafka")
OTHER = derived_id("memory", "redis")

HistoryFactory = Callable[[], HistoryStore]


def record(
    name: str,
    *,
    memory_id: str = MEMORY,
    target_id: str = "",
    scope_key: str = "p_alpha",
    micros: int = 0,
    outcome: str = "created",
) -> HistoryRecord:
    """A record ``micros`` microseconds after T0, its id derived from ``name``."""
    return HistoryRecord(
        record_id=derived_id("history", name),
        memory_id=memory_id,
        scope_key=scope_key,
        outcome=outcome,  # type: ignore[arg-type]
        action="ADD",
        target_id=target_id,
        fact_text=f"fact {name}",
        confidence=0.8,
        ts=T0 + timedelta(microseconds=micros),
    )


def names(records: list[HistoryRecord]) -> list[str]:
    return [r.fact_text.removeprefix("fact ") for r in records]


@pytest.fixture
async def make_history(backend: str, tmp_path: Path, shared_client: AsyncQdrantClient) -> AsyncIterator[HistoryFactory]:
    """Unopened stores over one shard directory (Edge) or one in-memory instance (Qdrant)."""

    def build() -> HistoryStore:
        return EdgeHistoryStore(tmp_path) if backend == "edge" else ServerHistoryStore(client=shared_client)

    async with closing_all(build) as make:
        yield make


@pytest.fixture
async def history(make_history: HistoryFactory) -> HistoryStore:
    store = make_history()
    await store.open()
    return store


async def test_append_round_trips_exactly(history: HistoryStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    r = HistoryRecord(
        record_id=derived_id("history", "full"),
        memory_id=MEMORY,
        scope_key="p_alpha",
        outcome="blocked",
        action="UPDATE",
        target_id=OTHER,
        fact_id="f-1",
        fact_text="uses redpanda now",
        confidence=0.75,
        reason="allowUpdateDelete is off",
        review_needed=True,
        mode="controlled",
        model="claude-haiku-4-5",
        prompt_version="decide.v2",
        origin="snap-1",
        ts=datetime(2025, 5, 1, 9, 0, 0, 1, tzinfo=plus_two),
    )
    await history.append([r])
    [got] = await history.for_memory(MEMORY)
    assert got == r
    assert got.ts.utcoffset() == timedelta(hours=2)


async def test_append_is_idempotent_by_record_id(history: HistoryStore) -> None:
    await history.append([record("a"), record("b", micros=1)])
    await history.append([record("a"), record("b", micros=1)])
    assert names(await history.for_memory(MEMORY)) == ["a", "b"]
    await history.append([])


async def test_reopen_keeps_records(make_history: HistoryFactory) -> None:
    first = make_history()
    await first.open()
    await first.append([record("a")])
    await first.close()
    again = make_history()
    await again.open()
    await again.open()
    assert names(await again.for_memory(MEMORY)) == ["a"]


async def test_store_not_open_raises(make_history: HistoryFactory) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await make_history().for_scope("p_alpha")


async def test_for_memory_matches_memory_or_target_oldest_first(history: HistoryStore) -> None:
    await history.append(
        [
            record("superseded", memory_id=OTHER, target_id=MEMORY, micros=30, outcome="superseded"),
            record("created", micros=10),
            record("unrelated", memory_id=OTHER, micros=20),
            record("proposal", memory_id="", target_id=MEMORY, micros=20, outcome="blocked"),
        ]
    )
    assert names(await history.for_memory(MEMORY)) == ["created", "proposal", "superseded"]
    assert names(await history.for_memory(MEMORY, limit=2)) == ["created", "proposal"]


async def test_for_memory_of_no_memory_is_empty(history: HistoryStore) -> None:
    await history.append([record("skipped", memory_id="", outcome="skipped")])
    assert await history.for_memory("") == []


async def test_for_scope_keeps_the_newest_newest_first(history: HistoryStore) -> None:
    await history.append(
        [record(f"r{i}", micros=i) for i in range(5)] + [record("elsewhere", scope_key="p_beta", micros=9)]
    )
    assert names(await history.for_scope("p_alpha", limit=3)) == ["r4", "r3", "r2"]
    assert names(await history.for_scope("p_beta")) == ["elsewhere"]
    assert await history.for_scope("p_gamma") == []


async def test_equal_timestamps_order_by_record_id(history: HistoryStore) -> None:
    same = [record(n) for n in ("x", "y", "z")]
    await history.append(same)
    by_id = sorted(same, key=lambda r: r.record_id)
    assert await history.for_memory(MEMORY) == by_id
    assert await history.for_scope("p_alpha") == by_id[::-1]


async def test_purge_before_is_exclusive_and_batch_limited(history: HistoryStore) -> None:
    await history.append([record(f"r{i}", micros=i) for i in range(6)])
    cutoff = T0 + timedelta(microseconds=4)
    assert await history.purge_before(cutoff, limit=3) == 3
    assert names(await history.for_memory(MEMORY)) == ["r3", "r4", "r5"]
    assert await history.purge_before(cutoff, limit=3) == 1
    assert await history.purge_before(cutoff) == 0
    assert names(await history.for_memory(MEMORY)) == ["r4", "r5"]


async def test_purge_before_compares_instants_across_offsets(history: HistoryStore) -> None:
    await history.append([record("old", micros=0), record("new", micros=2)])
    cutoff = (T0 + timedelta(microseconds=1)).astimezone(timezone(timedelta(hours=-5)))
    assert await history.purge_before(cutoff) == 1
    assert names(await history.for_memory(MEMORY)) == ["new"]


async def test_purge_scope_takes_one_scope_in_batches_and_leaves_the_others(history: HistoryStore) -> None:
    """A forget: every record of the scope goes, batch by batch; 49 other scopes keep theirs."""
    scopes = [f"u_{i:016x}" for i in range(50)]
    await history.append([record(f"{s}-{j}", scope_key=s, micros=j) for s in scopes for j in range(3)])
    victim = scopes[7]
    assert await history.purge_scope(victim, limit=2) == 2
    assert await history.purge_scope(victim, limit=2) == 1
    assert await history.purge_scope(victim) == 0
    assert await history.for_scope(victim) == []
    for scope in scopes:
        if scope != victim:
            assert len(await history.for_scope(scope)) == 3, scope


async def test_purge_memories_takes_every_record_of_those_memories_only(history: HistoryStore) -> None:
    """A user's forget: the records of their exchanges in project scopes go; the others stay."""
    await history.append(
        [
            record(f"{m}-{j}", memory_id=m, scope_key="p_0000000000000001", micros=j)
            for m in ("a", "b", "c")
            for j in range(3)
        ]
    )
    assert await history.purge_memories(["a", "c"]) == 6
    assert await history.purge_memories([]) == 0
    assert await history.for_memory("a") == [] and await history.for_memory("c") == []
    assert len(await history.for_memory("b")) == 3

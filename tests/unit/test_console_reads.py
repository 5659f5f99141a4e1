"""The console's reads (issue 38): a list pages through every memory with a total, the filters use the
stored values and say why nothing matches, projects are named by path and counted by active memories,
and a history's repeats collapse into one line."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import msgspec

from memstream.console.reads import (
    Cursor,
    Filters,
    collapse_history,
    memories_page,
    memory_id_or_none,
    project_choices,
    source_values,
)
from memstream.schemas import HistoryRecord, Memory, Provenance
from memstream.store.edge import EdgeStore

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def memory(i: int, *, minutes: int | None = None, source: str = "claude-code", session: str = "") -> Memory:
    text = f"fact number {i}"
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, text)),
        text=text,
        type="architecture",
        scope="project",
        scope_key="p_alpha",
        source_chunk="",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=i if minutes is None else minutes),
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        embedding_model="test",
        session_id=session or f"sess-{i % 3}-{uuid.uuid5(uuid.NAMESPACE_URL, str(i % 3))}",
        project="/home/dev/alpha",
        sources=[Provenance(source_type=source, session_id=session)],
    )


async def stored(tmp_path: Path, memories: list[Memory]) -> EdgeStore:
    store = EdgeStore(tmp_path, "test", 4)
    await store.open()
    for m in memories:
        await store.upsert(m, [1.0, 0.0, 0.0, 0.0])
    return store


async def test_pages_reach_every_memory_once_with_the_total(tmp_path: Path) -> None:
    # 56 memories, 7 of them sharing one time (a tie across a page's edge): 50 then 6, none twice.
    many = [memory(i) for i in range(49)] + [memory(i, minutes=100) for i in range(49, 56)]
    store = await stored(tmp_path, many)
    try:
        first = await memories_page(store, ["p_alpha"], size=50)
        assert first.total == 56 and len(first.memories) == 50 and first.next is not None
        cursor = Cursor.decode(first.next.encode())
        second = await memories_page(store, ["p_alpha"], size=50, cursor=cursor)
        assert second.next is None and len(second.memories) == 6
        seen = [m.id for m in first.memories + second.memories]
        assert sorted(seen) == sorted(m.id for m in many)
        # Small pages walk the ties one by one too.
        walked: list[str] = []
        position = None
        while True:
            page = await memories_page(store, ["p_alpha"], size=3, cursor=position)
            walked += [m.id for m in page.memories]
            if page.next is None:
                break
            position = page.next
        assert sorted(walked) == sorted(seen) and len(walked) == 56
    finally:
        await store.close()


async def test_a_filtered_page_reads_on_until_it_is_full(tmp_path: Path) -> None:
    many = [memory(i, source="codex" if i % 10 == 0 else "claude-code") for i in range(300)]
    store = await stored(tmp_path, many)
    try:
        codex = Filters.parse({"source": "codex"})
        page = await memories_page(store, ["p_alpha"], keep=codex.keep, size=20)
        assert [m.text for m in page.memories][:2] == ["fact number 290", "fact number 280"]
        assert len(page.memories) == 20 and page.next is not None and page.total == 300
        rest = await memories_page(store, ["p_alpha"], keep=codex.keep, size=20, cursor=page.next)
        assert len(rest.memories) == 10 and rest.next is None
    finally:
        await store.close()


def test_filters_use_stored_values_and_explain_an_impossible_range() -> None:
    m = memory(1, source="claude-code", session="0b7e1f2a-1111-2222-3333-444455556666")
    assert source_values([m, memory(2, source="cli"), memory(3, source="publish")]) == ["claude-code", "cli", "publish"]
    assert Filters.parse({"source": "claude-code"}).keep(m)
    assert not Filters.parse({"source": "claude"}).keep(m)
    assert Filters.parse({"session": "0b7e1f2a"}).keep(m)  # a prefix of the id is enough
    assert not Filters.parse({"session": "1b7e"}).keep(m)
    backwards = Filters.parse({"since": "2026-11-20", "until": "2026-11-01"})
    assert backwards.since == date(2026, 11, 20)
    assert backwards.problems and "after" in backwards.problems[0]
    assert Filters.parse({"since": "yesterday"}).problems


def test_projects_are_named_by_path_and_counted_by_active_memories() -> None:
    choices = project_choices({"p_b": 3, "p_a": 2, "p_c": 1}, {"p_a": "/repos/zeta", "p_b": "/repos/alpha"})
    assert choices == [("p_b", "/repos/alpha (3)"), ("p_a", "/repos/zeta (2)"), ("p_c", "project p_c (1)")]


def test_a_memory_url_that_is_no_uuid_is_not_a_memory() -> None:
    assert memory_id_or_none("not-a-uuid") is None
    assert memory_id_or_none("x" * 300) is None
    some = str(uuid.uuid4())
    assert memory_id_or_none(some) == some


def test_history_collapses_repeats_in_a_row() -> None:
    def record(outcome: str, minute: int, reason: str = "") -> HistoryRecord:
        return HistoryRecord(
            record_id=f"r{minute}",
            memory_id="m",
            scope_key="p_alpha",
            outcome=outcome,  # type: ignore[arg-type]
            reason=reason,
            ts=T0 + timedelta(minutes=minute),
        )

    records = [record("created", 0)] + [record("deduped", i, "exchange_extended") for i in range(1, 14)]
    records.append(record("pinned", 20))
    shown = collapse_history(records)
    assert [(c.record.outcome, c.times) for c in shown] == [("created", 1), ("deduped", 13), ("pinned", 1)]
    assert shown[1].last == T0 + timedelta(minutes=13)
    assert msgspec.structs.asdict(shown[1].record)["reason"] == "exchange_extended"


async def test_a_slow_read_is_read_once_then_refreshed_behind_the_page() -> None:
    import asyncio

    from memstream.console.cached import Cached

    reads: list[int] = []

    async def load() -> int:
        reads.append(len(reads))
        return len(reads)

    cached = Cached(load, ttl_s=0.0)
    assert (await cached.get()).value == 1
    # Stale: the page gets the value in hand at once, a refresh runs behind it.
    assert (await cached.get()).value == 1
    for _ in range(100):
        if len(reads) == 2:
            break
        await asyncio.sleep(0.01)
    assert (await cached.get()).value == 2
    cached.forget()
    assert (await cached.get()).value >= 3

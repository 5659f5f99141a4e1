"""What the console keeps between page loads (issue 38, "every page under 200 ms at 100k"): an exact
count or a sessions list is read once per store generation (every write bumps it), and the sessions
list builds the timelines of the sessions it shows only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from memstream.console import reads, timeline
from memstream.console.cached import PerGeneration
from tests.unit.test_console_reads import memory, stored


class Counting:
    """A store's ``generation`` and a load that counts how often it ran."""

    def __init__(self) -> None:
        self.generation = 0
        self.loads = 0

    async def load(self) -> int:
        self.loads += 1
        return self.loads


async def test_a_value_is_read_again_only_when_the_store_was_written() -> None:
    store, kept = Counting(), PerGeneration()
    assert [await kept.get(store, "k", store.load) for _ in range(3)] == [1, 1, 1]
    store.generation += 1
    assert await kept.get(store, "k", store.load) == 2
    assert await kept.get(store, "other", store.load) == 3
    unversioned: Any = object()  # a store with no generation (a Qdrant server) is read every time
    assert await kept.get(unversioned, "k", store.load) == 4
    assert await kept.get(unversioned, "k", store.load) == 5


async def test_an_edge_stores_writes_change_its_generation_and_the_console_count_follows(tmp_path: Path) -> None:
    store = await stored(tmp_path, [memory(i) for i in range(5)])
    try:
        counted = 0
        real = store._count

        async def spy(select: Any) -> int:
            nonlocal counted
            counted += 1
            return await real(select)

        store._count = spy  # type: ignore[method-assign]
        assert await reads.count(store, ["p_alpha"], types=["architecture"]) == 5
        assert await reads.count(store, ["p_alpha"], types=["architecture"]) == 5
        assert counted == 1
        before = store.generation
        await store.upsert(memory(99), [1.0, 0.0, 0.0, 0.0])
        assert store.generation > before
        assert await reads.count(store, ["p_alpha"], types=["architecture"]) == 6
        assert counted == 2
    finally:
        await store.close()


def test_the_sessions_list_titles_only_the_newest_sessions_it_shows(monkeypatch: Any) -> None:
    many = [
        msgspec.structs.replace(memory(i), session_id=f"sess-{i:03d}", source_chunk=f"[user] ask {i}")
        for i in range(30)
    ]
    built: list[str] = []
    real = timeline.timeline

    def spy(session_id: str, made: Any) -> Any:
        built.append(session_id)
        return real(session_id, made)

    monkeypatch.setattr(timeline, "timeline", spy)
    rows = timeline.session_rows(many, 10)
    assert [r.session_id for r in rows] == [f"sess-{i:03d}" for i in range(29, 19, -1)]
    assert sorted(built) == sorted(r.session_id for r in rows)


async def test_a_value_kept_for_one_reader_is_never_another_readers() -> None:
    # One ReadAs is made per request: keyed by its id, a freed one's id was soon another member's, and a
    # sessions list read as alice could be served to bob. The reader is part of the key; the store's
    # writes still decide when it is read again, for every reader alike.
    from memstream.store.reader import ReadAs

    store, kept = Counting(), PerGeneration()
    underlying: Any = store
    as_alice = [await kept.get(ReadAs(underlying, "u_alice"), "sessions", store.load) for _ in range(2)]
    as_bob = await kept.get(ReadAs(underlying, "u_bob"), "sessions", store.load)
    assert as_alice == [1, 1] and as_bob == 2
    assert await kept.get(store, "sessions", store.load) == 3  # the unfiltered store is a reader of its own
    store.generation += 1
    assert await kept.get(ReadAs(underlying, "u_alice"), "sessions", store.load) == 4


async def test_a_readers_count_of_one_type_counts_only_what_the_reader_may_read(tmp_path: Path) -> None:
    # The total above a list filtered by type: through a reader (ReadAs), another member's
    # conversations are not counted (the store's filtered count was reached past the reader).
    from memstream.store.reader import ReadAs

    mine = [msgspec.structs.replace(memory(i), speaker="u_alice") for i in range(2)]
    theirs = [msgspec.structs.replace(memory(i), speaker="u_bob") for i in range(2, 5)]
    store = await stored(tmp_path, [*mine, *theirs])
    try:
        assert await reads.count(ReadAs(store, "u_alice"), ["p_alpha"], types=["architecture"]) == 2
        assert await reads.count(ReadAs(store, "u_bob"), ["p_alpha"], types=["architecture"]) == 3
        assert await reads.count(ReadAs(store, "u_alice"), ["p_alpha"]) == 2
    finally:
        await store.close()

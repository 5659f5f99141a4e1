"""A search reading most scopes names the ones it leaves out, and still reads exactly its own.

On a segment without a vector index Qdrant checks a search's filter point by point, and "scope key
is one of these 20" was the costly check: 160 ms of a 100k-memory search's 185 ms CPU. So the Edge
store keeps the scope keys its points hold and, when a reader asks for most of them, filters on
"scope key set and none of the others" (the same points). These tests hold it to "the same points"
through writes that add scopes, and check the filter's shape.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_edge import FieldCondition, IsEmptyCondition, MatchAny, MatchValue, Point, UpdateOperation

from memstream.schemas.codec import memory_to_payload
from memstream.store import edge
from memstream.store.base import DENSE_VECTOR
from memstream.store.edge import EdgeStore
from memstream.store.hosts import edge_filter, server_filter
from memstream.store.points import Select, excluding
from tests.unit.factories import memory

DIM = 8
SCOPES = ["p_a", "p_b", "p_c", "p_d"]


def mid(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"scoped-{i}"))


def vec(i: int) -> list[float]:
    v = np.random.default_rng(i).standard_normal(DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EdgeStore]:
    s = EdgeStore(tmp_path, "test", DIM)
    await s.open()
    for i in range(40):
        await s.upsert(memory(mid(i), text=f"module m{i} is built", scope_key=SCOPES[i % 4]), vec(i))
    yield s
    await s.close()


@pytest.fixture
def selects(monkeypatch: pytest.MonkeyPatch) -> list[Select]:
    """Every Select the Edge store turns into a filter."""
    seen: list[Select] = []

    def spy(select: Select) -> Any:
        seen.append(select)
        return edge_filter(select)

    monkeypatch.setattr(edge, "edge_filter", spy)
    return seen


async def found(store: EdgeStore, scopes: list[str]) -> set[str]:
    hits = await store.search(vec(999), scopes, limit=1000)
    return {h.memory.scope_key for h in hits}


# -- the rewrite ------------------------------------------------------------------------


def test_most_scopes_asked_become_the_few_left_out() -> None:
    select = Select({"scope_key": ["p_a", "p_b", "p_c"], "status": ["active"]})
    turned = excluding(select, "scope_key", frozenset(SCOPES))
    assert turned.all_of == {"status": ["active"]}
    assert turned.none_of == {"scope_key": ["p_d"]}


def test_every_scope_asked_asks_only_that_a_scope_is_set() -> None:
    turned = excluding(Select({"scope_key": SCOPES}), "scope_key", frozenset(SCOPES))
    assert turned.all_of == {} and turned.none_of == {"scope_key": []}
    assert turned  # still a filter: a point without a scope key is not read


def test_few_scopes_asked_or_scopes_not_known_stay_as_asked() -> None:
    few = Select({"scope_key": ["p_a"]})
    assert excluding(few, "scope_key", frozenset(SCOPES)) is few
    half = Select({"scope_key": ["p_a", "p_b"]})
    assert excluding(half, "scope_key", frozenset(SCOPES)) is half
    assert excluding(Select({"scope_key": SCOPES}), "scope_key", None).all_of == {"scope_key": SCOPES}
    assert excluding(Select({"type": ["decision"]}), "scope_key", frozenset(SCOPES)).none_of == {}


def test_scopes_no_point_holds_do_not_count_as_read() -> None:
    # Asked for 3 scopes, of which only p_a exists: p_a against the 3 others present, so kept as asked.
    select = Select({"scope_key": ["p_a", "p_x", "p_y"]})
    assert excluding(select, "scope_key", frozenset(SCOPES)) is select


def test_the_filters_use_match_value_for_one_value_and_must_not_for_none_of() -> None:
    flt = edge_filter(Select({"status": ["active"]}, none_of={"scope_key": ["p_d", "p_e"]}))
    assert flt is not None and isinstance(flt.must, list) and isinstance(flt.must_not, list)
    [status] = flt.must
    assert isinstance(status, FieldCondition) and isinstance(status.match, MatchValue)
    empty, others = flt.must_not
    assert isinstance(empty, IsEmptyCondition) and empty.key == "scope_key"
    assert isinstance(others, FieldCondition) and isinstance(others.match, MatchAny)
    assert others.match.value == ["p_d", "p_e"]
    server = server_filter(Select(none_of={"scope_key": []}))
    assert server is not None and isinstance(server.must_not, list) and len(server.must_not) == 1


# -- the store --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_reader_of_most_scopes_reads_exactly_them_with_the_left_out_ones_named(
    store: EdgeStore, selects: list[Select]
) -> None:
    assert await found(store, ["p_a", "p_b", "p_c"]) == {"p_a", "p_b", "p_c"}
    assert selects[-1].none_of == {"scope_key": ["p_d"]} and "scope_key" not in selects[-1].all_of
    assert await store.count(["p_a", "p_b", "p_c"]) == 30
    assert selects[-1].none_of == {"scope_key": ["p_d"]}
    assert await found(store, SCOPES) == set(SCOPES)
    assert await found(store, ["p_a"]) == {"p_a"}
    assert selects[-1].all_of["scope_key"] == ["p_a"]


@pytest.mark.asyncio
async def test_a_scope_written_after_the_scopes_were_read_is_left_out_too(
    store: EdgeStore, selects: list[Select]
) -> None:
    asked = ["p_a", "p_b", "p_c"]
    await found(store, asked)  # the scope keys are read here
    await store.upsert(memory(mid(100), text="another project's secret", scope_key="p_new"), vec(100))
    await store.refresh(mid(1), text="refreshed text", updated_at=memory(mid(1)).updated_at)
    assert await found(store, asked) == set(asked)
    assert set(selects[-1].none_of["scope_key"]) == {"p_d", "p_new"}
    assert await store.count(asked) == 30
    # A reader of every scope but the new one, and of all five.
    assert await found(store, SCOPES) == set(SCOPES)
    assert await found(store, [*SCOPES, "p_new"]) == {*SCOPES, "p_new"}


@pytest.mark.asyncio
async def test_a_write_of_unknown_scopes_makes_the_next_search_read_them_afresh(
    store: EdgeStore, selects: list[Select]
) -> None:
    await found(store, SCOPES)
    # Written as a write of unknown scopes would be: through the store's update, with no scopes given.
    point = Point(mid(200), {DENSE_VECTOR: vec(200)}, memory_to_payload(memory(mid(200), scope_key="p_new")))
    await store._run(lambda s: store._update(s, UpdateOperation.upsert_points([point])))
    # Reads of one scope or of all without a scope condition do not need the scope keys: not read for them.
    assert await store.count() == 41 and await found(store, ["p_a"]) == {"p_a"}
    assert store._scopes_at != store.generation
    assert await found(store, ["p_a", "p_b", "p_c"]) == {"p_a", "p_b", "p_c"}
    assert set(selects[-1].none_of["scope_key"]) == {"p_d", "p_new"}


@pytest.mark.asyncio
async def test_a_point_without_a_scope_key_is_read_by_no_one(store: EdgeStore) -> None:
    payload = memory_to_payload(memory(mid(300), text="module m300 is built"))
    del payload["scope_key"]
    point = Point(mid(300), {DENSE_VECTOR: vec(300)}, payload)
    await store._run(lambda s: store._update(s, UpdateOperation.upsert_points([point])))
    hits = await store.search(vec(300), SCOPES, limit=1000)
    assert mid(300) not in {h.memory.id for h in hits} and len(hits) == 40
    assert await store.count(SCOPES) == 40


@pytest.mark.asyncio
async def test_hybrid_search_of_most_scopes_finds_the_same_as_naming_them(store: EdgeStore) -> None:
    asked = ["p_a", "p_b", "p_c"]
    turned = await store.hybrid_search("module built", vec(7), asked, limit=20, min_score=0.0)
    store._scopes, store._scopes_at = None, store.generation  # scopes not known: the filter names them
    named = await store.hybrid_search("module built", vec(7), asked, limit=20, min_score=0.0)
    assert [(h.memory.id, h.score) for h in turned] == [(h.memory.id, h.score) for h in named]
    assert {h.memory.scope_key for h in turned} <= set(asked) and len(turned) == 20


async def test_a_scope_list_that_misses_a_scope_still_returns_only_the_scopes_asked(store: EdgeStore) -> None:
    """Were the kept scope keys ever short of one (a write that bypassed ``_update``), the filter "none of
    the others" would let that scope's memories through; the store checks what it read back against the
    scopes asked, so a reader still sees exactly its own."""
    await found(store, SCOPES[:3])  # the scope keys are listed now
    stray = memory(mid(500), text="module m500 is built", scope_key="p_stray")
    point = Point(stray.id, {DENSE_VECTOR: vec(999)}, memory_to_payload(stray))
    # Written behind the store's back: its scope list stays as it was.
    await store._run(lambda s: s.update(UpdateOperation.upsert_points([point])))
    asked = SCOPES[:3]
    assert await found(store, asked) <= set(asked)
    hits = await store.hybrid_search("module m500 is built", vec(999), asked, limit=100, min_score=0.0)
    assert hits and {h.memory.scope_key for h in hits} <= set(asked)

"""Issue 40.2: a query that names a time prefers memories said then (memstream.recall.dates)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memstream.recall import search as recall
from memstream.recall.dates import TIME_POOL, TIME_WEIGHT, anchored, said_then
from memstream.rules.dates import time_named
from memstream.schemas.memory import HybridHit
from tests.unit.factories import memory
from tests.unit.test_graph_boost import FakeStore, providers

NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)
MAY = datetime(2026, 5, 12, 10, 0, tzinfo=UTC)
JULY = datetime(2026, 7, 2, 10, 0, tzinfo=UTC)


def hit(id: str, score: float, said: datetime) -> HybridHit:
    return HybridHit(
        memory=memory(id, "conversation", created_at=said, updated_at=said),
        score=score,
        vector_score=score,
        bm25_score=None,
    )


def ids(hits: list[HybridHit]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_memory_said_in_the_named_month_climbs_over_a_slightly_better_match() -> None:
    hits = [hit("july", 0.80, JULY), hit("may", 0.70, MAY)]
    fused = said_then(hits, time_named("the trip last May", NOW))
    assert ids(fused) == ["may", "july"]
    assert fused[0].score == 0.70 + TIME_WEIGHT  # the score shown is the one ranked on


def test_a_query_naming_no_time_is_ranked_as_before() -> None:
    hits = [hit("july", 0.80, JULY), hit("may", 0.70, MAY)]
    assert said_then(hits, time_named("the trip", NOW)) == hits


async def test_search_prefers_what_was_said_then_from_a_wider_pool(tmp_path: Path) -> None:
    store = FakeStore([hit("july", 0.80, JULY), hit("may", 0.70, MAY)])
    found = await recall.search_scopes(
        providers(tmp_path, store, None), "the trip last May", ["p_test"], limit=2, session_weight=0, now=NOW
    )
    assert ids(found) == ["may", "july"] and store.limits == [TIME_POOL]
    plain = await recall.search_scopes(
        providers(tmp_path, store, None), "the trip", ["p_test"], limit=2, session_weight=0, now=NOW
    )
    assert ids(plain) == ["july", "may"]


#: A conversation held in 2023, searched in 2026 (a chat imported or replayed long after it was held).
MAY_2023 = datetime(2023, 5, 20, 18, 0, tzinfo=UTC)
AUGUST_2023 = datetime(2023, 8, 3, 18, 0, tzinfo=UTC)


def test_a_relative_time_that_holds_no_candidate_is_read_as_of_the_newest_candidate() -> None:
    hits = [hit("august", 0.80, AUGUST_2023), hit("may", 0.70, MAY_2023)]
    span = anchored("what was Jonah reading last May?", NOW, hits)
    assert span is not None and (span.start, span.end) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 6, 1, tzinfo=UTC),
    )
    assert ids(said_then(hits, span)) == ["may", "august"]


def test_a_relative_time_that_holds_a_candidate_keeps_the_clock() -> None:
    hits = [hit("july", 0.80, JULY), hit("may", 0.70, MAY), hit("may-2023", 0.75, MAY_2023)]
    span = anchored("the trip last May", NOW, hits)
    assert span == time_named("the trip last May", NOW)
    assert ids(said_then(hits, span)) == ["may", "july", "may-2023"]


def test_an_absolute_time_and_no_time_are_read_as_named() -> None:
    hits = [hit("august", 0.80, AUGUST_2023)]
    assert anchored("the talk in May 2025", NOW, hits) == time_named("the talk in May 2025", NOW)
    assert anchored("the trip", NOW, hits) is None
    assert anchored("last May", NOW, []) == time_named("last May", NOW)


async def test_search_reads_last_may_of_a_conversation_held_years_ago(tmp_path: Path) -> None:
    store = FakeStore([hit("august", 0.80, AUGUST_2023), hit("may", 0.70, MAY_2023)])
    found = await recall.search_scopes(
        providers(tmp_path, store, None),
        "what was Jonah reading last May",
        ["p_test"],
        limit=2,
        session_weight=0,
        now=NOW,
    )
    assert ids(found) == ["may", "august"]

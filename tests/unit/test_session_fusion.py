"""Session-aware fusion (issue 25.9): the other hits of a hit's session vouch for it."""

from __future__ import annotations

from pathlib import Path

from memstream.recall import search as recall
from memstream.recall.sessions import session_fusion
from memstream.schemas.memory import HybridHit
from tests.unit.factories import memory
from tests.unit.test_graph_boost import FakeStore, providers


def hit(id: str, score: float, session: str = "") -> HybridHit:
    return HybridHit(
        memory=memory(id, "conversation", session_id=session), score=score, vector_score=score, bm25_score=None
    )


def ids(hits: list[HybridHit]) -> list[str]:
    return [h.memory.id for h in hits]


def test_an_exchange_whose_session_also_matches_climbs_above_a_lone_one() -> None:
    hits = [hit("lone", 0.80, "a"), hit("x1", 0.78, "b"), hit("x2", 0.70, "b")]
    assert ids(session_fusion(hits, 0.3)) == ["x1", "x2", "lone"]  # 0.99, 0.934, 0.80


def test_the_best_hit_of_a_session_is_vouched_for_by_the_second_best() -> None:
    hits = [hit("b1", 0.9, "b"), hit("b2", 0.5, "b"), hit("c", 0.95, "c")]
    fused = session_fusion(hits, 0.2)  # b1: 0.9 + 0.1 = 1.0; b2: 0.5 + 0.18; c: 0.95
    assert ids(fused) == ["b1", "c", "b2"]


def test_memories_without_a_session_keep_their_own_score() -> None:
    hits = [hit("fact", 0.9), hit("other", 0.85), hit("s1", 0.6, "s"), hit("s2", 0.6, "s")]
    assert ids(session_fusion(hits, 0.3)) == ["fact", "other", "s1", "s2"]  # 0.78 each, ties keep order


def test_the_score_is_the_one_ranked_by_and_weight_zero_changes_nothing() -> None:
    # Search answers showed the score from before fusion (0.926, 0.828, 1.0, 0.702 ... best first: issue 37.6).
    hits = [hit("lone", 0.80, "a"), hit("x1", 0.78, "b"), hit("x2", 0.70, "b")]
    assert session_fusion(hits, 0.0) == hits
    fused = session_fusion(hits, 0.3)
    assert [(h.memory.id, round(h.score, 3)) for h in fused] == [("x1", 0.99), ("x2", 0.934), ("lone", 0.8)]
    assert [(h.vector_score, h.bm25_score) for h in fused] == [(0.78, None), (0.70, None), (0.80, None)]


def test_a_time_named_with_nothing_said_then_keeps_the_fused_order() -> None:
    # said_then re-sorts by score: on the pre-fusion score it undid session fusion for every query naming a time.
    from datetime import UTC, datetime

    from memstream.recall.dates import said_then
    from memstream.rules.dates import Span

    hits = [hit("lone", 0.80, "a"), hit("x1", 0.78, "b"), hit("x2", 0.70, "b")]
    never = Span(datetime(1990, 1, 1, tzinfo=UTC), datetime(1990, 2, 1, tzinfo=UTC), "in January 1990")
    assert ids(said_then(session_fusion(hits, 0.3), never)) == ["x1", "x2", "lone"]


async def test_search_ranks_with_session_fusion_from_its_own_pool(tmp_path: Path) -> None:
    # Three hits for ten asked: the lone exchange first by score, the session of two first once fused.
    store = FakeStore([hit("lone", 0.80, "a"), hit("x1", 0.78, "b"), hit("x2", 0.70, "b")])
    found = await recall.search_scopes(providers(tmp_path, store, None), "export", ["p_test"], limit=2)
    assert ids(found) == ["x1", "x2"] and store.limits == [recall.SESSION_POOL]
    off = await recall.search_scopes(providers(tmp_path, store, None), "export", ["p_test"], limit=2, session_weight=0)
    assert ids(off) == ["lone", "x1"]


def test_a_session_with_many_hits_in_the_pool_shares_its_vouching_among_them() -> None:
    # Everyday chat (issue 40): a session of small talk matches a little everywhere; vouching at full weight
    # for each of its four hits lifted all four over the one exchange that matched best, so the top 5 held
    # two sessions. Shared among its three other hits, each gains a third: the best match stays first.
    hits = [hit("a", 0.75, "a"), hit("s1", 0.70, "s"), hit("s2", 0.69, "s"), hit("s3", 0.68, "s"), hit("s4", 0.67, "s")]
    fused = session_fusion(hits, 0.2)
    assert ids(fused) == ["a", "s1", "s2", "s3", "s4"]
    assert [round(h.score, 4) for h in fused] == [0.75, round(0.70 + 0.2 * 0.69 / 3, 4), 0.7367, 0.7267, 0.7167]


def test_a_session_of_two_hits_still_vouches_at_full_weight() -> None:
    hits = [hit("a", 0.75, "a"), hit("s1", 0.70, "s"), hit("s2", 0.69, "s")]
    assert [(h.memory.id, round(h.score, 3)) for h in session_fusion(hits, 0.2)] == [
        ("s1", 0.838),
        ("s2", 0.83),
        ("a", 0.75),
    ]


async def test_search_keeps_the_best_match_above_a_session_that_floods_its_pool(tmp_path: Path) -> None:
    flood = [hit(f"s{n}", 0.70 - n / 100, "s") for n in range(6)]
    store = FakeStore([hit("a", 0.74, "a"), *flood])
    found = await recall.search_scopes(providers(tmp_path, store, None), "the blue bowl", ["p_test"], limit=3)
    assert ids(found) == ["a", "s0", "s1"]

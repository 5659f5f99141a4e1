"""Recall's fusion (store.base.fuse_normalized): Pipeline v2's weighted sum over per-query scaled legs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from memstream.schemas import Memory
from memstream.schemas.memory import HybridHit
from memstream.store.base import bm25_score, fuse, fuse_normalized, leg_scaled

T0 = datetime(2025, 3, 4, tzinfo=UTC)


def memory(name: str) -> Memory:
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        text=name,
        type="conversation",
        scope="project",
        scope_key="p_alpha",
        created_at=T0,
        updated_at=T0,
        content_hash=name,
        embedding_model="m",
    )


A, B, C, D = (memory(n) for n in "abcd")


def order(hits: Sequence[HybridHit]) -> list[Memory]:
    return [h.memory for h in hits]


def test_leg_scaled_maps_the_best_to_one_and_the_lowest_to_zero() -> None:
    assert leg_scaled({"a": 0.85, "b": 0.82, "c": 0.80}) == pytest.approx({"a": 1.0, "b": 0.4, "c": 0.0})
    # One candidate, or all equal: each is that leg's best match.
    assert leg_scaled({"a": 0.3}) == {"a": 1.0}
    assert leg_scaled({"a": 0.5, "b": 0.5}) == {"a": 1.0, "b": 1.0}
    assert leg_scaled({}) == {}


def test_a_weak_keyword_match_no_longer_sinks_the_nearest_memory() -> None:
    # e5-like cosines, all within a few hundredths; B shares one common word with the query.
    dense = [(A, 0.86), (B, 0.85), (C, 0.80), (D, 0.79)]
    lexical = [(C, 9.0), (B, 0.6)]
    # Pipeline v2's raw fusion: B's weak BM25 (0.375) drags it under C and D, scored by one leg.
    raw = fuse(dense, lexical, alpha=0.7, min_score=0.0, limit=4)
    assert order(raw) == [A, C, D, B]
    # Scaled, each leg spans [0, 1]: B near the top of the vector leg and in the BM25 leg stays second.
    scaled = fuse_normalized(dense, lexical, alpha=0.7, min_score=0.0, limit=4)
    assert order(scaled) == [A, B, C, D]


def test_scores_are_the_weighted_sum_of_scaled_legs_and_a_missing_leg_counts_zero() -> None:
    dense = [(A, 0.9), (B, 0.8), (C, 0.7)]
    lexical = [(C, 3.0), (D, 1.0)]
    hits = {h.memory.id: h for h in fuse_normalized(dense, lexical, alpha=0.6, min_score=0.0, limit=10)}
    assert hits[A.id].score == pytest.approx(0.6 * 1.0)
    assert hits[B.id].score == pytest.approx(0.6 * 0.5)
    assert hits[C.id].score == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert hits[D.id].score == pytest.approx(0.4 * 0.0)
    # The hits keep each leg's raw score for the caller: cosine, and BM25 as |s| / (1 + |s|).
    assert hits[C.id].vector_score == pytest.approx(0.7) and hits[C.id].bm25_score == pytest.approx(bm25_score(3.0))
    assert hits[A.id].bm25_score is None and hits[D.id].vector_score is None


def test_alpha_one_is_the_vector_order_and_alpha_zero_the_bm25_order() -> None:
    dense = [(A, 0.9), (B, 0.8), (C, 0.7)]
    lexical = [(C, 3.0), (B, 1.0), (A, 0.5)]
    assert order(fuse_normalized(dense, lexical, alpha=1.0, min_score=0.0, limit=3)) == [A, B, C]
    assert order(fuse_normalized(dense, lexical, alpha=0.0, min_score=0.0, limit=3)) == [C, B, A]


def test_one_leg_alone_keeps_its_order_and_limit_and_min_score_apply() -> None:
    dense = [(A, 0.9), (B, 0.8), (C, 0.7)]
    assert order(fuse_normalized(dense, [], alpha=0.5, min_score=0.0, limit=2)) == [A, B]
    assert order(fuse_normalized([], [(C, 2.0), (D, 1.0)], alpha=0.5, min_score=0.0, limit=5)) == [C, D]
    assert order(fuse_normalized(dense, [], alpha=0.5, min_score=0.2, limit=5)) == [A, B]
    assert fuse_normalized([], [], alpha=0.5, min_score=0.0, limit=5) == []


def test_ties_go_by_id_and_out_of_range_cosines_are_clamped() -> None:
    dense = [(B, 1.0000001), (A, 1.0), (C, -0.2)]
    hits = fuse_normalized(dense, [], alpha=1.0, min_score=0.0, limit=3)
    assert order(hits)[:2] == sorted([A, B], key=lambda m: m.id)
    assert [h.vector_score for h in hits] == [1.0, 1.0, 0.0]

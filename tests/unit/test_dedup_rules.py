"""The extraction spec step 4: memstream.rules.dedup."""

from __future__ import annotations

import math

import pytest

from memstream.embed.base import DistanceProfile
from memstream.rules.dedup import Duplicate, cosine_distance, cosine_distances, find_duplicate, remember, threshold
from memstream.schemas import MEMORY_TYPES, STRUCTURAL_TYPES, RecentMemory, ScoredMemory
from tests.unit.factories import memory

#: The extraction spec's values for voyage-code-3.
PROFILE = DistanceProfile(0.12, 0.25, 0.35)


def scored(id: str, distance: float, type: str = "architecture") -> ScoredMemory:
    return ScoredMemory(memory(id, type), distance)


def recent(id: str, vector: list[float], type: str = "architecture", decided_at: float = 0.0) -> RecentMemory:
    return RecentMemory(id=id, type=type, text=f"text of {id}", vector=vector, decided_at=decided_at)


def unit_at_distance(d: float) -> list[float]:
    """A 2-d unit vector whose cosine distance to (1, 0) is ``d``."""
    cos = 1.0 - d
    return [cos, math.sqrt(1.0 - cos * cos)]


QUERY = [1.0, 0.0]


# --- threshold ---


@pytest.mark.parametrize("kind", sorted(STRUCTURAL_TYPES))
def test_structural_types_use_the_wider_threshold(kind: str) -> None:
    assert threshold(kind, PROFILE) == 0.25


@pytest.mark.parametrize("kind", sorted(set(MEMORY_TYPES) - STRUCTURAL_TYPES))
def test_general_types_use_the_narrow_threshold(kind: str) -> None:
    assert threshold(kind, PROFILE) == 0.12


def test_structural_types_are_the_five_of_seed_001() -> None:
    assert {"project-brief", "architecture", "tech-context", "product-context", "project-config"} == STRUCTURAL_TYPES


def test_threshold_follows_the_profile() -> None:
    other = DistanceProfile(0.03, 0.07, 0.1)
    assert (threshold("progress", other), threshold("tech-context", other)) == (0.03, 0.07)


# --- cosine_distance ---


def test_cosine_distance_values() -> None:
    assert cosine_distance([1, 0], [1, 0]) == pytest.approx(0.0, abs=1e-6)
    assert cosine_distance([1, 0], [0, 1]) == pytest.approx(1.0, abs=1e-6)
    assert cosine_distance([1, 0], [-1, 0]) == pytest.approx(2.0, abs=1e-6)
    assert cosine_distance([3, 4], [6, 8]) == pytest.approx(0.0, abs=1e-6)  # scale does not matter
    assert cosine_distance([1, 1], [1, 0]) == pytest.approx(1 - 1 / math.sqrt(2), abs=1e-6)


def test_cosine_distance_with_a_zero_vector_is_one() -> None:
    assert cosine_distance([0, 0], [1, 0]) == 1.0
    assert cosine_distance([0, 0], [0, 0]) == 1.0


# --- find_duplicate ---


def test_closest_stored_memory_within_threshold_wins() -> None:
    stored = [scored("far", 0.20), scored("closest", 0.05), scored("near", 0.10)]
    assert find_duplicate("architecture", QUERY, stored, [], PROFILE) == Duplicate("closest", 0.05)


def test_closest_across_stored_and_recent() -> None:
    stored = [scored("stored", 0.10)]
    hits = [recent("recent", unit_at_distance(0.04))]
    dup = find_duplicate("architecture", QUERY, stored, hits, PROFILE)
    assert dup is not None
    assert dup.memory_id == "recent"
    assert dup.distance == pytest.approx(0.04, abs=1e-5)


def test_stored_beats_a_farther_recent_memory() -> None:
    dup = find_duplicate(
        "architecture", QUERY, [scored("stored", 0.02)], [recent("recent", unit_at_distance(0.08))], PROFILE
    )
    assert dup == Duplicate("stored", 0.02)


def test_other_types_are_ignored_even_when_identical() -> None:
    stored = [scored("summary", 0.0, type="session-summary")]
    hits = [recent("progress", QUERY, type="progress")]
    assert find_duplicate("architecture", QUERY, stored, hits, PROFILE) is None


def test_beyond_threshold_is_not_a_duplicate() -> None:
    assert find_duplicate("progress", QUERY, [scored("s", 0.13, "progress")], [], PROFILE) is None
    assert find_duplicate("architecture", QUERY, [scored("s", 0.26)], [], PROFILE) is None
    assert find_duplicate("progress", QUERY, [], [recent("r", unit_at_distance(0.2), "progress")], PROFILE) is None


def test_general_type_at_structural_distance_is_not_a_duplicate() -> None:
    # 0.2 would dedupe an architecture fact but not an error-solution.
    assert find_duplicate("error-solution", QUERY, [scored("s", 0.2, "error-solution")], [], PROFILE) is None
    assert find_duplicate("architecture", QUERY, [scored("s", 0.2)], [], PROFILE) == Duplicate("s", 0.2)


def test_distance_equal_to_threshold_counts_as_duplicate() -> None:
    assert find_duplicate("progress", QUERY, [scored("g", 0.12, "progress")], [], PROFILE) == Duplicate("g", 0.12)
    assert find_duplicate("tech-context", QUERY, [scored("s", 0.25, "tech-context")], [], PROFILE) == Duplicate(
        "s", 0.25
    )


def test_back_to_back_duplicate_is_caught_through_the_recent_list_only() -> None:
    # The store does not show the first memory yet: nothing stored, only the dedup table knows it.
    vector = [0.6, 0.8]
    dup = find_duplicate("progress", vector, [], [recent("just-created", [0.6, 0.8], "progress")], PROFILE)
    assert dup is not None
    assert dup.memory_id == "just-created"
    assert dup.distance == pytest.approx(0.0, abs=1e-6)


def test_nothing_to_compare_is_no_duplicate() -> None:
    assert find_duplicate("architecture", QUERY, [], [], PROFILE) is None


# --- remember ---


def test_remember_appends() -> None:
    a, b = recent("a", QUERY, decided_at=100.0), recent("b", QUERY, decided_at=101.0)
    assert remember([a], b, now=101.0, keep_seconds=60, keep=10) == [a, b]


def test_remember_replaces_the_same_id() -> None:
    old = recent("a", [1.0, 0.0], decided_at=100.0)
    other = recent("b", QUERY, decided_at=100.5)
    new = RecentMemory(id="a", type="architecture", text="refreshed", vector=[0.0, 1.0], decided_at=101.0)
    assert remember([old, other], new, now=101.0, keep_seconds=60, keep=10) == [other, new]


def test_remember_drops_expired_memories() -> None:
    expired = recent("expired", QUERY, decided_at=10.0)
    edge = recent("edge", QUERY, decided_at=40.0)  # exactly keep_seconds old: kept
    fresh = recent("fresh", QUERY, decided_at=65.0)
    new = recent("new", QUERY, decided_at=70.0)
    assert remember([expired, edge, fresh], new, now=70.0, keep_seconds=30, keep=10) == [edge, fresh, new]


def test_remember_bounds_the_length_keeping_the_newest() -> None:
    items = [recent(f"m{i}", QUERY, decided_at=float(i)) for i in range(5)]
    new = recent("new", QUERY, decided_at=5.0)
    assert [m.id for m in remember(items, new, now=5.0, keep_seconds=100, keep=3)] == ["m3", "m4", "new"]


def test_remember_does_not_mutate_its_input() -> None:
    items = [recent("a", QUERY, decided_at=1.0)]
    remember(items, recent("b", QUERY, decided_at=2.0), now=2.0, keep_seconds=10, keep=1)
    assert [m.id for m in items] == ["a"]


def test_packed_and_numeric_vectors_dedup_alike() -> None:
    """Table values written before vectors were packed still decide the same way."""
    vector = [0.6, 0.8]
    packed = RecentMemory.of(id="p", type="architecture", text="t", vector=vector, decided_at=1.0)
    numeric = RecentMemory(id="n", type="architecture", text="t", vector=vector, decided_at=1.0)
    assert packed.vector == [] and len(packed.packed) == 8
    for kept in (packed, numeric):
        found = find_duplicate("architecture", [0.6, 0.8], [], [kept], PROFILE)
        assert found is not None and found.memory_id == kept.id and found.distance < 1e-6


def test_cosine_distances_match_one_by_one_and_zero_vectors_are_one() -> None:
    vectors = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [6.0, 8.0], [0.0, 0.0]]
    recent = [
        RecentMemory.of(id=f"m{i}", type="architecture", text="t", vector=v, decided_at=0.0)
        for i, v in enumerate(vectors)
    ]
    together = cosine_distances([3.0, 4.0], recent).tolist()
    assert together == pytest.approx([cosine_distance([3.0, 4.0], v) for v in vectors], abs=1e-6)
    assert together[-1] == 1.0
    assert cosine_distances([1.0, 0.0], []).shape == (0,)


# --- conversation exchanges are evidence: only exact duplicates merge ---


def test_distinct_exchanges_close_in_embedding_space_never_merge() -> None:
    """Raw mode merged 318 of 2,939 distinct exchanges at e5 distances of 0.02-0.07 (issue 14)."""
    e5 = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=0.125)
    stored = [scored("other exchange", 0.02, type="conversation")]
    hits = [recent("just decided", unit_at_distance(0.01), type="conversation")]
    assert find_duplicate("conversation", QUERY, stored, hits, e5) is None
    assert find_duplicate("conversation", QUERY, stored, hits, PROFILE) is None

"""Pipeline v2's maintenance worker rules: diagnostics and score, recommendations, rate limits, halt tracker."""

from __future__ import annotations

import pytest

from memstream.rules.maintenance import (
    HALT_AFTER,
    WEIGHTS,
    HaltTracker,
    Limit,
    QueueHealth,
    StoreHealth,
    diagnose,
    recent,
    recommend,
    record_run,
    refusal,
    reset,
    stuck_partitions,
)

HEALTHY_QUEUE = QueueHealth(events=1000, dead_letters=5)
HEALTHY_STORE = StoreHealth(memories=100, superseded=20)


def test_a_healthy_memstream_scores_one_and_needs_nothing() -> None:
    report = diagnose(HEALTHY_QUEUE, HEALTHY_STORE)
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)
    assert report.score == pytest.approx(1.0 - WEIGHTS["dead_letters"] * 0.05)  # 0.5% dead: a little off
    assert recommend(report) == []
    assert diagnose(QueueHealth(), StoreHealth()).score == 1.0  # nothing yet is healthy


def test_every_problem_is_recommended_with_its_reason() -> None:
    queue = QueueHealth(events=1000, dead_letters=20, parked_backlog=3, consumer_lag=7, stuck_partitions=["t:0"])
    store = StoreHealth(memories=100, superseded=40, missing_sparse=2, missing_dense=1, missing_indexes=["type"])
    report = diagnose(queue, store)
    assert [(r.action, r.reason) for r in recommend(report)] == [
        ("requeue_dead_letters", "dead-letter rate 2.00% > 1% (20 of 1000 events)"),
        ("repair_sparse_vectors", "2 memories without BM25 terms"),
        ("repair_indexes", "missing payload indexes: type"),
        ("retention_sweep", "tombstones 40.0% > 30% (40 of 100 memories)"),
        ("reembed", "1 memories without their embedding"),
    ]
    assert 0.0 <= report.score < diagnose(HEALTHY_QUEUE, HEALTHY_STORE).score
    assert report.parts["stuck"] == 0.5 and report.parts["indexes"] == 0.8  # 1 of 5 missing


def test_thresholds_are_strict_as_in_the_seed() -> None:
    at_threshold = diagnose(QueueHealth(events=100, dead_letters=1), StoreHealth(memories=10, superseded=3))
    assert recommend(at_threshold) == []  # exactly 1% dead and exactly 30% tombstones
    dead_without_events = diagnose(QueueHealth(dead_letters=1), StoreHealth())
    assert [r.action for r in recommend(dead_without_events)] == ["requeue_dead_letters"]


@pytest.mark.parametrize(
    ("queue", "store"),
    [
        (
            QueueHealth(
                events=1, dead_letters=10**6, parked_backlog=10**9, consumer_lag=10**9, stuck_partitions=["a"] * 50
            ),
            StoreHealth(
                memories=10,
                superseded=10,
                missing_sparse=10,
                missing_dense=10,
                missing_indexes=["a", "b", "c", "d", "e"],
            ),
        ),
        (QueueHealth(), StoreHealth(memories=1)),
    ],
)
def test_the_score_stays_in_the_unit_interval(queue: QueueHealth, store: StoreHealth) -> None:
    assert 0.0 <= diagnose(queue, store).score <= 1.0


def test_repairs_raise_the_score() -> None:
    broken = diagnose(
        QueueHealth(events=100, dead_letters=10), StoreHealth(memories=10, superseded=8, missing_sparse=1)
    )
    fixed = diagnose(QueueHealth(events=100), StoreHealth(memories=2, superseded=0))
    assert fixed.score > broken.score


def test_cooldown_and_hourly_budget() -> None:
    limit = Limit(cooldown=60.0, hourly_budget=3)
    assert refusal([], 1000.0, limit) is None
    assert refusal([990.0], 1000.0, limit) == "cooldown: last run 10s ago, 60s needed"
    assert refusal([100.0, 500.0, 900.0], 1000.0, limit) == "hourly budget of 3 runs spent"
    assert refusal([-3000.0, 500.0, 900.0], 1000.0, limit) is None  # the first is over an hour old
    assert recent([-3000.0, 500.0, 900.0], 1000.0) == [500.0, 900.0]


def test_the_halt_tracker_stops_an_action_after_three_misses_in_a_row() -> None:
    tracker = HaltTracker()
    for _ in range(HALT_AFTER - 1):
        tracker = record_run(tracker, "retention_sweep", improved=False)
    assert tracker.halted == [] and tracker.misses["retention_sweep"] == 2
    tracker = record_run(tracker, "retention_sweep", improved=True)  # an improvement breaks the run
    assert tracker.misses["retention_sweep"] == 0
    for _ in range(HALT_AFTER):
        tracker = record_run(tracker, "retention_sweep", improved=False)
    tracker = record_run(tracker, "reembed", improved=False)
    assert tracker.halted == ["retention_sweep"]
    # A cycle with nothing to recommend resets it.
    assert reset(tracker) == HaltTracker()


def test_stuck_partitions_are_those_with_work_and_no_progress() -> None:
    ends = {"t:0": 10, "t:1": 10, "t:2": 5}
    committed = {"t:0": 4, "t:1": 10, "t:2": 3}
    assert stuck_partitions(None, committed, ends) == []
    assert stuck_partitions({"t:0": 4, "t:1": 9, "t:2": 2}, committed, ends) == ["t:0"]

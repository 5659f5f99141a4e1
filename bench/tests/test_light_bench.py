"""bench.perf.light's arithmetic: the soak's slope and the rows it prints."""

from __future__ import annotations

import pytest

from bench.perf import light


def test_slope_is_least_squares_over_the_points() -> None:
    assert light._slope([(10, 100.0), (20, 101.0), (30, 102.0)]) == pytest.approx(0.1)
    assert light._slope([(10, 5.0)]) == 0.0
    assert light._slope([(10, 5.0), (10, 7.0)]) == 0.0  # no spread in x: no slope to tell


def test_rows_show_each_figure_with_its_before_and_limit() -> None:
    soak = {
        "turns": 720,
        "start": {"worker_mb": 180.0, "broker_mb": 18.0},
        "idle": {"worker_mb": 181.0, "broker_mb": 18.0},
        "end": {"worker_mb": 200.0, "broker_mb": 70.0, "memories": 720},
        "points": [],
        "worker_kb_per_turn": 2.0,
        "broker_kb_per_turn": 70.0,
        "broker_cpu_ms_per_turn": [1.5, 2.25],
    }
    quiet = {"p50_ms": 120.0, "p99_ms": 180.0}
    results = {
        "seconds": 60.0,
        "pause": 10.0,
        "soak_speedup": 50.0,
        "idle": [{"worker_pct": 0.5, "broker_pct": 0.25}, {"worker_pct": 0.7, "broker_pct": 0.3}],
        "idle_before": [{"worker_pct": 2.5, "broker_pct": 5.5}, None],
        "quiet": quiet,
        "quiet_before": {"p50_ms": 170.0, "p99_ms": 200.0},
        "quiet_unrung": {"p50_ms": 1100.0, "p99_ms": 2100.0},
        "soak": soak,
        "soak_before": None,
        "bounded_mb": 30,
        "soak_bounded": {
            **soak,
            "turns": 360,
            "end": {"worker_mb": 230.0, "broker_mb": 30.4, "memories": 360, "fresh_starts": 1, "broker_peak_mb": 34.8},
        },
    }
    rows = {name: (figure, limit, note) for name, figure, limit, note in light.rows(results)}
    figure, limit, note = rows["h. idle: worker + broker CPU"]
    assert figure.startswith("0.75% of a core (0.75–1.00)") and limit == "≤ 1% of a core"
    assert "before (6654f39): 8.00% of a core" in note
    figure, limit, note = rows["c. … after 10 s of quiet"]
    assert figure == "p50 120 ms, p99 180 ms" and "before: p50 170 ms" in note and "p99 2100 ms" in note
    figure, _, note = rows["i. soak slope, broker"]
    # 70 KB a turn at 360 turns an hour.
    assert figure.startswith("70.0 KB/turn = 24.6 MB/hour") and "before: not measured" in note
    figure, _, note = rows["i. RSS of the broker"]
    assert figure == "start 18 MB, idle 18, after 720 turns 70"
    assert "100k turns at this slope: 6,854 MB" in note
    assert rows["i. broker CPU per turn, soak"][0] == "1.5 ms in the first half, 2.2 ms in the second"
    figure, limit, note = rows["i. broker RSS, bounded soak"]
    assert figure == "peak 35 MB, 1 fresh starts, 360 of 360 turns became memories"
    assert limit.startswith("≤ the bound (30 MB)") and "without it the broker ends at 70 MB" in note


def test_per_turn_is_the_cpu_between_two_samples() -> None:
    assert light._per_turn((100, 1.0), (300, 1.5)) == pytest.approx(2.5)
    assert light._per_turn((100, 1.0), (100, 1.5)) == 0.0

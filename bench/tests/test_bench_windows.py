"""bench.quality.retrieval's window grain (issue 40.1): an exchange's window is its neighbours and itself."""

from __future__ import annotations

import pytest

from bench.quality.retrieval import windows


def test_a_window_holds_the_exchanges_around_its_center_within_its_session() -> None:
    exchanges = [("a:0", "u0", "r0"), ("a:1", "u1", "r1"), ("a:2", "u2", "r2"), ("b:0", "v0", "s0")]
    grain = dict(windows(exchanges, 1))
    assert grain["a:0"] == "[user] u0\n[assistant] r0\n[user] u1\n[assistant] r1"
    assert grain["a:1"].count("[user]") == 3
    assert grain["b:0"] == "[user] v0\n[assistant] s0"  # another session's exchanges stay out


def test_a_mean_window_costs_no_embedding_its_vector_is_its_exchanges_mean() -> None:
    from bench.quality.retrieval import mean_windows

    exchanges = [("a:0", "u0", "r0"), ("a:1", "u1", "r1"), ("a:2", "u2", "r2"), ("b:0", "v0", "s0")]
    vectors = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    centered = {key: (text, vector) for key, text, vector in mean_windows(exchanges, vectors, 1)}
    assert centered["a:0"][1] == pytest.approx([2**-0.5, 2**-0.5])  # itself and the next, normalized
    assert centered["a:1"][0].count("[user]") == 3
    assert centered["b:0"] == ("[user] v0\n[assistant] s0", [0.0, 1.0])  # alone in its session
    trailing = {key: text for key, text, _ in mean_windows(exchanges, vectors, 1, trailing=True)}
    assert trailing["a:2"].count("[user]") == 3 and trailing["a:0"].count("[user]") == 1  # no look ahead


def test_a_session_gets_one_made_up_day_within_the_two_years() -> None:
    from datetime import UTC, datetime

    from bench.quality.retrieval import session_day

    days = {session_day(f"s{i}") for i in range(200)}
    assert session_day("s1") == session_day("s1")
    assert all(datetime(2024, 1, 1, tzinfo=UTC) <= d < datetime(2026, 1, 1, tzinfo=UTC) for d in days)
    assert len({(d.year, d.month) for d in days}) > 12  # spread over many months, not one

"""bench.quality.retrieval's window grain (issue 40.1): an exchange's window is its neighbours and itself."""

from __future__ import annotations

from bench.quality.retrieval import windows


def test_a_window_holds_the_exchanges_around_its_center_within_its_session() -> None:
    exchanges = [("a:0", "u0", "r0"), ("a:1", "u1", "r1"), ("a:2", "u2", "r2"), ("b:0", "v0", "s0")]
    grain = dict(windows(exchanges, 1))
    assert grain["a:0"] == "[user] u0\n[assistant] r0\n[user] u1\n[assistant] r1"
    assert grain["a:1"].count("[user]") == 3
    assert grain["b:0"] == "[user] v0\n[assistant] s0"  # another session's exchanges stay out

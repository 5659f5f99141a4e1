"""A worker that makes no progress for a bounded time is not live, not only not ready (issue 35.6)."""

from __future__ import annotations

from types import SimpleNamespace

from faust.types import TP

from memstream.telemetry import health

FACTS = TP("memstream-facts", 0)


class FakeConsumer:
    should_stop = False

    def __init__(self) -> None:
        self._read_offset = {FACTS: 3}  # read position 4

    def assignment(self) -> set[TP]:
        return {FACTS, TP("memstream-windows-changelog", 0)}

    def highwater(self, tp: TP) -> int:
        return 449  # 445 records to read


def fake_app() -> SimpleNamespace:
    agent = SimpleNamespace(name="embed", _actors=[SimpleNamespace(crashed=False)])
    return SimpleNamespace(
        _consumer=FakeConsumer(),
        _fetcher=SimpleNamespace(should_stop=False, crashed=False),
        _producer=None,
        agents={"embed": agent},
        rebalancing=False,
    )


def test_a_partition_stalled_past_the_live_bound_makes_the_worker_not_live() -> None:
    app, watch = fake_app(), health.Watch(stall_seconds=120, live_stall_seconds=600)
    first = health.status(app, started=True, announced=True, watch=watch, now=1000.0)
    assert first.live and first.ready
    ready_lost = health.status(app, started=True, announced=True, watch=watch, now=1130.0)
    assert ready_lost.live and not ready_lost.ready
    assert "memstream-facts[0] has 445 records to read and has not moved" in ready_lost.problems
    stuck = health.status(app, started=True, announced=True, watch=watch, now=1600.0)
    assert not stuck.live and stuck.label == "unhealthy"
    assert any(problem.startswith("not live: no progress") for problem in stuck.problems)


def test_a_partition_that_moves_stays_live() -> None:
    app, watch = fake_app(), health.Watch(stall_seconds=120, live_stall_seconds=600)
    for step in range(10):
        app._consumer._read_offset[FACTS] = 3 + step
        status = health.status(app, started=True, announced=True, watch=watch, now=1000.0 + 100 * step)
        assert status.live and status.ready


def test_an_idle_partition_is_never_stalled() -> None:
    app, watch = fake_app(), health.Watch(stall_seconds=120, live_stall_seconds=600)
    app._consumer._read_offset[FACTS] = 448  # read to its end
    for now in (1000.0, 2000.0, 5000.0):
        assert health.status(app, started=True, announced=True, watch=watch, now=now).ready

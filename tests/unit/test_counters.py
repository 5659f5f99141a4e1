"""Stats counters buffered between timer flushes (issue 18: fewer changelog records per turn)."""

from __future__ import annotations

import asyncio
from typing import Any

from memstream.agents.counters import Counters, added, counters
from memstream.schemas import HistoryStats, StoreStats


class Table(dict[str, Any]):
    """A Faust table's mapping side; counts its writes, as each is one changelog record."""

    writes = 0

    def __setitem__(self, key: str, value: Any) -> None:
        self.writes += 1
        super().__setitem__(key, value)


def test_counts_add_field_by_field() -> None:
    assert added(StoreStats(created=2, skipped=1), StoreStats(created=1, refreshed=4)) == StoreStats(
        created=3, refreshed=4, skipped=1
    )


def test_many_events_make_one_write_per_scope_per_flush() -> None:
    table = Table({"p_a": StoreStats(created=10)})
    stats = Counters(table, StoreStats)  # type: ignore[arg-type]
    for _ in range(5):
        stats.add("p_a", StoreStats(created=1))
    stats.add("p_b", StoreStats(skipped=1))
    assert table.writes == 0
    assert stats.get("p_a") == StoreStats(created=15)  # the table's row and what is pending

    stats.flush()

    assert table.writes == 2
    assert table == {"p_a": StoreStats(created=15), "p_b": StoreStats(skipped=1)}
    stats.flush()  # nothing pending: nothing written
    assert table.writes == 2


def test_a_flush_adds_to_what_the_table_holds_then() -> None:
    table = Table()
    stats = Counters(table, HistoryStats)  # type: ignore[arg-type]
    stats.add("p_a", HistoryStats(records=2, review_needed=1))
    table["p_a"] = HistoryStats(records=7)  # recovered from the changelog meanwhile
    stats.flush()
    assert table["p_a"] == HistoryStats(records=9, review_needed=1)


class StoppingApp:
    """What ``counters()`` uses of a Faust app: its tasks, mode's stop-aware sleep, ``should_stop``.

    Its table refuses writes once the app stopped, as Faust's does when its producer is gone
    (``NotReady: Producer service not yet started``, which crashed the app on stop).
    """

    def __init__(self) -> None:
        self.stopped = asyncio.Event()
        self.tasks: list[Any] = []
        self.slept = asyncio.Event()

    @property
    def should_stop(self) -> bool:
        return self.stopped.is_set()

    def task(self, fun: Any) -> Any:
        self.tasks.append(fun)
        return fun

    async def sleep(self, seconds: float) -> None:
        self.slept.set()
        await self.stopped.wait()  # mode's sleep returns at once when the service stops


class RefusingTable(Table):
    def __init__(self, app: StoppingApp) -> None:
        super().__init__()
        self.app = app

    def __setitem__(self, key: str, value: Any) -> None:
        if self.app.should_stop:
            raise RuntimeError("Producer service not yet started")
        super().__setitem__(key, value)


def test_an_idle_flush_task_waits_for_a_count_and_a_stop_during_its_wait_writes_nothing() -> None:
    app = StoppingApp()
    table = RefusingTable(app)
    stats = counters(app, table, StoreStats, "store-stats")  # type: ignore[arg-type]
    (flush,) = app.tasks

    async def scenario() -> None:
        running = asyncio.ensure_future(flush())
        await asyncio.sleep(0.01)
        assert not app.slept.is_set()  # no count: the task sleeps on nothing, wakes for nothing
        stats.add("p_a", StoreStats(created=1))
        await asyncio.wait_for(app.slept.wait(), 5)
        app.stopped.set()  # the worker stops while the count waits for its flush
        await asyncio.wait_for(running, 5)  # the task ends instead of writing through a stopped producer

    asyncio.run(scenario())
    assert table.writes == 0

"""Stats counters buffered between timer flushes (issue 18: fewer changelog records per turn)."""

from __future__ import annotations

from typing import Any

from memstream.agents.counters import Counters, added
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

"""A state table's changelog: in the partition of its key's input records, newest write kept.

The partition is pinned end to end in tests/faults/test_state_partitions.py; here, the rules on
the table class the stages really use: where a key goes, how writes are counted, and what
recovery keeps when two records of one key come from two partitions (those written before the
partitioning changed stay in their old partition).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from memstream.agents.base import key_partition, state_table
from memstream.kafka.transport import MemstreamApp
from memstream.schemas import SessionState

PARTITIONS = 4


@pytest.fixture
def table() -> Iterator[Any]:
    app = MemstreamApp("unit-state-table", broker="kafka://127.0.0.1:9", store="memory://", autodiscover=False)
    table: Any = state_table(app, "sessions", PARTITIONS, use_partitioner=True, versioned=True)
    sent: list[tuple[int | None, Any, Any]] = []

    def send_changelog(partition: int | None, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append((partition, key, value))
        return SimpleNamespace(message=SimpleNamespace(partition=partition))  # what the producer gives back

    table.send_changelog = send_changelog
    table.sent = sent
    yield table


def record(key: str, value: SessionState | None, partition: int) -> Any:
    message = SimpleNamespace(value=None if value is None else b"state", partition=partition)
    return SimpleNamespace(key=key, value=value, message=message)


def test_a_key_goes_where_the_default_partitioner_puts_its_bytes() -> None:
    partitioner = DefaultPartitioner()
    for i in range(200):
        key = f"p_1/u_2/s{i}"
        assert key_partition(key, PARTITIONS) == partitioner(key.encode(), list(range(PARTITIONS)), [])
        assert key_partition(key.encode(), PARTITIONS) == key_partition(key, PARTITIONS)


def test_a_write_goes_to_the_partition_of_its_key(table: Any) -> None:
    table["p_1/u_2/s7"] = SessionState(assistant_turns=1)
    [(partition, key, _)] = table.sent
    assert (key, partition) == ("p_1/u_2/s7", key_partition("p_1/u_2/s7", PARTITIONS))


def test_each_write_counts_one_more_version(table: Any) -> None:
    table["s"] = SessionState(assistant_turns=1)
    table["s"] = SessionState(assistant_turns=2)  # a value built afresh still counts on
    table["s"] = table["s"]
    assert [value.version for _, _, value in table.sent] == [1, 2, 3]
    assert table["s"].version == 3


def test_recovery_keeps_the_newest_write_whatever_partition_comes_last(table: Any) -> None:
    new = SessionState(assistant_turns=5, version=3)
    old = SessionState(assistant_turns=2)  # written before writes were counted, in its old partition
    table.apply_changelog_batch([record("s", new, 2), record("t", old, 0)])
    table.apply_changelog_batch([record("s", old, 0), record("t", SessionState(assistant_turns=3, version=1), 1)])
    assert table["s"].assistant_turns == 5
    assert table["t"].assistant_turns == 3


def test_recovery_applies_one_partition_in_its_order(table: Any) -> None:
    table.apply_changelog_batch([record("s", SessionState(assistant_turns=n, version=n), 1) for n in (1, 2, 3)])
    assert table["s"].assistant_turns == 3
    table.apply_changelog_batch([record("s", SessionState(assistant_turns=0), 0), record("s", None, 1)])
    assert "s" not in table  # a delete is applied whatever the version


def test_a_carried_state_is_adopted_once_by_its_key_or_all_at_a_scan(table: Any) -> None:
    """States carried over to a fresh broker (memstream.worker.recycle) enter the table when a stage
    first asks for their key, or at its next scan; a key written meanwhile keeps its own state."""
    table.app.carried_states = {
        "sessions": {"a": SessionState(assistant_turns=3), "b": SessionState(assistant_turns=5), "c": SessionState()}
    }
    table["c"] = SessionState(assistant_turns=9)  # a turn started it before its carried state was adopted
    assert table.adopt("a").assistant_turns == 3 and table["a"].assistant_turns == 3
    assert table.adopt("a") is None  # adopted once
    assert table.adopt("nobody") is None
    table.adopt_all()
    assert (table["b"].assistant_turns, table["c"].assistant_turns) == (5, 9)
    assert table.app.carried_states["sessions"] == {}
    assert [key for _, key, _ in table.sent] == ["c", "a", "b"]

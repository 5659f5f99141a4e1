"""A session's state lost to a fresh embedded broker must not remake its stored ids.

The embedded broker keeps its topics in memory, so every `memstream up` starts the snapshot stage's
tables empty. A session that goes on afterwards counts its assistant turns from 0 again; with ids
derived from the count alone, its next exchange took the id of its first one, already stored, and
raw mode refreshed that memory with the new text: the first exchange was lost."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.identity import derived_id
from memstream.rules.snapshot import exchange_id, lineage_of, snapshot_id

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 26, 9, 30, tzinfo=UTC)


def test_a_state_started_by_a_later_turn_makes_other_ids() -> None:
    first, later = lineage_of(T0, "user", "Which port?"), lineage_of(T1, "user", "Which database?")
    assert exchange_id("s", 0, first) != exchange_id("s", 0, later)
    assert snapshot_id("s", first, 1, "raw") != snapshot_id("s", later, 1, "raw")


def test_a_state_started_again_by_the_same_turn_makes_the_same_ids() -> None:
    """A state lost before its first write was durable is started again by the same turn, redelivered."""
    assert lineage_of(T0, "user", "Which port?") == lineage_of(T0, "user", "Which port?")
    assert lineage_of(T0, "user", "Which port?") not in (
        lineage_of(T1, "user", "Which port?"),
        lineage_of(T0, "assistant", "Which port?"),
        lineage_of(T0, "user", "Which port? "),
    )


def test_a_state_from_before_lineages_keeps_its_ids() -> None:
    """States recovered from a changelog written before lineages go on with the ids they made."""
    assert exchange_id("s", 2) == exchange_id("s", 2, "") == derived_id("s", "exchange", "2")
    assert snapshot_id("s", "", 3, "raw") == derived_id("s", "3", "raw")
    assert snapshot_id("s", "", 3, "raw", "pending:1:Q") == derived_id("s", "3", "raw", "pending:1:Q")
    assert exchange_id("s", -1, "x") == ""

"""Pipeline v2's retention sweep: memstream.rules.retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memstream.rules import retention
from memstream.rules.retention import (
    BATCH_LIMIT,
    STEPS,
    SWEEP_INTERVAL,
    Cutoffs,
    RetentionWindows,
    cutoffs,
    purge_batch,
)

NOW = datetime(2025, 6, 30, 12, 0, tzinfo=UTC)


def test_defaults_are_the_seeds() -> None:
    assert RetentionWindows() == RetentionWindows(tombstone_days=30, history_days=180)
    assert BATCH_LIMIT == 500
    assert timedelta(hours=6) == SWEEP_INTERVAL


def test_steps_run_links_then_vectors_then_memories_then_history() -> None:
    assert STEPS == ("graph-links", "embeddings", "tombstones", "history")


def test_job_steps_do_not_apply_and_the_docstring_says_why() -> None:
    assert not any("job" in step for step in STEPS)
    doc = retention.__doc__ or ""
    assert "dead-letter topic" in doc and "Kafka topics" in doc


def test_default_cutoffs() -> None:
    assert cutoffs(NOW, RetentionWindows()) == Cutoffs(
        tombstone_before=datetime(2025, 5, 31, 12, 0, tzinfo=UTC),
        history_before=datetime(2025, 1, 1, 12, 0, tzinfo=UTC),
    )


def test_custom_windows() -> None:
    result = cutoffs(NOW, RetentionWindows(tombstone_days=7, history_days=0))
    assert result.tombstone_before == NOW - timedelta(days=7)
    assert result.history_before == NOW  # a zero window expires everything already past


def test_cutoffs_keep_the_zone_of_now() -> None:
    paris = timezone(timedelta(hours=2))
    local = NOW.astimezone(paris)
    result = cutoffs(local, RetentionWindows())
    assert result.tombstone_before.tzinfo == paris
    assert result.tombstone_before == cutoffs(NOW, RetentionWindows()).tombstone_before


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        cutoffs(datetime(2025, 6, 30, 12, 0), RetentionWindows())


@pytest.mark.parametrize("field", ["tombstone_days", "history_days"])
def test_negative_windows_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must not be negative"):
        RetentionWindows(**{field: -1})


def test_windows_are_frozen() -> None:
    with pytest.raises(AttributeError):
        RetentionWindows().tombstone_days = 1  # type: ignore[misc]


# --- purge_batch ---


def aged(*days: int) -> list[tuple[str, datetime]]:
    return [(f"m{d}", NOW - timedelta(days=d)) for d in days]


def when(item: tuple[str, datetime]) -> datetime:
    return item[1]


def test_purge_batch_takes_only_what_expired_oldest_first() -> None:
    before = cutoffs(NOW, RetentionWindows()).tombstone_before
    batch = purge_batch(aged(10, 45, 31, 29, 400), when, before)
    assert [name for name, _ in batch] == ["m400", "m45", "m31"]


def test_the_cutoff_itself_has_not_expired() -> None:
    before = NOW - timedelta(days=30)
    batch = purge_batch([("edge", before), ("older", before - timedelta(seconds=1))], when, before)
    assert [name for name, _ in batch] == ["older"]


def test_purge_batch_is_bounded_by_the_batch_limit() -> None:
    items = aged(*range(31, 31 + 1_200))
    batch = purge_batch(items, when, NOW - timedelta(days=30))
    assert len(batch) == BATCH_LIMIT
    # The oldest go first, so a backlog drains in age order across sweeps.
    assert batch[0][0] == "m1230" and batch[-1][0] == f"m{1230 - BATCH_LIMIT + 1}"


def test_purge_batch_limit_is_configurable() -> None:
    assert len(purge_batch(aged(40, 50, 60), when, NOW, limit=2)) == 2
    assert purge_batch(aged(40, 50), when, NOW, limit=0) == []
    assert purge_batch(aged(40, 50), when, NOW, limit=-3) == []


def test_purge_batch_of_nothing_is_empty() -> None:
    assert purge_batch([], when, NOW) == []
    assert purge_batch(aged(1, 2), when, NOW - timedelta(days=30)) == []

"""The memory spec's aging rules: memstream.rules.aging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstream.rules.aging import condense_prompt, stale_progress, summaries_to_condense
from memstream.schemas import Memory

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def memory(
    id: str, type: str = "progress", *, minutes: int = 0, created: int | None = None, **fields: object
) -> Memory:
    """A memory updated ``minutes`` after T0 (and created ``created`` minutes after, default the same)."""
    values: dict[str, object] = {
        "id": id,
        "text": f"text of {id}",
        "type": type,
        "scope": "project",
        "scope_key": "p_test",
        "created_at": T0 + timedelta(minutes=minutes if created is None else created),
        "updated_at": T0 + timedelta(minutes=minutes),
        "content_hash": f"h-{id}",
        "embedding_model": "test",
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


# --- stale_progress ---


def test_older_progress_is_stale() -> None:
    new = memory("new", minutes=10)
    older = [memory("a", minutes=1), memory("b", minutes=5)]
    assert [m.id for m in stale_progress(new, [*older, new])] == ["a", "b"]


def test_progress_as_old_as_the_new_one_is_stale() -> None:
    new = memory("new", minutes=10)
    assert [m.id for m in stale_progress(new, [memory("same-time", minutes=10)])] == ["same-time"]


def test_newer_progress_is_never_stale() -> None:
    new = memory("late-arrival", minutes=10)
    newer = memory("newer", minutes=11)
    assert stale_progress(new, [newer]) == []
    assert [m.id for m in stale_progress(new, [memory("old", minutes=1), newer])] == ["old"]


def test_the_new_progress_never_makes_itself_stale() -> None:
    new = memory("new", minutes=10)
    assert stale_progress(new, [new]) == []
    # Same id seen again from the store with an older timestamp: still itself.
    assert stale_progress(new, [memory("new", minutes=3)]) == []


def test_superseded_progress_is_ignored() -> None:
    new = memory("new", minutes=10)
    gone = memory("gone", minutes=1, superseded_by="x")
    assert stale_progress(new, [gone]) == []


def test_no_other_progress_is_nothing_stale() -> None:
    assert stale_progress(memory("new"), []) == []


# --- summaries_to_condense ---


def summaries(n: int) -> list[Memory]:
    # Given out of order on purpose.
    return [memory(f"s{i}", "session-summary", minutes=i) for i in reversed(range(n))]


def test_at_or_under_the_cap_nothing_is_condensed() -> None:
    assert summaries_to_condense(summaries(0), 3) == []
    assert summaries_to_condense(summaries(2), 3) == []
    assert summaries_to_condense(summaries(3), 3) == []


def test_four_summaries_condense_the_oldest_one() -> None:
    assert [m.id for m in summaries_to_condense(summaries(4), 3)] == ["s0"]


def test_five_summaries_condense_the_two_oldest_oldest_first() -> None:
    assert [m.id for m in summaries_to_condense(summaries(5), 3)] == ["s0", "s1"]


def test_age_is_by_creation_not_update() -> None:
    items = [
        memory("created-first", "session-summary", created=0, minutes=100),
        memory("b", "session-summary", minutes=1),
        memory("c", "session-summary", minutes=2),
        memory("d", "session-summary", minutes=3),
    ]
    assert [m.id for m in summaries_to_condense(items, 3)] == ["created-first"]


def test_ties_on_creation_time_break_by_id() -> None:
    items = [memory(i, "session-summary", minutes=0) for i in ("d", "b", "a", "c")]
    assert [m.id for m in summaries_to_condense(items, 3)] == ["a"]
    assert [m.id for m in summaries_to_condense(items, 2)] == ["a", "b"]


def test_superseded_summaries_do_not_count() -> None:
    items = [*summaries(3), memory("old-superseded", "session-summary", minutes=-5, superseded_by="s2")]
    assert summaries_to_condense(items, 3) == []
    items.append(memory("s3", "session-summary", minutes=3))
    assert [m.id for m in summaries_to_condense(items, 3)] == ["s0"]


def test_condense_prompt_carries_the_summary() -> None:
    summary = memory("s", "session-summary", text="Worked on auth; chose JWT.")
    assert "Worked on auth; chose JWT." in condense_prompt(summary)

"""memstream.kafka.order: a stage takes each partition's events in offset order, none missing between."""

from __future__ import annotations

import logging

import pytest
from faust.types import TP

from memstream.kafka.order import HOLE_SEEKS, Order, Take

TURNS = TP("turns", 0)
OTHER = TP("turns", 1)


def takes(order: Order, stage: str, offsets: list[int], tp: TP = TURNS) -> list[Take]:
    return [order.take(stage, tp, offset, handed_before_a_seek=False) for offset in offsets]


def test_a_stage_takes_contiguous_offsets_from_wherever_it_starts_when_nothing_was_committed() -> None:
    order = Order()
    order.start(TURNS, None)  # never committed: read from the beginning, whatever offset that is

    assert takes(order, "snapshot", [7, 8, 9]) == [Take.TAKE] * 3
    assert order.next_offset("snapshot", TURNS) == 10


def test_the_first_event_past_the_committed_offset_seeks_back_to_it() -> None:
    order = Order()
    order.start(TURNS, 12)

    assert takes(order, "snapshot", [13]) == [Take.SEEK]
    assert order.next_offset("snapshot", TURNS) == 12


def test_a_gap_is_sought_back_once_and_events_handed_on_before_the_seek_are_passed_over() -> None:
    order = Order()
    assert takes(order, "snapshot", [10, 11]) == [Take.TAKE, Take.TAKE]

    assert takes(order, "snapshot", [13]) == [Take.SEEK]  # 12 was dropped before the stage
    order.sought(TURNS, 12)
    queued = [order.take("snapshot", TURNS, offset, handed_before_a_seek=True) for offset in (14, 15)]
    assert queued == [Take.PASS, Take.PASS]  # the seek reads them again
    assert takes(order, "snapshot", [12, 13, 14]) == [Take.TAKE] * 3


def test_events_a_stage_took_already_are_passed_over_when_they_come_again() -> None:
    order = Order()
    takes(order, "snapshot", [0, 1, 2, 3])

    assert takes(order, "snapshot", [1, 2, 3, 4]) == [Take.PASS, Take.PASS, Take.PASS, Take.TAKE]


def test_each_stage_and_partition_has_its_own_place() -> None:
    order = Order()
    takes(order, "extract", [0, 1, 2, 3])
    takes(order, "history", [0, 1])
    takes(order, "extract", [0], tp=OTHER)

    # A seek back for history (to 2) reads again what extract took: extract passes it over.
    assert takes(order, "history", [2, 3]) == [Take.TAKE, Take.TAKE]
    assert takes(order, "extract", [2, 3, 4]) == [Take.PASS, Take.PASS, Take.TAKE]
    assert takes(order, "extract", [1], tp=OTHER) == [Take.TAKE]


def test_a_seek_for_one_stage_moves_no_other_that_still_holds_events_before_it() -> None:
    order = Order()
    takes(order, "fast", [10, 11, 12])
    takes(order, "slow", [10])
    assert takes(order, "fast", [14]) == [Take.SEEK]  # fast seeks the partition back to 13
    order.sought(TURNS, 13)

    # slow's events 11-13 were handed on before that seek: in order, it takes them.
    slow = [order.take("slow", TURNS, offset, handed_before_a_seek=True) for offset in (11, 12, 13)]
    assert slow == [Take.TAKE] * 3


def test_a_stage_behind_a_seek_for_another_seeks_back_itself() -> None:
    order = Order()
    takes(order, "slow", [10])  # slow takes 11 next
    takes(order, "fast", [10, 11, 12, 13, 14])
    order.sought(TURNS, 20)  # fast's seek back to 20: 11 is not read again
    stale = order.take("slow", TURNS, 15, handed_before_a_seek=True)

    assert stale == Take.SEEK
    assert order.next_offset("slow", TURNS) == 11


def test_a_committed_seek_moves_a_stage_behind_it_forward() -> None:
    order = Order()
    takes(order, "snapshot", [0, 1])
    order.start(TURNS, 40)  # every stage finished everything before 40

    assert takes(order, "snapshot", [40]) == [Take.TAKE]


def test_an_offset_the_broker_does_not_have_is_taken_as_a_hole_after_two_seeks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order = Order()
    takes(order, "snapshot", [0, 1])

    # A transaction's marker at 2: each seek to 2 is answered with 3.
    assert takes(order, "snapshot", [3] * HOLE_SEEKS) == [Take.SEEK] * HOLE_SEEKS
    with caplog.at_level(logging.WARNING, logger="memstream.kafka.order"):
        assert takes(order, "snapshot", [3, 4]) == [Take.TAKE, Take.TAKE]

    assert "has no offsets 2 to 2 (sought 2 times): going on from 3" in caplog.text
    assert takes(order, "snapshot", [2]) == [Take.TAKE]  # should it come after all, it is taken
    assert takes(order, "snapshot", [3]) == [Take.PASS]


def test_gaps_the_seeks_filled_never_count_toward_a_hole() -> None:
    order = Order()
    takes(order, "snapshot", [0])
    for missing in range(1, 2 * (HOLE_SEEKS + 2), 2):
        assert takes(order, "snapshot", [missing + 1]) == [Take.SEEK]
        assert takes(order, "snapshot", [missing, missing + 1]) == [Take.TAKE, Take.TAKE]


def test_a_revoked_partition_forgets_the_stages_places() -> None:
    order = Order()
    takes(order, "snapshot", [0, 1, 2])
    order.revoked({TURNS})

    # The next owner's committed offset places it; another worker went on meanwhile.
    order.start(TURNS, 90)
    assert takes(order, "snapshot", [90]) == [Take.TAKE]


def test_the_offset_awaited_on_a_partition_is_the_lowest_a_stage_takes_next() -> None:
    order = Order()
    order.start(TURNS, 30)
    assert order.awaited(TURNS) == 30  # no stage took any yet: the committed offset
    takes(order, "extract", [30, 31, 32])
    takes(order, "history", [30])

    assert order.awaited(TURNS) == 31
    assert order.awaited(OTHER) is None  # never sought nor taken here
    assert order.taken == 4  # stands still while every stage is idle

"""Each stage takes a partition's events in offset order, none missing between two it takes.

Faust can drop an event between the fetch and a stage and hand on the ones after it: a stream skips
events while flow control is off or after a rebalance, resuming flow control clears the streams'
queues, and the fetch loop moves its read offset past an event whose hand-on a flow suspension cut
short. The event comes again only when its partition is sought back to it, by which time the stage
had applied the later ones: a session's answer went into its window before its question, and kill -9
under load stored two mispaired exchanges (CI, 2026-11-26).

So a stage takes, per partition, only the offset after the last one it took (:class:`Order`). An
event past it is held back (not handled, not finished, so no commit passes it) and its partition is
sought back to the missing offset, once per seek: events handed on before a seek are left to it,
since it reads them again. An event below it the stage has taken already (the commit or a seek for
another stage reads it again) is passed over. An offset the broker does not have (a transaction's
marker, a record removed by retention) answers two seeks in a row with a later one: that hole is
taken as it is, with a warning, and an event of it that does arrive later is taken.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from faust.types import TP

log = logging.getLogger(__name__)
#: Seeks in a row to one missing offset, answered with a later one, before it is taken as a hole.
HOLE_SEEKS = 2


class Take(enum.Enum):
    TAKE = "take"  # the stage handles the event
    PASS = "pass"  # the stage has taken it already, or a seek since its hand-on reads it again
    SEEK = "seek"  # the stage missed the offsets before it: seek back to Place.next, then pass


@dataclass
class Place:
    """Where one stage is on one partition."""

    #: The offset it takes next; None: the first one that comes (nothing sought, nothing taken).
    next: int | None
    #: The missing offset last sought back to, and how many seeks in a row were answered past it.
    sought_for: int | None = None
    seeks: int = 0
    #: Offsets the broker did not have when sought (lo, hi inclusive): taken whenever they come.
    holes: list[tuple[int, int]] = field(default_factory=list)

    def in_hole(self, offset: int) -> bool:
        return any(lo <= offset <= hi for lo, hi in self.holes)


class Order:
    """The places of every stage on the partitions a consumer is assigned."""

    def __init__(self) -> None:
        #: Per partition, per stage that met an event of it: where the stage is.
        self._places: dict[TP, dict[str, Place]] = {}
        #: Per partition, the group's committed offset it was sought to (None: to its beginning).
        self._committed: dict[TP, int | None] = {}
        #: Per partition, the offset of its latest seek (None: its beginning): where it reads from.
        self._position: dict[TP, int | None] = {}
        #: Events taken by any stage on any partition, ever: a count that stands still while all are idle.
        self.taken = 0

    def take(self, stage: str, tp: TP, offset: int, *, handed_before_a_seek: bool) -> Take:
        """May ``stage`` handle the event at ``offset`` of ``tp`` now? ``handed_before_a_seek``: the
        partition was sought after the event was handed on (the seek reads it again, or passed it)."""
        stages = self._places.setdefault(tp, {})
        place = stages.get(stage)
        if place is None:
            place = stages[stage] = Place(self._committed.get(tp))
        expected = place.next
        if expected is None or offset == expected:
            place.next, place.sought_for, place.seeks = offset + 1, None, 0
            self.taken += 1
            return Take.TAKE
        if offset < expected:
            return Take.TAKE if place.in_hole(offset) else Take.PASS
        if handed_before_a_seek and self._reads_again(tp, expected):
            return Take.PASS
        if place.sought_for == expected and place.seeks >= HOLE_SEEKS:
            log.warning(
                "%s: %s has no offsets %d to %d (sought %d times): going on from %d",
                tp,
                stage,
                expected,
                offset - 1,
                place.seeks,
                offset,
            )
            place.holes.append((expected, offset - 1))
            place.next, place.sought_for, place.seeks = offset + 1, None, 0
            self.taken += 1
            return Take.TAKE
        place.seeks = place.seeks + 1 if place.sought_for == expected else 1
        place.sought_for = expected
        log.info("%s: %s missed offsets %d to %d; reading from %d again", tp, stage, expected, offset - 1, expected)
        return Take.SEEK

    def _reads_again(self, tp: TP, offset: int) -> bool:
        """Does ``tp``'s latest seek read ``offset`` again? One to its beginning does; one past it (a
        seek for another stage ahead of this one) does not, and this stage must seek back itself."""
        position = self._position.get(tp, offset)
        return position is None or position <= offset

    def sought(self, tp: TP, offset: int) -> None:
        """``tp`` was sought to ``offset``: it reads from there."""
        self._position[tp] = offset

    def places(self, tp: TP) -> dict[str, int | None]:
        """Per stage that took an event of ``tp``: the offset it takes next."""
        return {stage: place.next for stage, place in self._places.get(tp, {}).items()}

    def awaited(self, tp: TP) -> int | None:
        """The lowest offset a stage takes next on ``tp`` (the committed one while none took any)."""
        nexts = [place.next for place in self._places.get(tp, {}).values()]
        known = [offset for offset in nexts if offset is not None]
        if known:
            return min(known)
        return None if nexts else self._committed.get(tp)

    def next_offset(self, stage: str, tp: TP) -> int | None:
        place = self._places.get(tp, {}).get(stage)
        return place.next if place is not None else None

    def start(self, tp: TP, committed: int | None) -> None:
        """``tp`` was sought to the group's ``committed`` offset (None: none, read from its beginning), as
        an assignment starts it: every event before it was finished by every stage, so a stage behind it
        goes on from it. (A seek back for one stage moves no other: one behind it may still hold events
        before it, handed on earlier, and takes them in order.)"""
        self._committed[tp] = self._position[tp] = committed
        if committed is None:
            return
        for place in self._places.get(tp, {}).values():
            if place.next is None or place.next < committed:
                place.next = committed
            place.holes = [(lo, hi) for lo, hi in place.holes if hi >= committed]

    def revoked(self, tps: set[TP]) -> None:
        """The partitions left this consumer: the next owner's seek places its stages."""
        for tp in tps:
            self._places.pop(tp, None)
            self._committed.pop(tp, None)
            self._position.pop(tp, None)

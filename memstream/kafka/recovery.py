"""Faust's table recovery, ending on a changelog whose end offset has no record to deliver.

Faust's recovery (``faust.tables.recovery.Recovery._slurp_changelogs``) reads each changelog
partition until the last offset it *received* reaches the partition's end offset (the "highwater")
minus one. An end offset that counts offsets no record is delivered at — a transaction's marker, an
aborted write, a batch whose last offset delta runs past its records — is never received, so
recovery waits for it forever. Faust has a fix-up for exactly that (``detect_aborted_tx``: when
the consumer's position has reached the end, the end counts as read), but runs it only
``if app.in_transaction``; memstream runs at-least-once, so it never ran. Seen on a heavy
worker-kill run (issue 35.6): the restarted worker stayed "starting" for over ten minutes, the
topics Faust keeps paused during recovery ("facts[0] has 445 records to read and has not moved")
never resumed, and nothing restarted it.

:class:`Recovery` adds the fix-up for every processing guarantee, with a stricter rule than
Faust's: a partition's end counts as read only when nothing is left in the changelog queue, no
record of it arrived since the previous look, and the consumer's fetch position is at or past the
partition's true end (:func:`passed_ends`) -- and it has been read again once from the last offset
received with the same outcome, since records fetched and then dropped (Faust clears the changelog
queue when flow control resumes) look the same until then. Then Faust's own loop ends recovery at
its next idle cycle (5 s). :class:`TableManager` is Faust's, building this recovery (``faust.App(TableManager=...)``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from faust.tables.manager import TableManager as _FaustTableManager
from faust.tables.recovery import Recovery as _FaustRecovery
from faust.types import TP
from mode import Service

log = logging.getLogger(__name__)
#: Seconds between two looks at the partitions recovery still waits for (Faust's idle cycle is 5 s).
LOOK_SECONDS = 5.0


def passed_ends(
    highwaters: Mapping[TP, int],
    offsets: Mapping[TP, int | None],
    previous: Mapping[TP, int | None],
    positions: Mapping[TP, int | None],
    *,
    queue_empty: bool,
) -> dict[TP, int]:
    """The partitions whose end counts as read although their last offset never arrived: per
    partition, the offset to record as read (its highwater). ``highwaters`` and ``offsets`` as Faust
    keeps them (the last offset of the partition, the last offset received; -1: none), ``previous``
    the offsets received at the previous look, ``positions`` the consumer's next fetch offset."""
    if not queue_empty:
        return {}
    done = {}
    for tp, highwater in highwaters.items():
        offset = offsets.get(tp)
        if highwater is None or offset is None or offset >= highwater:
            continue
        if tp not in previous or previous[tp] != offset:  # records still arrive: not stuck
            continue
        position = positions.get(tp)
        if position is not None and position > highwater:  # nothing left to fetch before the end
            done[tp] = highwater
    return done


class Recovery(_FaustRecovery):
    """Faust's recovery, whose wait for a changelog's end also ends when the consumer is past it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._looked: dict[TP, int | None] = {}
        #: Per partition, the last offset received when it was sought back to it (once per offset).
        self._sought: dict[TP, int] = {}

    async def settle_passed_ends(self) -> dict[TP, int]:
        """One look: record as read every active changelog end the consumer passed without a record."""
        if not self.in_recovery:
            self._looked, self._sought = {}, {}
            return {}
        offsets = self.active_offsets
        waiting = [tp for tp, left in self.active_remaining().items() if left > 0]
        positions: dict[TP, int | None] = {}
        consumer = self.app.consumer
        for tp in waiting:
            try:
                positions[tp] = await asyncio.wait_for(consumer.position(tp), LOOK_SECONDS)
            except Exception:  # not assigned any more, or no position yet: look again next time
                positions[tp] = None
        previous, self._looked = self._looked, {tp: offsets.get(tp) for tp in waiting}
        done = passed_ends(
            {tp: self.active_highwaters[tp] for tp in waiting},
            offsets,
            previous,
            positions,
            queue_empty=self.tables.changelog_queue.empty(),
        )
        again = {tp: offsets[tp] for tp in done if self._sought.get(tp) != offsets[tp]}
        if again:
            # Records fetched but never handed on (Faust clears the changelog queue when flow control
            # resumes) look the same as offsets with no record: read from the last one received again
            # first, as Faust's own seek does; only an end still not reached after that is a gap.
            log.info("table recovery: reading %s again from the last offset received", again)
            await consumer.seek_wait({tp: max(offset, 0) for tp, offset in again.items()})
            self._sought.update(again)
            for tp in again:
                self._looked.pop(tp, None)
                done.pop(tp)
        for tp, highwater in done.items():
            log.warning(
                "table recovery: %s ends at %d but its last record arrived at %d and the consumer is at %s;"
                " the offsets between have no record, recovery goes on",
                tp,
                highwater,
                offsets[tp],
                positions[tp],
            )
            offsets[tp] = highwater
        return done

    @Service.task
    async def _settle_passed_ends(self) -> None:
        while not self.should_stop:
            await self.sleep(LOOK_SECONDS)
            if self.should_stop:
                return
            try:
                await self.settle_passed_ends()
            except Exception as exc:  # a look that failed is taken again at the next one
                log.warning("table recovery: could not look at the changelog positions: %r", exc)


class TableManager(_FaustTableManager):
    """Faust's table manager with memstream's :class:`Recovery`."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery  # type: ignore[return-value]

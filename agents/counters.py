"""Per-scope counters written to their state table on a timer, not per event (issue 18).

A stage's stats (texts embedded, changes applied, audit records kept) are counters read by
operators, not state a stage decides with. Changelogged per event they were a third of the
table records a turn wrote. Here an event adds to a pending delta in memory, and every
``FLUSH_SECONDS`` each scope's delta is folded into its table row: one changelog record per
scope per interval, however many events. The flush waits for a first count, so an idle worker's
counters do not wake it. What a crash loses is at most one interval of
counts (a redelivery counted twice before; counters were approximate either way). The
tables are written through the partitioner, as a timer has no current event.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import faust
import msgspec

S = TypeVar("S", bound=msgspec.Struct)

#: How often pending counts reach their table.
FLUSH_SECONDS = 1.0


def added(a: S, b: S) -> S:
    """Two counter structs of one type, field by field."""
    return type(a)(**{name: getattr(a, name) + getattr(b, name) for name in a.__struct_fields__})


class Counters(Generic[S]):
    """Per-scope counter deltas of one table, waiting for the next flush."""

    def __init__(self, table: faust.Table, empty: type[S]) -> None:
        self.table = table
        self.empty = empty
        self.pending: dict[str, S] = {}
        #: Set while counts wait for a flush.
        self.dirty = asyncio.Event()

    def add(self, key: str, delta: S) -> None:
        current = self.pending.get(key)
        self.pending[key] = delta if current is None else added(current, delta)
        self.dirty.set()

    def flush(self) -> None:
        self.dirty.clear()
        pending, self.pending = self.pending, {}
        for key, delta in pending.items():
            self.table[key] = added(self.table.get(key) or self.empty(), delta)

    def get(self, key: str) -> S:
        """The table's row with the counts not yet flushed."""
        row = self.table.get(key) or self.empty()
        return added(row, self.pending[key]) if key in self.pending else row


def counters(app: faust.App, table: faust.Table, empty: type[S], name: str) -> Counters[S]:
    """Counters for ``table`` (declared ``use_partitioner=True``), flushed by a task of the app
    ``FLUSH_SECONDS`` after the first count that waits for it."""
    buffered = Counters(table, empty)

    async def flush() -> None:
        while not app.should_stop:
            await buffered.dirty.wait()
            await app.sleep(FLUSH_SECONDS)  # mode's sleep: cut short when the app stops
            if app.should_stop:
                # Its producer may be stopped already: the last second's counts are lost, as a
                # crash would lose them (counters are approximate, see above).
                return
            buffered.flush()

    flush.__qualname__ = f"{name}-flush"  # how Faust's logs name the task
    app.task(flush)
    return buffered
